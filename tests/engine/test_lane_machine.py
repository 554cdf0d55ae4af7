"""The lane machine (tests/engine/lane_machine.py) on both lane stores: the in-memory twin with many examples, and
PostgreSQL with as many as the suite's time allows (`bench.lane_machine --store postgres` runs more).

Each PostgreSQL example runs on a database of the suite's pool, lent for the example and emptied after it.
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from orchestrator.core.limits import Limits
from tests.databases import Databases
from tests.engine.lane_machine import machine_on
from tests.lane_worlds import LaneWorld, MemoryWorld, PgWorld, world_settings

MEMORY = settings(max_examples=300, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# A sixth of a second an example on PostgreSQL (a database lent and emptied, a few hundred statements). A failure
# is reported as found, not shrunk: shrinking one takes minutes here, past the test's bound, and the example is
# kept in hypothesis's database for the next run (`bench.lane_machine --store postgres` shrinks what it finds).
POSTGRES = settings(MEMORY, max_examples=60, phases=[p for p in Phase if p != Phase.shrink])


def test_the_lane_step_keeps_its_promises_on_the_in_memory_store() -> None:
    async def open_world(limits: Limits) -> LaneWorld:
        return MemoryWorld(frozen_at=1_000.0)

    run_state_machine_as_test(machine_on(open_world), settings=MEMORY)


def test_the_lane_step_keeps_its_promises_on_postgresql(databases: Databases) -> None:
    async def open_world(limits: Limits) -> LaneWorld:
        return await PgWorld.lend(databases, world_settings(limits))

    run_state_machine_as_test(machine_on(open_world), settings=POSTGRES)
