"""The workflow `responder` of docs/commands.md's examples, in a module of its own: a workflow's module is
imported again inside Temporal's sandbox, where the page-reading test module could not run."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from orchestrator.workflows.messages import RunInput


@workflow.defn(name="responder")
class Responder:
    """Answers nothing and never ends: its run stays in flight until it is stopped."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        await workflow.wait_condition(lambda: False)
