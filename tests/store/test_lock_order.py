"""The store's functions take their locks in one order: the session's row before an execution's row.

A run's end (`orchestrator_run_end`) locks the session and then its execution's row; a fire that records the
same run's start (`orchestrator_execution_started`, from `orchestrator_batch_finish`) must wait for the session
first too, or a run that ends while its start is being recorded deadlocks the two (PostgreSQL then fails one
of them after a second, and the writers queued behind the session with them).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from orchestrator.platform import Platform
from orchestrator.store.postgres import PostgresStore
from tests.engine.harness import eventually
from tests.store.helpers import all_events, ok

# Whether the session's executions lock (`orchestrator_executions_lock`) is free: taken and let go at the end of
# the asking transaction.
EXECUTIONS_LOCK_FREE = "SELECT pg_try_advisory_xact_lock(hashtext('executions:' || $1))"


@pytest.mark.asyncio
async def test_a_start_recorded_while_its_run_ends_waits_for_the_session_first(platform: Platform) -> None:
    store = platform.store
    assert isinstance(store, PostgresStore)
    session_id = (await ok(platform, "open_session"))["session"]["id"]
    await store.pool.execute(
        "INSERT INTO orchestrator.executions (id, session_id, workflow) VALUES ('exe:lock-order', $1, 'wf')", session_id
    )
    async with store.transaction() as ending:
        # The run's end, as `orchestrator_run_end` takes its locks: the session's row first.
        await ending.execute("SELECT orchestrator.orchestrator_lock_session($1)", session_id)
        starting = asyncio.create_task(
            store.pool.execute("SELECT orchestrator.orchestrator_execution_started('exe:lock-order')")
        )
        await asyncio.sleep(0.3)  # the start is recorded meanwhile, and waits for whatever it waits for
        # Then the execution's row: a start that locked it first would deadlock here.
        await asyncio.wait_for(
            ending.execute("UPDATE orchestrator.executions SET status = 'completed' WHERE id = 'exe:lock-order'"),
            timeout=5,
        )
        assert not starting.done()  # it waits for the session, behind the end
    await asyncio.wait_for(starting, timeout=5)
    started = [e for e in await all_events(platform, session_id) if e["type"] == "execution.started"]
    assert len(started) == 1


async def _lane_with_events(platform: Platform, alias: str) -> tuple[str, int, list[int]]:
    """A session (with an alias) and a lane holding three of its events: the session, the lane's id, the ids."""
    store = platform.store
    assert isinstance(store, PostgresStore)
    session_id = (await ok(platform, "open_session", alias=alias))["session"]["id"]
    ids = [
        int(
            (await ok(platform, "write_object", session_id=session_id, alias=f"x/{n}", value={"type": "t"}))["event_id"]
        )
        for n in range(3)
    ]
    lane_id = await store.pool.fetchval(
        "INSERT INTO orchestrator.lanes (session_id, listener, lane, workflow_id, routed_through) VALUES ($1, 'l',"
        " 'k', 'w', $2)"
        " RETURNING id",
        session_id,
        ids[-1],
    )
    await store.pool.execute(
        "INSERT INTO orchestrator.lane_queue (lane_id, first_id, last_id) VALUES ($1, $2, $3)", lane_id, ids[0], ids[-1]
    )
    return session_id, int(lane_id), ids


def _record_body(session_id: str, lane_id: int, ids: list[int], execution_id: str) -> dict[str, Any]:
    """`orchestrator_lane_record`'s body for a batch of `ids` whose run is `execution_id`."""
    return {
        "lane_id": lane_id, "seq": 0, "session_id": session_id, "listener": "l", "lane": "k", "kind": "batch",
        "key_slot": None, "fires_limit": 100, "executions_limit": 100,
        "batch": {"first_id": ids[0], "last_id": ids[-1], "event_ids": ids, "entry_ids": ids, "retry": 0,
                  "replay": 0, "counted": False, "run_key": "rk"},
        "run": {"run_key": "rk", "execution_id": execution_id, "retry": 0, "plan": {}, "workflow": "wf",
                "depth": 1, "batch": {}, "cause": None},
    }  # fmt: skip


