"""The crossings between PostgreSQL and Temporal under seeded random faults (`crossing_world.World`), on both lane
stores.

The suite runs `SCHEDULES` seeded schedules on the in-memory twin and the first `PG_SCHEDULES` of them on
PostgreSQL (`bench/crossing_faults.py` runs as many more as it is asked, on either); each one checks the promises
after every step and once settled (see `crossing_world`). A failing seed is named in the assertion, and
`python -m bench.crossing_faults --seeds N-N [--store postgres]` runs it again alone.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from orchestrator.core.limits import Limits
from orchestrator.workflows.messages import RunInput, RunTag
from tests.databases import Databases
from tests.engine.crossing_world import World, WorldOpener, in_memory, run_schedule
from tests.lane_worlds import LaneWorld, PgWorld, world_settings

# Forty a block: about one schedule in eight meets the sweep's `DriveLane`, and a block of thirty met it once, which
# a change of the draws a schedule makes (a step more or less) moved out of the block.
SCHEDULES = 160
FUNCTIONS = Path(__file__).parents[2] / "orchestrator" / "store" / "functions"
# About three quarters of a second a schedule on PostgreSQL (thirty times the twin's).
PG_SCHEDULES = 40
# The crossings every run of schedules dies at, and what its sweeps meet.
CROSSINGS = ("batch.recorded", "run.started", "run_end.recorded", "route.saved", "batch.finished")


def on_postgres(databases: Databases) -> WorldOpener:
    async def open_world(limits: Limits) -> LaneWorld:
        return await PgWorld.lend(databases, world_settings(limits))

    return open_world


def run_schedules(seeds: range, open_world: WorldOpener) -> None:
    deaths: Counter[str] = Counter()
    sweeps: Counter[str] = Counter()
    for seed in seeds:
        world = run_schedule(seed, open_world=open_world)
        deaths.update(world.faults.deaths)
        sweeps.update(world.sweeps)
    # The schedules reached the crossings they are about.
    for point in CROSSINGS:
        assert deaths[point] > 0, f"no schedule died at {point}: {deaths}"
    # And the sweep met runs recorded and never started, and runs that closed without a word.
    assert sweeps["DriveLane"] > 0 and sweeps["RecordEnd"] > 0, sweeps


@pytest.mark.parametrize("block", range(4))
def test_random_faults_at_the_crossings_lose_nothing_and_end_no_run_that_temporal_did_not(block: int) -> None:
    run_schedules(range(block * SCHEDULES // 4, (block + 1) * SCHEDULES // 4), in_memory)


def test_random_faults_at_the_crossings_lose_nothing_and_end_no_run_that_temporal_did_not_on_postgresql(
    databases: Databases,
) -> None:
    run_schedules(range(PG_SCHEDULES), on_postgres(databases))


@pytest.fixture(params=["memory", "postgres"])
def open_world(request: pytest.FixtureRequest) -> WorldOpener:
    if request.param == "postgres":
        return on_postgres(request.getfixturevalue("databases"))
    return in_memory


def test_a_run_started_after_its_sessions_deletion_ended_its_runs_is_stopped(open_world: WorldOpener) -> None:
    """A batch recorded before its session was marked for deletion, whose run starts after the deletion ended the
    session's runs on Temporal: the finish finds the session going, and the driver stops the run it started."""
    world = World(0, open_world)
    while world.writes_objects:  # a world whose listener starts runs
        world.close()
        world = World(world.seed + 1, open_world)
    try:
        world.faults.on = False
        world.write()
        world.run(world._route())
        real_start = world.temporal.start

        async def deleted_first(tag: RunTag, run_input: RunInput, priority: Any) -> None:
            await world.stores.mark_deleting(world.session)  # marked, and its runs ended, meanwhile
            await real_start(tag, run_input, priority)

        world.temporal.start = deleted_first  # type: ignore[method-assign]
        world.clock_runs_on(5.0)
        for workflow_id in list(world.clocks):
            world.run(world._fire(workflow_id))
        assert world.temporal.runs, "the run started"
        assert all(run.closed == "stopped" for run in world.temporal.runs.values()), world.temporal.runs
    finally:
        world.close()


def test_a_finish_of_the_release_before_stops_no_run(databases: Databases) -> None:
    """A rolling upgrade: a process of the release before, started after this one, applies its own batch finish,
    which answers no session status. The driver reads the status from the snapshot that finish always answers, as
    that release did, and stops no run for a session it takes for gone."""
    shipped = (FUNCTIONS / "orchestrator_batch_finish.sql").read_text(encoding="utf-8")
    before = (Path(__file__).parent / "release_before" / "orchestrator_batch_finish.sql").read_text(encoding="utf-8")
    world = World(0, on_postgres(databases))
    while world.writes_objects:  # a world whose listener starts runs
        world.close()
        world = World(world.seed + 1, on_postgres(databases))
    stores = world.stores
    assert isinstance(stores, PgWorld)
    try:
        world.faults.on = False
        world.run(stores.pool.execute(before))
        world.write()
        world.run(world._route())
        world.clock_runs_on(5.0)
        for workflow_id in list(world.clocks):
            world.run(world._fire(workflow_id))
        assert world.temporal.runs, "the run started"
        assert all(run.closed is None for run in world.temporal.runs.values()), world.temporal.runs
    finally:
        world.run(stores.pool.execute(shipped))
        world.close()
