"""A lane store with the little world around it, on PostgreSQL or in memory, in one shape for both.

The contract suite (tests/store/test_lane_store_contract.py), the lane machine (tests/engine/lane_machine.py) and
the crossing faults (tests/engine/crossing_world.py) set a world up (sessions, listeners, writes, pauses,
replays asked for), drive the store's verbs through the real driver, move the world's clock on, and read back
what the store holds (`Held`: lanes, batches, slots, runs, events) to check their promises. `MemoryWorld` is
the in-memory twin; `PgWorld` is a migrated database behind the platform's own commands and `PgLaneStore`.

PostgreSQL's clock is the database's, which a test cannot set: `PgWorld.advance` moves the world on by moving
every time the database holds into the past by as much, so what was due is due and what waited has waited. A
world's `now` is its own clock: the wall clock plus every advance so far, and the times a `Held` reports are on
it.
"""

from tests.lane_worlds.held import BatchRow, EventRow, ExecutionRow, Held, LaneRow, RunRow
from tests.lane_worlds.memory import MemoryWorld
from tests.lane_worlds.postgres import PgWorld, world_settings
from tests.lane_worlds.world import LaneWorld, lane_address, route_round

__all__ = [
    "BatchRow",
    "EventRow",
    "ExecutionRow",
    "Held",
    "LaneRow",
    "LaneWorld",
    "MemoryWorld",
    "PgWorld",
    "RunRow",
    "lane_address",
    "route_round",
    "world_settings",
]
