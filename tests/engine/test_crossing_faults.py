"""The crossings between PostgreSQL and Temporal under seeded random faults (`crossing_world.World`).

The suite runs `SCHEDULES` seeded schedules (`bench/crossing_faults.py` runs as many more as it is asked); each
one checks the promises after every step and once settled (see `crossing_world`). A failing seed is named in
the assertion, and `python -m bench.crossing_faults --seeds N-N` runs it again alone.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from orchestrator.workflows.messages import RunInput, RunTag
from tests.engine.crossing_world import SESSION, World, run_schedule

SCHEDULES = 120


@pytest.mark.parametrize("block", range(4))
def test_random_faults_at_the_crossings_lose_nothing_and_end_no_run_that_temporal_did_not(block: int) -> None:
    deaths: Counter[str] = Counter()
    sweeps: Counter[str] = Counter()
    for seed in range(block * SCHEDULES // 4, (block + 1) * SCHEDULES // 4):
        world = run_schedule(seed)
        deaths.update(world.faults.deaths)
        sweeps.update(world.sweeps)
    # The schedules reached the crossings they are about.
    for point in ("batch.recorded", "run.started", "run_end.recorded", "route.saved", "batch.finished"):
        assert deaths[point] > 0, f"no schedule died at {point}: {deaths}"
    # And the sweep met runs recorded and never started, and runs that closed without a word.
    assert sweeps["DriveLane"] > 0 and sweeps["RecordEnd"] > 0, sweeps


def test_a_run_started_after_its_sessions_deletion_ended_its_runs_is_stopped() -> None:
    """A batch recorded before its session was marked for deletion, whose run starts after the deletion ended the
    session's runs on Temporal: the finish finds the session going, and the driver stops the run it started."""
    world = World(0)
    while world.writes_objects:  # a world whose listener starts runs
        world.loop.close()
        world = World(world.seed + 1)
    world.faults.on = False
    world.write()
    world.run(world._route())
    real_start = world.temporal.start

    async def deleted_first(tag: RunTag, run_input: RunInput, priority: Any) -> None:
        world.store.sessions[SESSION]["status"] = "deleting"  # marked, and its runs ended, meanwhile
        await real_start(tag, run_input, priority)

    world.temporal.start = deleted_first  # type: ignore[method-assign]
    world.t += 5.0
    for workflow_id in list(world.clocks):
        world.run(world._fire(workflow_id))
    assert world.temporal.runs, "the run started"
    assert all(run.closed == "stopped" for run in world.temporal.runs.values()), world.temporal.runs
    world.loop.close()
