"""The app workflow of the telemetry tests: a run that writes one object through the run-side SDK."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from orchestrator.sdk import RunInput, RunSession


@workflow.defn(name="traced_writer")
class TracedWriter:
    @workflow.run
    async def run(self, run: RunInput) -> dict[str, Any]:
        return await RunSession(run).write_object("out/result", {"type": "result", "count": run.batch.count})