@pytest.mark.asyncio
async def test_a_session_deleted_while_a_batch_is_recorded_waits_for_the_record(platform: Platform) -> None:
    """The record locks its lane and takes its queue rows, then inserts its run's execution (whose key check
    wants the session's row); the deletion locks the session's row (its alias freed) and then wants the lane's
    queue. Each waited on the other until the record took the session's row first."""
    store = platform.store
    assert isinstance(store, PostgresStore)
    session_id, lane_id, ids = await _lane_with_events(platform, "doomed")
    async with store.pool.acquire() as holder:
        held = holder.transaction()
        await held.start()
        # Holds the execution's id, so the record stops at its insert after taking the lane and its queue.
        await holder.execute(
            "INSERT INTO orchestrator.executions (id, session_id, workflow) VALUES ('exe:held', $1, 'wf')", session_id
        )
        recording = asyncio.create_task(
            store.pool.fetchval(
                "SELECT orchestrator.orchestrator_lane_record($1::jsonb)",
                _record_body(session_id, lane_id, ids, "exe:held"),
            )
        )
        await asyncio.sleep(0.3)
        deleting = asyncio.create_task(
            store.pool.fetchval("SELECT orchestrator.orchestrator_mark_deleting($1, NULL)", session_id)
        )
        await asyncio.sleep(0.3)
        await held.rollback()  # the id given up: the record inserts the execution, the deletion goes on
    recorded, marked = await asyncio.wait_for(asyncio.gather(recording, deleting), timeout=10)
    assert marked is True
    assert "batch_id" in recorded


@pytest.mark.asyncio
@pytest.mark.parametrize("verb", ["lane_record", "route", "execution_record"])
async def test_the_engine_takes_the_session_before_its_rows(platform: Platform, verb: str) -> None:
    """While a deletion holds the session's row (it takes it first), a batch's record, a routing round and a run
    of no lane's record (`start_execution`'s) wait for it before they lock anything of the session: its lane, its
    routing position and its executions lock stay free."""
    store = platform.store
    assert isinstance(store, PostgresStore)
    session_id, lane_id, ids = await _lane_with_events(platform, f"held-{verb}")
    if verb == "lane_record":
        statement, body = (
            "SELECT orchestrator.orchestrator_lane_record($1::jsonb)",
            _record_body(session_id, lane_id, ids, "exe:r"),
        )
    elif verb == "execution_record":
        statement, body = (
            "SELECT orchestrator.orchestrator_execution_record($1::jsonb)",
            {"execution_id": "exe:h", "session_id": session_id, "workflow": "wf", "depth": 0, "limit": 100},
        )
    else:
        await platform.store.pool.execute(
            "UPDATE orchestrator.routing_cursors SET routed_event_id = 0 WHERE session_id = $1", session_id
        )
        statement, body = "SELECT orchestrator.orchestrator_route_page($1, 1000, 16)", session_id
    async with store.pool.acquire() as deletion:
        held = deletion.transaction()
        await held.start()
        await deletion.execute("SELECT 1 FROM orchestrator.sessions WHERE id = $1 FOR UPDATE", session_id)
        stepping = asyncio.create_task(store.pool.fetchval(statement, body))
        await asyncio.sleep(0.3)
        assert not stepping.done()
        async with store.transaction() as look:
            # Neither is locked by the waiting verb (NOWAIT fails at once on a row another holds).
            await look.execute("SELECT 1 FROM orchestrator.lanes WHERE id = $1 FOR UPDATE NOWAIT", lane_id)
            await look.execute(
                "SELECT 1 FROM orchestrator.routing_cursors WHERE session_id = $1 FOR UPDATE NOWAIT", session_id
            )
            assert await look.fetchval(EXECUTIONS_LOCK_FREE, session_id)
        await held.rollback()
    await asyncio.wait_for(stepping, timeout=10)


