"""One contract for both lane stores: `PgLaneStore` on a real PostgreSQL and the in-memory twin.

Each test sets a small world up through the `World` it is given (tests/lane_worlds/: a session, a listener,
some writes), then drives the verbs the engine uses and checks what each answers and what the next snapshot
shows: every verb of the `LaneStore` Protocol, the `ExecutionRecords` the twin also stands in for (a run of no
lane recorded before its start), and what the twin keeps of the world around lanes: listener versions, a
listener switched off in a session, a closed session. The decisions come from the real lane step, so the stores
are held to what the engine asks of them.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any
from unittest.mock import ANY

import pytest

from orchestrator.core.errors import CommandError
from orchestrator.core.lane_keys import lane_workflow_id
from orchestrator.core.lane_snapshot import (
    ACT,
    CONSUME,
    Drop,
    Finish,
    LaneAddress,
    LaneSnapshot,
    Stop,
    Take,
    Wait,
    fetch_limit,
)
from orchestrator.core.lane_step import step, take_of_claimed
from orchestrator.core.limits import Limits
from orchestrator.core.outcomes import Outcome
from orchestrator.platform import Platform
from orchestrator.store.lane_store import (
    STALE_GRACE_SECONDS,
    Ending,
    Finished,
    Finishing,
    Recorded,
    RoutedPage,
    Stale,
)
from tests.lane_worlds import LaneWorld as World
from tests.lane_worlds import MemoryWorld, PgWorld, route_round

LIMITS = Limits(activation_delay_seconds=0)


@pytest.fixture(params=["postgres", "postgres_elsewhere", "memory"])
def world(request: pytest.FixtureRequest) -> World:
    """The store on PostgreSQL (in the default schema, and in another one: tests/conftest.py's `OTHER_SCHEMA`),
    and the in-memory twin."""
    if request.param == "postgres":
        return PgWorld(request.getfixturevalue("platform"))
    if request.param == "postgres_elsewhere":
        return PgWorld(request.getfixturevalue("platform_elsewhere"))
    return MemoryWorld()


def listener(name: str = "l", **more: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "filter": {"types": ["object.written"]},
        "batch": {"window_seconds": 0, "max_events": 100},
        "action": {"type": "workflow", "workflow": "w"},
    }
    body.update(more)
    return body


def keyed(name: str = "k", max_parallel: int = 1) -> dict[str, Any]:
    return listener(name, concurrency={"mode": "keyed", "key": "alias", "max_parallel": max_parallel})


async def route_all(world: World, session_id: str) -> RoutedPage:
    """One routing round, as the router runs it (checked against the core's `route` of the events it read)."""
    routed, _ = await route_round(world, session_id, LIMITS.listener_parallel_runs)
    return routed


def address(session_id: str, name: str = "l", lane: str = "_") -> LaneAddress:
    return LaneAddress(session_id, name, lane, lane_workflow_id(session_id, name, lane))


async def snapshot(world: World, where: LaneAddress) -> LaneSnapshot:
    snap = await world.lanes.snapshot(where)
    assert snap is not None
    return snap


async def take(world: World, where: LaneAddress) -> tuple[LaneSnapshot, Take, Recorded]:
    snap = await snapshot(world, where)
    decision = step(snap, snap.now, LIMITS)
    assert isinstance(decision, Take), decision
    recorded = await world.lanes.record(snap, decision, LIMITS.listener_fires_per_minute, 1)
    assert isinstance(recorded, Recorded), recorded
    return snap, decision, recorded


async def finish(
    world: World, snap: LaneSnapshot, decision: Take, recorded: Recorded, *, started: bool = True
) -> LaneSnapshot | None:
    return (await finishing(world, snap, decision, recorded, started=started)).snapshot


async def finishing(
    world: World, snap: LaneSnapshot, decision: Take, recorded: Recorded, *, started: bool = True
) -> Finished:
    outcome = Outcome(
        status="success" if started else "invocation_error",
        listener=snap.address.listener,
        lane=snap.address.lane,
        first_id=decision.first_id,
        last_id=decision.last_id,
        event_ids=list(decision.consumed),
        count=len(decision.entries),
        execution_id=decision.execution_id if started else None,
        at=datetime.now(UTC),
    )
    return await world.lanes.finish(
        Finishing(
            snap=snap,
            take=decision,
            batch_id=recorded.batch_id,
            started=started,
            outcome=outcome,
            version=1,
            release=decision.plan is not None and not started,
            key_max=1,
        )
    )


async def one_run(world: World, **declared: Any) -> tuple[str, Any]:
    """A session with one event in the lane of a listener (`declared`: its body's fields beside the defaults), its
    batch taken and its run started: (session, take)."""
    await world.save_listener(listener(**declared))
    sid = await world.open_session()
    await world.write(sid, "a/1")
    await route_all(world, sid)
    snap, decision, recorded = await take(world, address(sid))
    await finish(world, snap, decision, recorded)
    return sid, decision


async def end(world: World, session_id: str, execution_id: str, status: str = "completed", **more: Any) -> Any:
    return await world.lanes.end_run(
        Ending(
            execution_id=execution_id,
            session_id=session_id,
            status=status,
            error=None,
            listener=more.pop("listener", "l"),
            **more,
        )
    )


async def test_a_round_queues_its_events_and_answers_the_lanes_it_made_pending(world: World) -> None:
    await world.save_listener(listener())
    sid = await world.open_session()
    ids = [await world.write(sid, f"a/{n}") for n in range(3)]
    routed = await route_all(world, sid)
    assert routed.read == 3 and [n.address.workflow_id for n in routed.nudges] == [address(sid).workflow_id]
    assert routed.lanes == (("l", "_", 3),)
    snap = await snapshot(world, address(sid))
    assert [q.id for q in snap.waiting] == ids and snap.pending == 3
    assert snap.oldest_at == snap.waiting[0].committed and snap.newest_id == ids[-1]
    # A lane with events waiting is not nudged again; a round with nothing new reads nothing.
    await world.write(sid, "a/3")
    again = await route_all(world, sid)
    assert again.read == 1 and again.nudges == ()
    assert (await route_all(world, sid)).read == 0


async def test_a_read_holds_at_most_what_a_batch_takes(world: World) -> None:
    # `max_events` left out of the body: the declaration's default (100) bounds the read, not `FETCH_EVENTS`.
    await world.save_listener(listener(batch={"window_seconds": 0}))
    sid = await world.open_session()
    ids = [await world.write(sid, f"a/{n}") for n in range(105)]
    await route_all(world, sid)
    snap = await snapshot(world, address(sid))
    assert [q.id for q in snap.waiting] == ids[:100]
    assert fetch_limit(snap.listener) == 100


async def test_a_lane_never_queued_for_has_no_snapshot(world: World) -> None:
    sid = await world.open_session()
    assert await world.lanes.snapshot(address(sid)) is None


async def test_a_record_takes_the_batch_and_its_slot_and_the_finish_answers_the_next_snapshot(world: World) -> None:
    await world.save_listener(listener())
    sid = await world.open_session()
    ids = [await world.write(sid, f"a/{n}") for n in range(2)]
    await route_all(world, sid)
    snap, decision, recorded = await take(world, address(sid))
    assert decision.consumed == tuple(ids) and decision.verdict == ACT and decision.plan is not None
    after = await finish(world, snap, decision, recorded)
    assert after is not None and after.pending == 0 and after.fired_through == ids[-1]
    assert [r.execution_id for r in after.runs] == [decision.execution_id]
    assert after.claimed is None and after.seq == snap.seq + 1
    # Its slot is held: the next event waits for it.
    await world.write(sid, "a/2")
    await route_all(world, sid)
    blocked = step(await snapshot(world, address(sid)), time.time(), LIMITS)
    assert isinstance(blocked, Wait) and blocked.reason == "slot_held"


async def test_a_fired_batch_leaves_no_queue_rows_and_what_is_left_waits(world: World) -> None:
    await world.save_listener(listener(batch={"window_seconds": 0, "max_events": 2}))
    sid = await world.open_session()
    ids = [await world.write(sid, f"a/{n}") for n in range(3)]
    await route_all(world, sid)
    assert await world.queue_rows(address(sid)) == ids
    snap, decision, recorded = await take(world, address(sid))
    assert decision.consumed == tuple(ids[:2])
    # The record moves the lane past its batch (what waits is after `fired_through`); its finish takes the
    # batch's queue rows, and the event past `max_events` still waits in the queue.
    waiting = await snapshot(world, address(sid))
    assert [q.id for q in waiting.waiting] == ids[2:]
    await finish(world, snap, decision, recorded)
    assert await world.queue_rows(address(sid)) == ids[2:]
    await end(world, sid, decision.execution_id)
    snap, decision, recorded = await take(world, address(sid))
    assert decision.consumed == tuple(ids[2:])
    await finish(world, snap, decision, recorded)
    assert await world.queue_rows(address(sid)) == []


async def test_a_record_over_a_snapshot_the_lane_has_moved_past_is_refused(world: World) -> None:
    await world.save_listener(listener(action={"type": "object", "alias": "out", "value": {"type": "o"}}))
    sid = await world.open_session()
    await world.write(sid, "a/1")
    await route_all(world, sid)
    snap = await snapshot(world, address(sid))
    decision = step(snap, snap.now, LIMITS)
    assert isinstance(decision, Take)
    assert isinstance(await world.lanes.record(snap, decision, 100, 0), Recorded)
    assert await world.lanes.record(snap, decision, 100, 0) == Stale("seq")


async def test_a_paused_listener_and_a_full_throttle_refuse_the_record(world: World) -> None:
    await world.save_listener(listener())
    sid = await world.open_session()
    await world.write(sid, "a/1")
    await route_all(world, sid)
    snap = await snapshot(world, address(sid))
    decision = step(snap, snap.now, LIMITS)
    assert isinstance(decision, Take)
    assert await world.lanes.record(snap, decision, 0, 0) == Stale("throttle")
    await world.pause("l")
    assert await world.lanes.record(snap, decision, 100, 0) == Stale("paused")


def by_hand(sid: str, n: int) -> dict[str, Any]:
    """The record of a run of no lane (`start_execution`'s), the `n`th of the session."""
    return {
        "execution_id": f"exe:by-hand:{n}",
        "session_id": sid,
        "workflow": "w",
        "listener": None,
        "lane": None,
        "batch": None,
        "run_key": None,
        "depth": 0,
        "start_input": {"input": {"n": n}},
    }


async def test_a_run_recorded_when_the_session_runs_its_limit_is_stale_and_its_next_verdict_refuses_it(
    world: World,
) -> None:
    # The snapshot counts one run; another starts before the record (a lane or a start recorded meanwhile): the
    # record counts two again and is stale, and the next read's verdict refuses the batch, which then records.
    limits = Limits(activation_delay_seconds=0, executions_per_session=2)
    await world.save_listener(listener())
    sid = await world.open_session()
    assert await world.records.execution_started(by_hand(sid, 1))
    await world.write(sid, "a/1")
    await route_all(world, sid)
    snap = await snapshot(world, address(sid))
    assert snap.running_executions == 1
    decision = step(snap, snap.now, limits)
    assert isinstance(decision, Take) and decision.verdict == ACT and decision.plan is not None
    assert await world.records.execution_started(by_hand(sid, 2))
    assert await world.lanes.record(snap, decision, 100, 0, executions_limit=2) == Stale("executions")
    snap = await snapshot(world, address(sid))
    assert snap.running_executions == 2
    refused = step(snap, snap.now, limits)
    assert isinstance(refused, Take) and refused.plan is None
    assert refused.verdict == Stop("refused", None, "executions_per_session: 2 running")
    assert isinstance(await world.lanes.record(snap, refused, 100, 0, executions_limit=2), Recorded)
    held = await world.held()
    assert sorted(x for x in held.executions) == ["exe:by-hand:1", "exe:by-hand:2"], "no run recorded for the lane"


async def test_a_run_recorded_under_the_limit_counts_toward_it(world: World) -> None:
    await world.save_listener(listener())
    sid = await world.open_session()
    await world.write(sid, "a/1")
    await route_all(world, sid)
    snap = await snapshot(world, address(sid))
    decision = step(snap, snap.now, LIMITS)
    assert isinstance(decision, Take) and decision.plan is not None
    assert isinstance(await world.lanes.record(snap, decision, 100, 0, executions_limit=1), Recorded)
    with pytest.raises(CommandError) as refused:
        await world.records.execution_started(by_hand(sid, 1), 1)
    assert (refused.value.code, refused.value.message) == ("limit_exceeded", "executions_per_session: 1 running")


async def test_a_run_of_no_lane_past_the_limit_is_refused_and_not_recorded(world: World) -> None:
    sid = await world.open_session()
    assert await world.records.execution_started(by_hand(sid, 1), 1)
    assert not await world.records.execution_started(by_hand(sid, 1), 1), "the same run again: known, not refused"
    with pytest.raises(CommandError) as refused:
        await world.records.execution_started(by_hand(sid, 2), 1)
    assert (refused.value.code, refused.value.message) == ("limit_exceeded", "executions_per_session: 1 running")
    assert await world.records.execution_started(by_hand(sid, 3), 2)
    held = await world.held()
    assert sorted(held.executions) == ["exe:by-hand:1", "exe:by-hand:3"]
    started = [e.execution_id for e in held.events.values() if e.type == "execution.started"]
    assert sorted(started) == ["exe:by-hand:1", "exe:by-hand:3"]


async def fire(world: World, sid: str, alias: str, *names: str) -> None:
    """A write the listeners `names` take (`l` by default), and a counted batch of each, its run started and
    ended."""
    await world.write(sid, alias)
    await route_all(world, sid)
    for name in names or ("l",):
        snap, decision, recorded = await take(world, address(sid, name))
        await finish(world, snap, decision, recorded)
        assert (await end(world, sid, decision.execution_id, listener=name)).recorded


async def test_the_throttle_counts_the_fires_of_the_last_minute_and_no_older(world: World) -> None:
    # Two listeners fire in turn, three times each: each counts its own three. The oldest fire (the first
    # listener's) moved out of the minute, that one counts two and the other still three: a limit of three
    # lets the first fire again, a limit of two does not.
    await world.save_listener(listener())
    await world.save_listener(listener("m"))
    sid = await world.open_session()
    for n in range(3):
        await fire(world, sid, f"a/{n}", "l", "m")
    await world.write(sid, "a/3")
    await route_all(world, sid)
    assert (await snapshot(world, address(sid, "m"))).fires_last_minute == 3
    snap = await snapshot(world, address(sid))
    assert snap.fires_last_minute == 3
    decision = step(snap, snap.now, LIMITS)
    assert isinstance(decision, Take)
    assert await world.lanes.record(snap, decision, 3, 0) == Stale("throttle")
    await world.backdate_oldest_fire(61)
    snap = await snapshot(world, address(sid))
    assert snap.fires_last_minute == 2
    assert (await snapshot(world, address(sid, "m"))).fires_last_minute == 3
    assert await world.lanes.record(snap, decision, 2, 0) == Stale("throttle")
    assert isinstance(await world.lanes.record(snap, decision, 3, 0), Recorded)
    assert (await snapshot(world, address(sid))).fires_last_minute == 3


async def test_a_fire_after_one_dated_later_still_counts(world: World) -> None:
    # The last fire dated 30 s ahead, as a clock stepped back leaves it: the next fire is counted all the same.
    await world.save_listener(listener())
    await world.save_listener(listener("m"))
    sid = await world.open_session()
    for n in range(2):
        await fire(world, sid, f"a/{n}", "l", "m")
    await world.postdate_newest_fire(30)
    await fire(world, sid, "a/2", "l", "m")
    await world.write(sid, "a/3")
    await route_all(world, sid)
    assert (await snapshot(world, address(sid))).fires_last_minute == 3
    assert (await snapshot(world, address(sid, "m"))).fires_last_minute == 3


async def test_a_sessions_fires_of_the_last_minute_are_counted_per_listener_as_the_throttle_counts(
    platform: Platform,
) -> None:
    # What `list_session_listeners` reads to say a lane is throttled: each listener's fires and the oldest.
    world = PgWorld(platform)
    await world.save_listener(listener())
    await world.save_listener(listener("m"))
    sid, other = await world.open_session(), await world.open_session()
    for n in range(2):
        await fire(world, sid, f"a/{n}", "l", "m")
    await fire(world, sid, "a/2")
    await fire(world, other, "b/0")
    oldest = await platform.store.pool.fetch(
        "SELECT listener, min(created_at) AS at FROM orchestrator.batches WHERE session_id = $1 AND counted GROUP BY"
        " listener",
        sid,
    )
    first = {r["listener"]: r["at"] for r in oldest}
    assert await platform.store.fires_lately(sid) == {"l": (3, first["l"]), "m": (2, first["m"])}
    assert await platform.store.fires_lately(other) == {"l": (1, ANY)}


async def test_a_claimed_batch_a_driver_left_is_in_the_next_snapshot(world: World) -> None:
    await world.save_listener(listener())
    sid = await world.open_session()
    await world.write(sid, "a/1")
    await route_all(world, sid)
    _, decision, recorded = await take(world, address(sid))
    left = await snapshot(world, address(sid))
    assert left.claimed is not None and left.claimed.batch.id == recorded.batch_id
    assert [q.id for q in left.claimed.entries] == list(decision.entry_ids)
    assert left.claimed.run is not None and left.claimed.run.execution_id == decision.execution_id


async def test_a_claimed_batch_whose_run_already_ended_is_finished_as_started_not_acted_again(world: World) -> None:
    # The run ends (its end takes the slot's row) before the driver that started it has finished the batch,
    # and another driver finds the batch claimed: it was started, so it is finished as a success.
    await world.save_listener(listener())
    sid = await world.open_session()
    await world.write(sid, "a/1")
    await route_all(world, sid)
    _, decision, _ = await take(world, address(sid))
    assert (await end(world, sid, decision.execution_id)).recorded
    left = await snapshot(world, address(sid))
    assert left.claimed is not None and left.claimed.run is None
    again = step(left, left.now, LIMITS)
    assert isinstance(again, Finish)
    finishing = take_of_claimed(left)
    assert finishing.ran and finishing.plan is None and finishing.execution_id == decision.execution_id


async def test_a_runs_end_releases_its_slot_once_and_hands_its_lane_what_waits(world: World) -> None:
    sid, decision = await one_run(world)
    await world.write(sid, "a/2")
    await route_all(world, sid)
    ended = await end(world, sid, decision.execution_id, lane="_", fetch_own=0)
    assert ended.recorded and [a.workflow_id for a in ended.drive] == [address(sid).workflow_id]
    assert not (await end(world, sid, decision.execution_id)).recorded, "an end is recorded once"
    after = await snapshot(world, address(sid))
    assert after.runs == () and after.pending == 1
    # The end answers its own lane as it left it, read without envelopes (its driver read them ahead).
    answered = ended.snapshot
    assert answered is not None and not answered.complete and answered.runs == () and answered.waiting == ()
    assert (answered.fired_through, answered.routed_through) == (after.fired_through, after.routed_through)


@pytest.mark.parametrize("reported", ["cancelled", "stopped"])
async def test_a_run_cancelled_or_stopped_with_no_cancel_on_asking_ends_stopped(world: World, reported: str) -> None:
    """A graceful stop, Temporal's cancel or terminate from outside: the data model's `stopped`, not repeated."""
    sid, decision = await one_run(world)

    ended = await end(world, sid, decision.execution_id, reported, lane="_")

    assert ended.recorded
    held = await world.held()
    assert held.executions[decision.execution_id].status == "stopped"
    assert held.runs == {}, "its slot freed"


async def test_events_for_an_empty_lane_whose_run_holds_its_slot_nudge_nothing(world: World) -> None:
    """The run's end drives the lane instead: a nudge would start a step only to find the slot held."""
    await world.save_listener(listener())
    sid = await world.open_session()
    await world.write(sid, "a/1")
    assert [n.address for n in (await route_all(world, sid)).nudges] == [address(sid)]
    snap, decision, recorded = await take(world, address(sid))
    await finish(world, snap, decision, recorded)
    await world.write(sid, "a/2")
    assert (await route_all(world, sid)).nudges == ()
    # What drives it is the run's end.
    ended = await end(world, sid, decision.execution_id, lane="_", fetch_own=0)
    assert [a.workflow_id for a in ended.drive] == [address(sid).workflow_id]


async def test_a_failed_run_with_attempts_left_holds_its_slot_until_its_repeat(world: World) -> None:
    await world.save_listener(listener(retry={"attempts": 1, "delay_seconds": 30}))
    sid = await world.open_session()
    await world.write(sid, "a/1")
    await route_all(world, sid)
    snap, decision, recorded = await take(world, address(sid))
    await finish(world, snap, decision, recorded)
    ended = await end(world, sid, decision.execution_id, "failed", repeat_in=30.0)
    assert ended.recorded and ended.drive == ()
    held = await snapshot(world, address(sid))
    (run,) = held.runs
    assert run.due_at is not None and 25 < run.due_at - held.now <= 30
    assert held.repeat is not None and held.repeat.batch.id == recorded.batch_id
    waiting = step(held, held.now, LIMITS)
    assert isinstance(waiting, Wait) and waiting.reason == "retry_waiting"
    repeat = step(held, run.due_at, LIMITS)
    assert isinstance(repeat, Take) and repeat.kind == "repeat" and repeat.retry == 1
    assert isinstance(await world.lanes.record(held, repeat, 100, 0), Recorded)
    again = await snapshot(world, address(sid))
    assert [(r.execution_id, r.due_at) for r in again.runs] == [(repeat.execution_id, None)]


async def test_a_round_gives_the_free_key_slots_to_the_first_keys_and_queues_the_rest_unnudged(
    world: World,
) -> None:
    await world.save_listener(keyed(max_parallel=2))
    sid = await world.open_session()
    for alias in ("c", "a", "d", "b"):
        await world.write(sid, alias)
    routed = await route_all(world, sid)
    lanes = {x: address(sid, "k", x) for x in "abcd"}
    # Only the keys given a slot are nudged: the others have no lane workflow to start until a slot is theirs.
    assert [n.address.lane for n in routed.nudges] == ["a", "b"]
    assert [(await snapshot(world, lanes[x])).key_slot for x in "abcd"] == ["held", "held", "queued", "queued"]
    snap, decision, _ = await take(world, lanes["a"])
    assert decision.key_slot == "keep" and snap.keys_held == 2
    # A key that turns pending later, every slot taken, joins the queue behind them, unnudged.
    await world.write(sid, "e")
    assert (await route_all(world, sid)).nudges == ()
    assert (await snapshot(world, address(sid, "k", "e"))).key_slot == "queued"


async def test_a_round_nudges_the_lanes_it_makes_in_listener_and_lane_order(world: World) -> None:
    """Whatever order the round meets them in (a hashed `DISTINCT` answers them in none): the lanes are made, and
    nudged, in (listener, lane) order."""
    aliases = ["c", "a", "zz", "m", "q", "e", "x1", "y", "h", "g", "d", "b"]
    for name in ("k", "j"):
        await world.save_listener(keyed(name, max_parallel=len(aliases)))
    sid = await world.open_session()
    for alias in aliases:
        await world.write(sid, alias)
    routed = await route_all(world, sid)
    made = [(name, lane) for name in ("j", "k") for lane in sorted(aliases)]
    assert [(n.address.listener, n.address.lane) for n in routed.nudges] == made


async def test_a_round_nudges_its_lanes_in_the_order_they_were_made(world: World) -> None:
    """Lanes made in earlier rounds come before those the round makes, whatever their names: the order the lanes
    were made in, on both stores."""
    sid, decision = await one_run(world)  # listener `l`'s lane, made first
    await end(world, sid, decision.execution_id, lane="_", fetch_own=0)
    await world.save_listener(listener("a"))
    await world.write(sid, "b/1")
    routed = await route_all(world, sid)
    assert [n.address.listener for n in routed.nudges] == ["l", "a"]


@pytest.mark.parametrize(
    "declared",
    [
        {},
        {"concurrency": {"mode": "parallel", "max_parallel": 2}},
        {"action": {"type": "object", "alias": "out", "value": {"type": "o"}}},
        {
            "concurrency": {"mode": "keyed", "key": "alias"},
            "action": {"type": "object", "alias": "out", "value": {"type": "o"}},
        },
    ],
    ids=["serial", "parallel", "write", "keyed-write"],
)
async def test_a_round_gives_no_key_slot_to_a_lane_whose_listener_has_none(
    world: World, declared: dict[str, Any]
) -> None:
    """Key slots are a keyed workflow listener's alone: any other lane the round makes pending takes none, so its
    batch has none to give back."""
    await world.save_listener(listener(**declared))
    sid = await world.open_session()
    await world.write(sid, "a")
    await route_all(world, sid)
    lane = "a" if "key" in declared.get("concurrency", {}) else "_"
    snap = await snapshot(world, address(sid, lane=lane))
    assert (snap.key_slot, snap.keys_held) == (None, 0)
    decision = step(snap, snap.now, LIMITS)
    assert isinstance(decision, Take) and decision.key_slot is None


async def test_a_listener_saved_again_as_keyed_gives_its_first_key_a_free_slot(world: World) -> None:
    """Its serial lane, pending when it was saved again, holds no key slot for the new keys to queue behind."""
    await world.save_listener(listener("k"))
    sid = await world.open_session()
    await world.write(sid, "a")
    await route_all(world, sid)
    await world.save_listener(keyed())
    await world.write(sid, "b")
    routed = await route_all(world, sid)
    assert [n.address.lane for n in routed.nudges] == ["b"]
    assert (await snapshot(world, address(sid, "k", "b"))).key_slot == "held"


async def test_a_key_slot_taken_in_the_round_whose_nudge_is_lost_is_found_by_the_poll(world: World) -> None:
    """The round commits the slot, then nudges: a router that dies between the two leaves the poll to step it."""
    await world.save_listener(keyed(max_parallel=1))
    sid = await world.open_session()
    await world.write(sid, "a")
    await world.write(sid, "b")
    await route_all(world, sid)  # its nudges never sent
    a, b = address(sid, "k", "a"), address(sid, "k", "b")
    assert [(await snapshot(world, x)).key_slot for x in (a, b)] == ["held", "queued"]
    await world.backdate_nudges(STALE_GRACE_SECONDS + 1)
    found = [s.address.workflow_id for s in await world.lanes.stale_lanes()]
    assert found == [a.workflow_id], "the holder, not the queue its slot's end will hand on to"


async def test_a_debounced_keyed_lane_competes_for_a_slot_when_its_window_closes_rather_than_hold_one(
    world: World,
) -> None:
    """A debounce stays open while events come: a slot held through it would starve the other keys."""
    body = keyed(max_parallel=1)
    body["batch"] = {"debounce_seconds": 5, "max_events": 100}
    await world.save_listener(body)
    sid = await world.open_session()
    for alias in ("a", "b"):
        await world.write(sid, alias)
    routed = await route_all(world, sid)
    assert [n.address.lane for n in routed.nudges] == ["a", "b"]
    assert [(await snapshot(world, address(sid, "k", x))).key_slot for x in "ab"] == [None, None]


async def test_a_queue_left_by_a_listener_no_longer_keyed_is_found_by_the_poll_and_left(world: World) -> None:
    """Its slot's holder is re-saved serial: nobody will hand the queue a slot, so the poll nudges the lanes
    in it, and each leaves the queue with the batch it takes."""
    await world.save_listener(keyed())
    sid = await world.open_session()
    await world.write(sid, "a")
    await world.write(sid, "b")
    await route_all(world, sid)
    a, b = address(sid, "k", "a"), address(sid, "k", "b")
    await world.save_listener(listener("k"))
    snap = await snapshot(world, a)
    decision = step(snap, snap.now, LIMITS)
    assert isinstance(decision, Take) and decision.key_slot == "give_back"
    recorded = await world.lanes.record(snap, decision, LIMITS.listener_fires_per_minute, 0)
    assert isinstance(recorded, Recorded) and recorded.granted == ()
    assert (await snapshot(world, b)).key_slot == "queued"
    await world.backdate_nudges(STALE_GRACE_SECONDS + 1)
    assert b.workflow_id in [s.address.workflow_id for s in await world.lanes.stale_lanes()]
    behind = await snapshot(world, b)
    taken = step(behind, behind.now, LIMITS)
    assert isinstance(taken, Take) and taken.key_slot == "give_back"
    assert isinstance(await world.lanes.record(behind, taken, LIMITS.listener_fires_per_minute, 0), Recorded)
    assert (await snapshot(world, b)).key_slot is None


async def test_a_raised_max_parallel_hands_every_free_slot_to_the_queue(world: World) -> None:
    await world.save_listener(keyed(max_parallel=1))
    sid = await world.open_session()
    for alias in ("a", "b", "c"):
        await world.write(sid, alias)
    await route_all(world, sid)
    await world.save_listener(keyed(max_parallel=3))
    snap, decision, recorded = await take(world, address(sid, "k", "a"))
    await finish(world, snap, decision, recorded)
    ended = await end(world, sid, decision.execution_id, listener="k", keyed=True, key_max=3, lane="a", fetch_own=0)
    assert [x.lane for x in ended.drive] == ["b", "c"], "both waiters, not one"


async def test_a_lane_whose_slot_is_held_waits_for_the_slot_not_for_its_window(world: World) -> None:
    """Its window would wake it only to find the slot still held: the run's end that frees it drives the lane."""
    await world.save_listener(listener(batch={"window_seconds": 60, "max_events": 100}))
    sid = await world.open_session()
    await world.write(sid, "a/0")
    await route_all(world, sid)
    snap = await snapshot(world, address(sid))
    decision = step(snap, snap.now + 61, LIMITS)
    assert isinstance(decision, Take)
    recorded = await world.lanes.record(snap, decision, LIMITS.listener_fires_per_minute, 1)
    assert isinstance(recorded, Recorded)
    await finish(world, snap, decision, recorded)
    await world.write(sid, "a/1")
    await route_all(world, sid)
    behind = await snapshot(world, address(sid))
    wait = step(behind, behind.now, LIMITS)
    assert isinstance(wait, Wait) and (wait.reason, wait.until) == ("slot_held", None)
    ended = await end(world, sid, decision.execution_id, lane="_", fetch_own=0)
    assert [x.workflow_id for x in ended.drive] == [address(sid).workflow_id]
    after = await snapshot(world, address(sid))
    reopened = step(after, after.now, LIMITS)
    assert isinstance(reopened, Wait) and reopened.reason == "window_open" and reopened.until is not None


async def test_a_freed_key_slot_goes_to_the_lane_that_queued_for_it(world: World) -> None:
    await world.save_listener(keyed())
    sid = await world.open_session()
    await world.write(sid, "a")
    await world.write(sid, "b")
    routed = await route_all(world, sid)
    a, b = address(sid, "k", "a"), address(sid, "k", "b")
    assert [n.address.lane for n in routed.nudges] == ["a"]
    snap, decision, recorded = await take(world, a)
    assert decision.key_slot == "keep"
    await finish(world, snap, decision, recorded)
    behind = await snapshot(world, b)
    assert behind.key_slot == "queued"
    wait = step(behind, behind.now, LIMITS)
    assert isinstance(wait, Wait) and wait.reason == "queued_for_key_slot" and not wait.queue_for_key_slot
    assert not await world.lanes.queue_for_key_slot(behind, 1)
    assert (await snapshot(world, b)).key_slot == "queued"
    ended = await end(world, sid, decision.execution_id, listener="k", keyed=True, key_max=1, lane="a", fetch_own=0)
    assert [x.workflow_id for x in ended.drive] == [b.workflow_id]
    handed = await snapshot(world, b)
    assert handed.key_slot == "held" and handed.keys_held == 1
    # The lane the slot went to is answered whole, as a read of it now would be: its driver takes from it.
    assert ended.snapshot is not None and ended.snapshot.complete
    assert (ended.snapshot.key_slot, [q.id for q in ended.snapshot.waiting]) == ("held", [q.id for q in handed.waiting])
    taken = step(handed, handed.now, LIMITS)
    assert isinstance(taken, Take) and taken.key_slot == "keep"


async def test_a_run_that_did_not_start_gives_its_slots_back(world: World) -> None:
    await world.save_listener(keyed())
    sid = await world.open_session()
    await world.write(sid, "a")
    await world.write(sid, "b")
    await route_all(world, sid)
    a, b = address(sid, "k", "a"), address(sid, "k", "b")
    snap, decision, recorded = await take(world, a)
    assert not await world.lanes.queue_for_key_slot(await snapshot(world, b), 1)
    after = await finish(world, snap, decision, recorded, started=False)
    assert after is not None and after.runs == () and after.key_slot is None
    assert (await snapshot(world, b)).key_slot == "held", "the slot went to the lane waiting for it"


async def test_pointers_are_the_queued_pointers_of_the_sessions_own_events_by_id(world: World) -> None:
    await world.save_listener(listener())
    sid, other = await world.open_session(), await world.open_session()
    ids = [await world.write(sid, f"a/{n}") for n in range(3)]
    theirs = await world.write(other, "a/theirs")
    await route_all(world, sid)
    snap = await snapshot(world, address(sid))
    read = await world.lanes.pointers(sid, [ids[2], theirs, ids[0], 10**12, ids[2]])
    assert read == [snap.waiting[0].message, snap.waiting[2].message], "by id, once each, the session's own only"
    assert read[0] == {"id": ids[0], "type": "object.written", "alias": "a/0"}
    assert await world.lanes.pointers(sid, []) == []


async def test_saving_the_body_of_the_newest_version_again_answers_that_version_and_saves_none(
    world: World,
) -> None:
    """A worker that saves its app's listeners at every start piles up no versions."""
    assert await world.save_listener(listener()) == 1
    assert await world.save_listener(listener()) == 1
    changed = listener(batch={"window_seconds": 1, "max_events": 100})
    assert await world.save_listener(changed) == 2
    assert await world.save_listener(changed) == 2
    # The first body again is a change from the newest: a version of its own.
    assert await world.save_listener(listener()) == 3
    assert [(v["name"], v["version"]) for v in await world.versions()] == [("l", 1), ("l", 2), ("l", 3)]


async def test_a_listener_saved_again_after_its_deletion_goes_on_from_its_last_version(world: World) -> None:
    await world.save_listener(listener())
    await world.save_listener(listener(batch={"window_seconds": 1, "max_events": 100}))
    await world.delete_listener("l")
    assert await world.versions() == []
    # Its last body saved again is a new version, numbered on: the deletion ended the versions before it.
    assert await world.save_listener(listener(batch={"window_seconds": 1, "max_events": 100})) == 3
    assert [(v["name"], v["version"]) for v in await world.versions()] == [("l", 3)]


async def test_what_a_deleted_listener_left_waiting_is_consumed_while_it_is_saved_again_and_not_yet_in_effect(
    world: World,
) -> None:
    """Its versions from before the deletion take no event again, and the version saved after it acts only once it
    takes effect (SPEC 3): what waits in a lane meanwhile is the deleted life's, consumed with no run and no outcome
    as `delete_listener` says (it was run by the new version, before its activation delay had passed)."""
    await world.save_listener(listener())
    sid = await world.open_session()
    await world.write(sid, "a/1")
    await route_all(world, sid)
    await world.delete_listener("l")
    assert await world.save_listener(listener(action={"type": "workflow", "workflow": "w2"}), delay_seconds=60) == 2
    snap = await snapshot(world, address(sid))
    assert snap.listener is None, "no version in effect: as deleted"
    decision = step(snap, snap.now, LIMITS)
    assert isinstance(decision, Take) and decision.verdict == CONSUME and decision.plan is None


async def test_a_deleted_listeners_repeat_due_while_it_is_saved_again_and_not_yet_in_effect_is_consumed(
    world: World,
) -> None:
    """A failed run's repeat is the deleted life's too: due while the version saved after the deletion waits out its
    activation delay, it is consumed with no run, as its waiting events are."""
    sid, decision = await one_run(world, retry={"attempts": 1, "delay_seconds": 0})
    assert (await end(world, sid, decision.execution_id, "failed", repeat_in=0.0)).recorded
    await world.delete_listener("l")
    await world.save_listener(listener(action={"type": "workflow", "workflow": "w2"}), delay_seconds=60)
    held = await snapshot(world, address(sid))
    repeat = step(held, held.now, LIMITS)
    assert isinstance(repeat, Take) and repeat.kind == "repeat" and repeat.verdict == CONSUME and repeat.plan is None


# -- the verbs of a step's other moves, of the sweep, and of a run of no lane -----------------------------------


async def test_a_key_slot_given_back_goes_to_the_lane_queued_for_it_unless_a_run_took_it_meanwhile(
    world: World,
) -> None:
    await world.save_listener(keyed())
    sid = await world.open_session()
    for alias in ("a", "b", "c"):
        await world.write(sid, alias)
    await route_all(world, sid)
    a, b, c = (address(sid, "k", x) for x in "abc")
    # `a` holds the one slot; its run takes it: a give back answers nothing and the slot stays.
    snap, decision, recorded = await take(world, a)
    assert decision.key_slot == "keep"
    assert await world.lanes.give_back_key_slot(snap, 1) == ()
    assert (await snapshot(world, a)).key_slot == "held"
    await finish(world, snap, decision, recorded)
    ended = await end(world, sid, decision.execution_id, listener="k", keyed=True, key_max=1, lane="a", fetch_own=0)
    assert [x.lane for x in ended.drive] == ["b"]
    # `b` holds it now with no run to use it on (as a lane whose batch turned out to need none): given back, it
    # goes to the next lane queued, and `b` holds and waits for none.
    granted = await world.lanes.give_back_key_slot(await snapshot(world, b), 1)
    assert [x.workflow_id for x in granted] == [c.workflow_id]
    assert [(await snapshot(world, x)).key_slot for x in (a, b, c)] == [None, None, "held"]
    # With nobody queued, a slot given back goes nowhere.
    assert await world.lanes.give_back_key_slot(await snapshot(world, c), 1) == ()
    assert (await snapshot(world, c)).keys_held == 0


async def test_a_replay_asked_for_is_in_the_snapshot_until_it_is_dropped(world: World) -> None:
    await world.save_listener(listener(action={"type": "object", "alias": "out", "value": {"type": "o"}}))
    sid = await world.open_session()
    await world.write(sid, "a/1")
    await route_all(world, sid)
    snap, decision, recorded = await take(world, address(sid))
    await finish(world, snap, decision, recorded)
    lane_id = snap.lane_id
    # A replay of events that are gone (trimmed by retention): the step drops it.
    await world.ask_replay(lane_id, [10**12], None)
    asked = await snapshot(world, address(sid))
    assert asked.replay is not None and asked.replay.events == ()
    dropped = step(asked, asked.now, LIMITS)
    assert isinstance(dropped, Drop) and dropped.replay_id == asked.replay.id
    await world.lanes.drop_replay(dropped.replay_id)
    assert (await snapshot(world, address(sid))).replay is None
    # A replay whose listener was deleted meanwhile is dropped too; dropping one no longer there changes nothing.
    await world.ask_replay(lane_id, list(decision.consumed), decision.first_id)
    await world.delete_listener("l")
    gone = await snapshot(world, address(sid))
    assert gone.listener is None and gone.replay is not None
    assert [q.id for q in gone.replay.events] == list(decision.consumed) and gone.replay.number == 1
    dropped = step(gone, gone.now, LIMITS)
    assert isinstance(dropped, Drop) and dropped.replay_id == gone.replay.id
    await world.lanes.drop_replay(dropped.replay_id)
    await world.lanes.drop_replay(dropped.replay_id)
    assert (await snapshot(world, address(sid))).replay is None


async def test_envelopes_are_the_events_whole_once_each_by_id(world: World) -> None:
    sid, other = await world.open_session(), await world.open_session()
    ids = [await world.write(sid, f"a/{n}") for n in range(2)]
    theirs = await world.write(other, "b/0")
    read = await world.lanes.envelopes([ids[1], theirs, 10**12, ids[0], ids[1]])
    assert [(e["id"], e["session_id"], e["type"], e["alias"], e["depth"]) for e in read] == [
        (ids[0], sid, "object.written", "a/0", 0),
        (ids[1], sid, "object.written", "a/1", 0),
        (theirs, other, "object.written", "b/0", 0),
    ], "by id, once each, any session's (a batch's events are its session's)"
    assert all(datetime.fromisoformat(e["created_at"]).tzinfo is not None for e in read)
    assert await world.lanes.envelopes([]) == []


async def test_unsettled_runs_are_the_running_runs_nobody_looked_at_lately_each_looked_at_once(world: World) -> None:
    await world.save_listener(listener())
    sid = await world.open_session()
    await world.write(sid, "a/1")
    await route_all(world, sid)
    snap, decision, recorded = await take(world, address(sid))
    assert await world.lanes.unsettled_runs(30.0) == [], "recorded just now"
    await world.advance(31.0)
    (found,) = await world.lanes.unsettled_runs(30.0)
    assert (found.execution_id, found.session_id, found.workflow, found.listener, found.lane, found.run_key) == (
        decision.execution_id,
        sid,
        "w",
        "l",
        "_",
        decision.run_key,
    )
    assert (found.depth, found.batch, found.start_input) == (1, "claimed", None)
    assert 31.0 <= found.age_seconds < 40.0
    assert await world.lanes.unsettled_runs(30.0) == [], "looked at now: not again within 30 s"
    # Its batch finished, the next look says so; ended, it is settled.
    await finish(world, snap, decision, recorded)
    await world.advance(31.0)
    assert [(r.execution_id, r.batch) for r in await world.lanes.unsettled_runs(30.0)] == [
        (decision.execution_id, "done")
    ]
    assert (await end(world, sid, decision.execution_id)).recorded
    await world.advance(31.0)
    assert await world.lanes.unsettled_runs(30.0) == []


async def test_unsettled_runs_come_longest_unlooked_first_a_limit_at_a_time(world: World) -> None:
    await world.save_listener(listener(concurrency={"mode": "parallel", "max_parallel": 2}))
    sid = await world.open_session()
    await world.write(sid, "a/1")
    await route_all(world, sid)
    snap, first, recorded = await take(world, address(sid))
    await finish(world, snap, first, recorded)
    await world.advance(5.0)
    await world.write(sid, "a/2")
    await route_all(world, sid)
    snap, second, recorded = await take(world, address(sid))
    await finish(world, snap, second, recorded)
    await world.advance(31.0)
    assert [r.execution_id for r in await world.lanes.unsettled_runs(30.0, limit=1)] == [first.execution_id]
    assert [r.execution_id for r in await world.lanes.unsettled_runs(30.0, limit=1)] == [second.execution_id]
    assert await world.lanes.unsettled_runs(30.0, limit=1) == []


async def test_a_run_of_no_lane_is_recorded_once_with_its_start_and_keeps_its_input_until_its_start_is_made(
    world: World,
) -> None:
    sid = await world.open_session()
    record = by_hand(sid, 1)
    assert await world.records.execution_started(record)
    assert not await world.records.execution_started({**record, "start_input": {"input": {"n": 2}}})
    held = await world.held()
    assert [e.execution_id for e in held.events.values() if e.type == "execution.started"] == ["exe:by-hand:1"]
    assert held.executions["exe:by-hand:1"].status == "running"
    await world.advance(31.0)
    (found,) = await world.lanes.unsettled_runs(30.0)
    assert (found.execution_id, found.listener, found.lane, found.run_key, found.batch) == (
        "exe:by-hand:1",
        None,
        None,
        None,
        None,
    )
    assert found.start_input == {"input": {"n": 1}}, "the first record's input"
    await world.records.execution_start_made("exe:by-hand:1")
    await world.advance(31.0)
    (again,) = await world.lanes.unsettled_runs(30.0)
    assert again.start_input is None, "its start was made: nothing kept to make it again"
    # Nothing to reopen: it holds no lane's slot.
    assert await world.lanes.reopen_run("exe:by-hand:1") is None


async def test_a_run_temporal_does_not_know_is_reopened_its_finished_batch_claimed_again(world: World) -> None:
    await world.save_listener(listener())
    sid = await world.open_session()
    await world.write(sid, "a/1")
    await route_all(world, sid)
    snap, decision, recorded = await take(world, address(sid))
    after = await finish(world, snap, decision, recorded)
    assert after is not None and after.claimed is None
    reopened = await world.lanes.reopen_run(decision.execution_id)
    assert reopened is not None and reopened.workflow_id == address(sid).workflow_id
    # The lane's next step finds the batch claimed, its run holding the slot: it starts it again by the same id.
    left = await snapshot(world, address(sid))
    assert left.claimed is not None and left.claimed.batch.id == recorded.batch_id
    assert left.claimed.run is not None and left.claimed.run.execution_id == decision.execution_id
    again = step(left, left.now, LIMITS)
    assert isinstance(again, Finish)
    assert take_of_claimed(left).execution_id == decision.execution_id
    # An ended run holds no slot: nothing to reopen; nor a run nobody recorded.
    assert (await end(world, sid, decision.execution_id)).recorded
    assert await world.lanes.reopen_run(decision.execution_id) is None
    assert await world.lanes.reopen_run("exe:nobody") is None


async def test_a_failed_runs_repeat_is_reopened_at_its_own_attempt(world: World) -> None:
    sid, decision = await one_run(world, retry={"attempts": 1, "delay_seconds": 30})
    await end(world, sid, decision.execution_id, "failed", repeat_in=30.0)
    await world.advance(31.0)
    held = await snapshot(world, address(sid))
    repeat = step(held, held.now, LIMITS)
    assert isinstance(repeat, Take) and repeat.kind == "repeat"
    again = await world.lanes.record(held, repeat, 100, 0)
    assert isinstance(again, Recorded)
    await finish(world, held, repeat, again)
    assert await world.lanes.reopen_run(decision.execution_id) is None, "the failed attempt ended"
    assert await world.lanes.reopen_run(repeat.execution_id) is not None
    left = await snapshot(world, address(sid))
    assert left.claimed is not None and left.claimed.batch.id == again.batch_id and left.claimed.batch.retry == 1


async def test_a_batch_finished_again_records_its_outcome_once_and_its_start_once(world: World) -> None:
    """A driver that dies after a batch's finish leaves it to be finished again (the step after a crash, or an
    attempt that outlived its timeout): its outcome and its `execution.started` are recorded once, and only the
    first finish says it marked the batch done (what the driver's counters count by)."""
    await world.save_listener(listener())
    sid = await world.open_session()
    await world.write(sid, "a/1")
    await route_all(world, sid)
    snap, decision, recorded = await take(world, address(sid))
    first = await finishing(world, snap, decision, recorded)
    assert first.outcome_new and first.done_new
    again = await finishing(world, snap, decision, recorded)
    assert not again.outcome_new and not again.done_new
    assert again.snapshot is not None and again.snapshot.claimed is None
    held = await world.held()
    assert list(held.outcomes.values()) == ["success"]
    assert [e.execution_id for e in held.events.values() if e.type == "execution.started"] == [decision.execution_id]


async def test_a_run_that_fails_with_no_attempt_left_writes_listener_failed_once(world: World) -> None:
    sid, decision = await one_run(world)
    ended = await end(world, sid, decision.execution_id, "failed", gave_up=True, lane="_")
    assert ended.recorded and ended.drive == ()
    assert not (await end(world, sid, decision.execution_id, "failed", gave_up=True, lane="_")).recorded
    held = await world.held()
    assert [e.type for e in sorted(held.events.values(), key=lambda e: e.id)] == [
        "object.written",
        "execution.started",
        "execution.ended",
        "listener.failed",
    ]
    assert held.executions[decision.execution_id].status == "failed"
    assert held.runs == {}, "its slot freed"


async def test_a_listener_switched_off_in_a_session_has_its_batches_there_consumed_with_no_run(world: World) -> None:
    await world.save_listener(listener())
    sid, other = await world.open_session(), await world.open_session()
    for session in (sid, other):
        await world.write(session, "a/1")
        await route_all(world, session)
    await world.switch(sid, "l", False)
    off = await snapshot(world, address(sid))
    assert off.listener is not None and off.listener.switched_off
    consumed = step(off, off.now, LIMITS)
    assert isinstance(consumed, Take) and consumed.verdict == CONSUME and consumed.plan is None
    assert not consumed.counted, "a batch consumed is no fire"
    on = await snapshot(world, address(other))
    assert on.listener is not None and not on.listener.switched_off, "switched off in its session alone"
    await world.switch(sid, "l", True)
    again = await snapshot(world, address(sid))
    assert again.listener is not None and not again.listener.switched_off


async def test_a_closed_sessions_batch_is_skipped_as_session_not_open(world: World) -> None:
    await world.save_listener(listener())
    sid = await world.open_session()
    await world.write(sid, "a/1")
    await route_all(world, sid)
    await world.close_session(sid)
    snap = await snapshot(world, address(sid))
    assert snap.session_status == "closed"
    skipped = step(snap, snap.now, LIMITS)
    assert isinstance(skipped, Take) and skipped.verdict == Stop("skipped", "session_not_open")


async def test_a_deleted_listeners_lane_keeps_the_key_slot_its_run_holds_until_the_run_ends(world: World) -> None:
    """Its waiting batch is consumed at once, run or not; the slot stays the run's, and its end hands it on: a
    listener saved keyed again meanwhile runs no more keys than `max_parallel`."""
    await world.save_listener(keyed())
    sid = await world.open_session()
    await world.write(sid, "a")
    await route_all(world, sid)
    a, b = address(sid, "k", "a"), address(sid, "k", "b")
    snap, decision, recorded = await take(world, a)
    await finish(world, snap, decision, recorded)
    await world.write(sid, "a")
    await route_all(world, sid)
    await world.delete_listener("k")
    deleted = await snapshot(world, a)
    consumed = step(deleted, deleted.now, LIMITS)
    assert isinstance(consumed, Take) and consumed.verdict == CONSUME and consumed.key_slot is None
    assert isinstance(await world.lanes.record(deleted, consumed, LIMITS.listener_fires_per_minute, 0), Recorded)
    assert (await snapshot(world, a)).key_slot == "held"
    # Saved keyed again: the next key queues behind the run still running, whose end hands it the slot.
    await world.save_listener(keyed())
    await world.write(sid, "b")
    await route_all(world, sid)
    assert (await snapshot(world, b)).key_slot == "queued"
    ended = await end(world, sid, decision.execution_id, listener="k", keyed=True, key_max=1, lane="a", fetch_own=0)
    assert [x.lane for x in ended.drive] == ["b"]
    assert [(await snapshot(world, x)).key_slot for x in (a, b)] == [None, "held"]


async def test_a_lane_queued_for_a_key_slot_with_nothing_left_to_do_leaves_the_queue(world: World) -> None:
    """A replay that queued for a slot, dropped once its listener was deleted: the lane leaves the queue rather
    than wait in it for ever (and be handed a slot it has no use for)."""
    await world.save_listener(keyed())
    sid = await world.open_session()
    await world.write(sid, "a")
    await route_all(world, sid)
    a, b = address(sid, "k", "a"), address(sid, "k", "b")
    snap, decision, recorded = await take(world, a)
    await finish(world, snap, decision, recorded, started=False)
    await world.ask_replay(snap.lane_id, list(decision.consumed), decision.first_id)
    await world.write(sid, "b")
    await route_all(world, sid)
    assert (await snapshot(world, b)).key_slot == "held"
    replay = await snapshot(world, a)
    blocked = step(replay, replay.now, LIMITS)
    assert isinstance(blocked, Wait) and blocked.queue_for_key_slot
    assert not await world.lanes.queue_for_key_slot(replay, 1)
    await world.delete_listener("k")
    gone = await snapshot(world, a)
    dropped = step(gone, gone.now, LIMITS)
    assert isinstance(dropped, Drop)
    await world.lanes.drop_replay(dropped.replay_id)
    left = await snapshot(world, a)
    assert left.key_slot == "queued"
    idle = step(left, left.now, LIMITS)
    assert isinstance(idle, Wait) and idle.reason == "nothing" and idle.give_back_key_slot
    assert await world.lanes.give_back_key_slot(left, 0) == ()
    assert (await snapshot(world, a)).key_slot is None


# -- a listener's own throttle (`throttle`): batches beyond it wait in their lane --------------------------------


def throttled(runs: int, per_seconds: float, key: str | None = None, **more: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"per_seconds": per_seconds, "runs": runs}
    if key is not None:
        spec["key"] = key
    return listener(throttle=spec, **more)


async def test_a_throttle_holds_the_lane_past_its_runs_until_its_window_moves_on(world: World) -> None:
    await world.save_listener(throttled(2, 30))
    sid = await world.open_session()
    for n in range(2):
        await fire(world, sid, f"a/{n}")
    await world.write(sid, "a/2")
    await route_all(world, sid)
    snap = await snapshot(world, address(sid))
    assert snap.throttle_head == "_" and set(snap.throttle_free_at) == {"_"}
    first = await world.lanes.snapshot(address(sid), 0)
    assert first is not None and first.throttle_free_at == snap.throttle_free_at, "known without reading events"
    free = snap.throttle_free_at["_"]
    assert 25 < free - snap.now <= 30, "the oldest of its two starts, 30 s on"
    held = step(snap, snap.now, LIMITS)
    assert held == Wait("throttled", free)
    # A record over a snapshot read before it was full is refused: it counts what was started since.
    take_now = step(snap, free, LIMITS)
    assert isinstance(take_now, Take) and take_now.throttle_keys == ("_",)
    assert await world.lanes.record(snap, take_now, 100, 0) == Stale("listener_throttle")
    # The window moves on: the first start leaves it, and one batch may go.
    await world.advance(free - snap.now + 0.01)
    snap, decision, recorded = await take(world, address(sid))
    assert decision.consumed == (snap.waiting[0].id,)
    after = await finish(world, snap, decision, recorded)
    # Its newest two starts are kept, the second and this one: the key lets the next go 30 s after the second.
    assert after is not None and after.throttle_free_at["_"] < after.now + 30


async def test_a_throttles_runs_are_counted_per_key_and_a_batch_under_each_of_its_keys(world: World) -> None:
    # Serial, per alias: one batch of a/1 and b/1 counts under both; then a/1 waits while c/1 alone may go, but
    # behind a/1 in its lane, so it waits with it. Keyed by the same path, each key's lane goes its own way.
    await world.save_listener(throttled(1, 60, "alias"))
    await world.save_listener(throttled(1, 60, "alias", name="k", concurrency={"mode": "keyed", "key": "alias"}))
    sid = await world.open_session()
    ids = [await world.write(sid, a) for a in ("a/1", "b/1")]
    await route_all(world, sid)
    snap, decision, recorded = await take(world, address(sid))
    assert decision.consumed == tuple(ids) and decision.throttle_keys == ("a/1", "b/1")
    await finish(world, snap, decision, recorded)
    assert (await end(world, sid, decision.execution_id)).recorded
    for alias in ("a/1", "b/1"):
        snap, decision, recorded = await take(world, address(sid, "k", alias))
        assert decision.throttle_keys == (alias,)
        await finish(world, snap, decision, recorded)
        assert (await end(world, sid, decision.execution_id, listener="k")).recorded
    later = [await world.write(sid, a) for a in ("a/1", "c/1")]
    await route_all(world, sid)
    serial = await snapshot(world, address(sid))
    assert [q.throttle_key for q in serial.waiting] == ["a/1", "c/1"] and serial.throttle_head == "a/1"
    assert set(serial.throttle_free_at) == {"a/1"}, "c/1 never started; b/1 is not among what waits"
    held = step(serial, serial.now, LIMITS)
    assert isinstance(held, Wait) and held.reason == "throttled"
    keyed_held = step(await snapshot(world, address(sid, "k", "a/1")), serial.now, LIMITS)
    assert isinstance(keyed_held, Wait) and keyed_held.reason == "throttled" and keyed_held.give_back_key_slot
    snap, decision, recorded = await take(world, address(sid, "k", "c/1"))
    assert decision.consumed == (later[1],) and decision.throttle_keys == ("c/1",)


async def test_a_lane_the_throttle_holds_says_until_when_and_the_poll_leaves_it_to_its_clock(world: World) -> None:
    await world.save_listener(throttled(1, 120))
    sid = await world.open_session()
    await fire(world, sid, "a/0")
    await world.write(sid, "a/1")
    await route_all(world, sid)
    snap = await snapshot(world, address(sid))
    held = step(snap, snap.now, LIMITS)
    assert isinstance(held, Wait) and held.reason == "throttled" and held.until is not None
    await world.lanes.hold(snap, held.until)
    noted = await snapshot(world, address(sid))
    assert noted.throttled_until is not None and abs(noted.throttled_until - held.until) < 0.001
    assert noted.seq == snap.seq, "a note, not a move of the lane"
    # Its events wait past their window: the poll leaves the lane to its own clock while the throttle holds it.
    await world.backdate_nudges(3600)
    assert [s.address for s in await world.lanes.stale_lanes()] == []
    # Past what it said, and the grace, a lane whose clock was lost is the poll's again.
    await world.advance(120 + STALE_GRACE_SECONDS + 1)
    assert [s.address.workflow_id for s in await world.lanes.stale_lanes()] == [address(sid).workflow_id]
    # Its next record clears the note; a note over a snapshot the lane has moved past is not kept.
    snap, decision, recorded = await take(world, address(sid))
    after = await finish(world, snap, decision, recorded)
    assert after is not None and after.throttled_until is None
    await world.lanes.hold(snap, held.until + 500)
    assert (await snapshot(world, address(sid))).throttled_until is None


async def test_a_repeat_waits_for_the_throttle_under_its_batchs_keys(world: World) -> None:
    await world.save_listener(throttled(1, 60, "alias", retry={"attempts": 1, "delay_seconds": 0}))
    sid = await world.open_session()
    await world.write(sid, "a/1")
    await route_all(world, sid)
    snap, decision, recorded = await take(world, address(sid))
    await finish(world, snap, decision, recorded)
    assert (await end(world, sid, decision.execution_id, "failed", repeat_in=0.0)).recorded
    held = await snapshot(world, address(sid))
    assert held.repeat is not None and held.repeat.batch.throttle_keys == ("a/1",)
    assert set(held.throttle_free_at) == {"a/1"}
    waiting = step(held, held.now, LIMITS)
    assert isinstance(waiting, Wait) and waiting.reason == "throttled" and waiting.run is not None
    assert not waiting.give_back_key_slot
    await world.advance(61)
    due = await snapshot(world, address(sid))
    repeat = step(due, due.now, LIMITS)
    assert isinstance(repeat, Take) and repeat.kind == "repeat" and repeat.throttle_keys == ("a/1",)
    assert isinstance(await world.lanes.record(due, repeat, 100, 0), Recorded)


async def test_a_replay_waits_for_the_throttle_under_its_events_keys(world: World) -> None:
    # A write action (no slot): the replay of a batch of a/1 and b/1 right after it is held by a/1's start.
    await world.save_listener(
        throttled(1, 60, "alias", action={"type": "object", "alias": "out", "value": {"type": "o"}})
    )
    sid = await world.open_session()
    for alias in ("a/1", "b/1"):
        await world.write(sid, alias)
    await route_all(world, sid)
    snap, decision, recorded = await take(world, address(sid))
    await finish(world, snap, decision, recorded)
    await world.ask_replay(snap.lane_id, list(decision.consumed), decision.first_id)
    asked = await snapshot(world, address(sid))
    assert asked.replay is not None and [q.throttle_key for q in asked.replay.events] == ["a/1", "b/1"]
    assert set(asked.throttle_free_at) == {"a/1", "b/1"}
    held = step(asked, asked.now, LIMITS)
    assert isinstance(held, Wait) and held.reason == "throttled"
    # Read without its events, the replay says nothing of their keys: the step goes for it, and the full read holds.
    bare = await world.lanes.snapshot(address(sid), 0)
    assert bare is not None and bare.replay is not None and bare.replay.events == ()
    await world.advance(61)
    due = await snapshot(world, address(sid))
    replay = step(due, due.now, LIMITS)
    assert isinstance(replay, Take) and replay.kind == "replay" and replay.throttle_keys == ("a/1", "b/1")
