"""The run sweep beside a run that reports its own end while the sweep looks at it.

The sweep reads the runs its records call running, then asks Temporal of each. A run that reports its end in
between (it does so before the task that closes it completes) is closed by the time Temporal answers: the sweep
finds its end recorded, keeps the run's own, and says nothing of a run that did not report.
"""

from __future__ import annotations

import logging

import pytest

from orchestrator.core.run_checks import RecordEnd, Word
from orchestrator.workflows.messages import RunTag
from tests.engine.crossing_world import World


def a_world_of_workflow_runs() -> World:
    for seed in range(100):
        world = World(seed)
        if not world.writes_objects:
            world.faults.on = False
            return world
        world.close()
    raise AssertionError("no seed gives a listener whose action is a workflow")


def test_a_run_that_reports_while_the_sweep_looks_keeps_its_own_end(caplog: pytest.LogCaptureFixture) -> None:
    world = a_world_of_workflow_runs()
    try:
        world.write()
        world.run(world._route())
        world.lanes_step()
        [run] = world.temporal.open()[:1]
        execution_id = run.tag.execution_id
        world.closing[execution_id] = "completed"
        world.temporal.returned(execution_id)
        # Past the sweep's interval: the run is due for a look.
        world.clock_runs_on(world.settings.run_check_seconds + 1)

        asked = world.temporal.word

        async def reports_as_it_is_asked(execution_id_asked: str) -> tuple[Word, RunTag | None]:
            if execution_id_asked in world.closing:
                await world._report(execution_id_asked)
            return await asked(execution_id_asked)

        world.temporal.word = reports_as_it_is_asked  # type: ignore[method-assign]
        caplog.set_level(logging.WARNING, logger="orchestrator.engine.run_sweep")
        checks = world.loop.run_until_complete(world.sweep.round())

        assert [type(check) for record, check in checks if record.execution_id == execution_id] == [RecordEnd]
        execution = world.held().executions[execution_id]
        assert (execution.status, execution.error) == ("completed", None), "the run's own end, not the sweep's"
        assert not [r for r in caplog.records if "without reporting" in r.getMessage()], caplog.text
    finally:
        world.close()
