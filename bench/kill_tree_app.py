"""The app `bench.kill_tree` runs under `orchestrator dev`: a serial listener and a keyed one over 20 keys, whose
runs take 1 to 2 s, as in the case that lost writes when the whole tree was killed mid-burst."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from orchestrator.workflows.messages import RunInput

KEYS = 20


@workflow.defn(name="slow_noted")
class SlowNoted:
    @workflow.run
    async def run(self, run: RunInput) -> int:
        await workflow.sleep(timedelta(seconds=1 + workflow.random().random()))
        return run.batch.count


workflows = [SlowNoted]
_common = {"filter": {"types": ["object.written"], "aliases": ["burst/**"]}}
listeners = [
    {
        "name": "kill-serial",
        **_common,
        "batch": {"window_seconds": 0.2, "max_events": 200},
        "action": {"type": "workflow", "workflow": "slow_noted"},
    },
    {
        "name": "kill-keyed",
        **_common,
        "concurrency": {"mode": "keyed", "key": "alias", "key_segments": 2, "max_parallel": 8},
        "batch": {"window_seconds": 0.2, "max_events": 200},
        "action": {"type": "workflow", "workflow": "slow_noted"},
    },
]