@pytest.mark.asyncio
async def test_runs_recorded_at_once_in_a_session_wait_for_each_other_and_the_later_counts_the_earlier(
    platform: Platform,
) -> None:
    """Two lanes of different listeners record a run at once with room for one: the second waits for the
    session's executions lock until the first commits, then counts its run and answers stale; a start by hand
    (`start_execution`'s record) does the same. Nothing else is held meanwhile: the first's lane, the second's."""
    store = platform.store
    assert isinstance(store, PostgresStore)
    session_id, first_lane, ids = await _lane_with_events(platform, "at-once")
    second_lane = await store.pool.fetchval(
        "INSERT INTO orchestrator.lanes (session_id, listener, lane, workflow_id, routed_through) VALUES ($1, 'm',"
        " 'k', 'w2', $2) RETURNING id",
        session_id,
        ids[-1],
    )
    first = {**_record_body(session_id, first_lane, ids, "exe:first"), "executions_limit": 1}
    second = {
        **_record_body(session_id, int(second_lane), ids, "exe:second"),
        "listener": "m",
        "executions_limit": 1,
        "run": {**first["run"], "run_key": "rk2", "execution_id": "exe:second"},
        "batch": {**first["batch"], "run_key": "rk2"},
    }
    by_hand = {"execution_id": "exe:by-hand", "session_id": session_id, "workflow": "wf", "depth": 0, "limit": 1}
    async with store.transaction() as recording:
        assert "batch_id" in await recording.fetchval("SELECT orchestrator.orchestrator_lane_record($1::jsonb)", first)
        later = asyncio.create_task(
            store.pool.fetchval("SELECT orchestrator.orchestrator_lane_record($1::jsonb)", second)
        )
        started = asyncio.create_task(
            store.pool.fetchval("SELECT orchestrator.orchestrator_execution_record($1::jsonb)", by_hand)
        )
        await asyncio.sleep(0.3)
        assert not later.done() and not started.done(), "each waits for the first to commit"
        async with store.transaction() as look:
            await look.execute("SELECT 1 FROM orchestrator.lanes WHERE id = $1 FOR UPDATE NOWAIT", second_lane)
    assert await asyncio.wait_for(later, timeout=5) == {"stale": "executions"}
    assert await asyncio.wait_for(started, timeout=5) == {"running": 1}
    running = await store.pool.fetch(
        "SELECT id FROM orchestrator.executions WHERE session_id = $1 AND status = 'running'", session_id
    )
    assert [r["id"] for r in running] == ["exe:first"]


@pytest.mark.asyncio
async def test_a_run_ending_while_a_round_queues_for_its_lane_hands_the_lane_on(platform: Platform) -> None:
    """A routing round holds the lane's row while it queues an event and asks whether the lane's runs hold all its
    slots; a run of the lane that ends meanwhile freed the slot but read the lane before the round committed. Each
    left the lane to the other (the round: a run holds the slot, its end hands it on; the end: nothing waits), and
    the event waited for the stale-lane poll, ten seconds. The end takes the lane's row before its run's: it waits
    for the round and finds the event, so it drives the lane at once."""
    store = platform.store
    assert isinstance(store, PostgresStore)
    session_id, lane_id, ids = await _lane_with_events(platform, "hand-on")
    recorded = await store.pool.fetchval(
        "SELECT orchestrator.orchestrator_lane_record($1::jsonb)", _record_body(session_id, lane_id, ids, "exe:r")
    )
    assert "batch_id" in recorded
    written = await ok(platform, "write_object", session_id=session_id, alias="x/9", value={"type": "t"})
    later = int(written["event_id"])
    ending = {"execution_id": "exe:r", "session_id": session_id, "listener": "l", "status": "completed"}
    async with store.transaction() as round_:
        # The round's hold on the lane, and what it queues (`orchestrator_route_page`).
        await round_.execute("SELECT 1 FROM orchestrator.lanes WHERE id = $1 FOR UPDATE", lane_id)
        await round_.execute(
            "INSERT INTO orchestrator.lane_queue (lane_id, first_id, last_id) VALUES ($1, $2, $2)", lane_id, later
        )
        await round_.execute("UPDATE orchestrator.lanes SET routed_through = $2 WHERE id = $1", lane_id, later)
        end = asyncio.create_task(store.pool.fetchval("SELECT orchestrator.orchestrator_run_end($1::jsonb)", ending))

        async def waiting_or_done() -> bool:
            locked = await store.pool.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND query LIKE '%orchestrator_run_end%' AND pid <> pg_backend_pid()"
            )
            return end.done() or locked > 0

        # The premise, asserted: the end reached the lane while the round held it, and waits for the round.
        await eventually(waiting_or_done, within=10, what="the end to wait on the round's lock or to end")
        assert not end.done(), "the end waits for the round's hold on the lane"
    answer = await asyncio.wait_for(end, timeout=5)
    assert answer["recorded"] is True
    assert [d["lane"] for d in answer["drive"]] == ["k"], "the end hands the lane on: an event waits in it"
