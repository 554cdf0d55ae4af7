"""The app `orchestrator dev` runs in the dev-process crash test: one workflow that does nothing.

What the test asserts (every acknowledged write reached a run) is read from the platform's own execution
records through the HTTP door, so the app needs no store of its own.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from orchestrator.workflows.messages import RunInput


@workflow.defn(name="noted")
class Noted:
    @workflow.run
    async def run(self, run: RunInput) -> int:
        return run.batch.count


workflows = [Noted]
listeners = [
    {
        "name": "noted",
        "filter": {"types": ["object.written"], "aliases": ["burst/**"]},
        "batch": {"window_seconds": 0.2, "max_events": 200},
        "action": {"type": "workflow", "workflow": "noted"},
    }
]
