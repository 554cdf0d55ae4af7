"""A lane's queue kept as ranges of its session's event ids (0032_lane_queue_ranges.sql): a page's run of events
into one lane is one row, events of the session that the lane does not take split it, a batch's finish takes its
head off, a wait's event leaves it split around that event, and `lane_events` (the view) still reads the queue an
event a row. The contract tests (test_lane_store_contract.py) hold the engine's verbs over it to the in-memory
twin's; these look at the rows themselves."""

from __future__ import annotations

import asyncio
from typing import Any

from orchestrator.platform import Platform
from tests.lane_worlds import PgWorld
from tests.store.test_lane_store_contract import address, finish, listener, route_all, snapshot, take


async def _ranges(world: PgWorld, session_id: str) -> list[tuple[int, int]]:
    rows = await world.pool.fetch(
        "SELECT q.first_id, q.last_id FROM orchestrator.lane_queue q JOIN orchestrator.lanes l ON l.id = q.lane_id"
        " WHERE l.session_id = $1 ORDER BY q.first_id",
        session_id,
    )
    return [(int(r["first_id"]), int(r["last_id"])) for r in rows]


def _only_a(**more: Any) -> dict[str, Any]:
    return listener(filter={"types": ["object.written"], "aliases": ["a/**"]}, **more)


async def test_a_run_of_events_into_one_lane_is_one_range_and_an_event_it_does_not_take_splits_it(
    platform: Platform,
) -> None:
    world = PgWorld(platform)
    await world.save_listener(_only_a())
    sid = await world.open_session()
    ids = [await world.write(sid, alias) for alias in ("a/1", "a/2", "b/1", "a/3", "a/4", "a/5")]
    await route_all(world, sid)
    assert await _ranges(world, sid) == [(ids[0], ids[1]), (ids[3], ids[5])]
    # Read an event a row, as before: what waits, in order, and nothing of b/1's.
    assert await world.queue_rows(address(sid)) == [ids[0], ids[1], *ids[3:]]
    assert [q.id for q in (await snapshot(world, address(sid))).waiting] == [ids[0], ids[1], *ids[3:]]
    # Another session's events between them split nothing: ranges are of the session's own events.
    other = await world.open_session()
    more = []
    for n in range(3):
        more.append(await world.write(sid, f"a/{6 + n}"))
        await world.write(other, f"a/{n}")
    await route_all(world, sid)
    assert (await _ranges(world, sid))[-1] == (more[0], more[-1])


async def test_a_batch_that_takes_the_head_of_a_range_leaves_the_rest_and_keeps_when_each_was_queued(
    platform: Platform,
) -> None:
    world = PgWorld(platform)
    await world.save_listener(_only_a(batch={"window_seconds": 0, "max_events": 3}))
    sid = await world.open_session()
    ids = [await world.write(sid, f"a/{n}") for n in range(5)]
    await route_all(world, sid)
    assert await _ranges(world, sid) == [(ids[0], ids[4])]
    queued_at = await world.pool.fetchval("SELECT queued_at FROM orchestrator.lane_queue")
    snap, decision, recorded = await take(world, address(sid))
    assert decision.consumed == tuple(ids[:3])
    await finish(world, snap, decision, recorded)
    assert [q.id for q in (await snapshot(world, address(sid))).waiting] == ids[3:]
    # The range starts past the batch: what is left waits, whatever id the batch's last left the start at.
    [(first, last)] = await _ranges(world, sid)
    assert first == ids[2] + 1 and last == ids[4]
    assert await world.queue_rows(address(sid)) == ids[3:]
    kept = await world.pool.fetchval("SELECT queued_at FROM orchestrator.batches WHERE id = $1", recorded.batch_id)
    assert kept == [queued_at] * 3


async def test_an_event_taken_out_of_a_lane_leaves_its_range_split_around_it(platform: Platform) -> None:
    world = PgWorld(platform)
    await world.save_listener(_only_a())
    sid = await world.open_session()
    ids = [await world.write(sid, alias) for alias in ("a/0", "b/0", "a/1", "a/2", "a/3", "a/4")]
    await route_all(world, sid)
    lane_id = (await snapshot(world, address(sid))).lane_id
    assert await _ranges(world, sid) == [(ids[0], ids[0]), (ids[2], ids[5])]

    async def unqueue(event_id: int) -> None:
        await world.pool.execute("SELECT orchestrator.orchestrator_lane_unqueue($1, $2, $3)", lane_id, sid, event_id)

    await unqueue(ids[3])  # the middle of a range: two ranges, each ending at an event of the lane
    assert await _ranges(world, sid) == [(ids[0], ids[0]), (ids[2], ids[2]), (ids[3] + 1, ids[5])]
    await unqueue(ids[5])  # its end: the range ends at the event before
    await unqueue(ids[0])  # a range of one: gone
    assert await _ranges(world, sid) == [(ids[2], ids[2]), (ids[3] + 1, ids[4])]
    await unqueue(ids[1])  # an event the lane never had: nothing changes
    await unqueue(ids[4])  # the range's only event left, though it starts before it: gone
    assert await _ranges(world, sid) == [(ids[2], ids[2])]
    assert await world.queue_rows(address(sid)) == [ids[2]]


async def test_a_batch_finishing_while_a_wait_takes_an_event_of_the_same_range_waits_and_both_hold(
    platform: Platform,
) -> None:
    """A wait that takes an event splits the range a batch's finish cuts: the finish waits for the lane's row the
    wait holds, then cuts the ranges as the wait left them (acting on the range as it read it, it cut nothing)."""
    world = PgWorld(platform)
    await world.save_listener(_only_a(batch={"window_seconds": 0, "max_events": 2}))
    sid = await world.open_session()
    ids = [await world.write(sid, f"a/{n}") for n in range(6)]
    await route_all(world, sid)
    snap, decision, recorded = await take(world, address(sid))
    assert decision.consumed == tuple(ids[:2])
    waiter = await world.pool.acquire()
    try:
        wait = waiter.transaction()
        await wait.start()
        # What `orchestrator_wait_answered` does for a wait that takes ids[3]: the lane's row, then the split.
        await waiter.execute("SELECT 1 FROM orchestrator.lanes WHERE id = $1 FOR UPDATE", snap.lane_id)
        await waiter.execute("SELECT orchestrator.orchestrator_lane_unqueue($1, $2, $3)", snap.lane_id, sid, ids[3])
        taking = asyncio.create_task(
            world.pool.execute("SELECT orchestrator.orchestrator_batch_take_queue($1)", recorded.batch_id)
        )
        await asyncio.sleep(0.5)
        assert not taking.done(), "the finish cut the range while the wait held its lane"
        await wait.commit()
        await taking
    finally:
        await world.pool.release(waiter)
    assert await _ranges(world, sid) == [(ids[1] + 1, ids[2]), (ids[3] + 1, ids[5])]
    assert await world.queue_rows(address(sid)) == [ids[2], ids[4], ids[5]]
    kept = await world.pool.fetchval("SELECT queued_at FROM orchestrator.batches WHERE id = $1", recorded.batch_id)
    assert len(kept) == 2 and None not in kept
