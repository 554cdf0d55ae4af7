"""A routing round answers in the orders it states, whatever order its statements read rows in: the traced events
it read in id order, and the lanes it makes in (listener, lane) order, their ids too. Rows an UPDATE moved to the
end of their table are read last by a sequential scan, a hash join reads in no order of its own, and a hashed
`DISTINCT` answers in a hash's order. The contract tests hold the nudges' order on both stores; these look at what
only PostgreSQL answers: the traced events, and the lanes' ids."""

from __future__ import annotations

from opentelemetry import trace

from orchestrator.platform import Platform
from tests.lane_worlds import PgWorld
from tests.store.test_lane_store_contract import LIMITS, keyed

ALIASES = ["c", "a", "zz", "m", "q", "e", "x1", "y", "h", "g", "d", "b"]
CALLER = trace.SpanContext(
    trace_id=0x0AF7651916CD43DD8448EB211C80319C,
    span_id=0xB7AD6B7169203331,
    is_remote=True,
    trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
)


async def test_a_round_answers_its_traced_events_in_id_order(platform: Platform) -> None:
    world = PgWorld(platform)
    await world.save_listener(keyed(max_parallel=len(ALIASES)))
    sid = await world.open_session()
    with trace.use_span(trace.NonRecordingSpan(CALLER)):
        ids = [await world.write(sid, alias) for alias in ALIASES]
    # The first events' rows moved to the end of the table, after the others.
    await world.pool.execute("UPDATE orchestrator.events SET data = data WHERE id = ANY ($1::bigint[])", ids[:3])
    routed = await world.lanes.route_page(sid, 1000, LIMITS.listener_parallel_runs)
    assert routed.read == len(ids)
    assert [(t.id, t.lanes) for t in routed.traced] == [(i, 1) for i in ids]
    assert all(t.traceparent.split("-")[1] == f"{CALLER.trace_id:032x}" for t in routed.traced)


async def test_a_round_makes_its_lanes_in_listener_and_lane_order(platform: Platform) -> None:
    world = PgWorld(platform)
    for name in ("k", "j"):
        await world.save_listener(keyed(name, max_parallel=len(ALIASES)))
    sid = await world.open_session()
    for alias in ALIASES:
        await world.write(sid, alias)
    await world.lanes.route_page(sid, 1000, LIMITS.listener_parallel_runs)
    made = await world.pool.fetch(
        "SELECT listener, lane FROM orchestrator.lanes WHERE session_id = $1 ORDER BY id", sid
    )
    in_order = [(name, lane) for name in ("j", "k") for lane in sorted(ALIASES)]
    assert [(r["listener"], r["lane"]) for r in made] == in_order
