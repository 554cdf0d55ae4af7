"""A notification wakes one router, not all of them (`core/wake_shards.py`, `engine/wake_listen.py`).

Sessions fall into 64 shards; each shard's channel is listened on by the one router holding its advisory lock.
What must hold: the routers share the shards out with none left unheld and none held twice; a router that dies
frees its shards for the others; a session's write wakes exactly one router; and events are routed whichever
router holds their session's shard.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from typing import Any

import asyncpg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from temporalio.testing import WorkflowEnvironment

from orchestrator.core.wake_shards import (
    LEGACY_CHANNEL,
    SHARDS,
    channel,
    fair_share,
    rebalance,
    shard_of,
    shared_out,
)
from orchestrator.door.streams import StreamHub
from orchestrator.engine.router import Router
from orchestrator.engine.wake_listen import ShardListener
from orchestrator.platform import Platform
from orchestrator.store.migrate import function_files
from orchestrator.store.postgres import PostgresStore
from tests.engine.harness import eventually
from tests.store.helpers import ok


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40), st.randoms(use_true_random=False))
def test_routers_share_out_every_shard_once_within_a_few_turns(routers: int, rng: random.Random) -> None:
    """The rule alone, the locks kept in a dict: turns in any order, then every shard held by one router and none
    holds more than its fair share."""
    owner: dict[int, int] = {}
    held: list[set[int]] = [set() for _ in range(routers)]
    for _ in range(4):
        for r in rng.sample(range(routers), routers):
            share = rebalance(len(held[r]), routers)
            for shard in sorted(held[r])[len(held[r]) - share.give_back :] if share.give_back else []:
                held[r].discard(shard)
                del owner[shard]
            free = [s for s in range(SHARDS) if s not in owner][: share.take]
            for shard in free:
                owner[shard] = r
                held[r].add(shard)
    assert sorted(owner) == list(range(SHARDS))
    assert all(len(h) <= fair_share(routers) for h in held)
    assert shared_out(held)


async def test_a_session_s_shard_is_the_same_in_python_and_in_postgresql(fresh_db: str, platform: Platform) -> None:
    rng = random.Random(7)
    ids = [f"ses_{rng.getrandbits(64):016x}" for _ in range(2000)] + ["", "é", "a" * 300]
    conn = await asyncpg.connect(fresh_db)
    try:
        sql = await conn.fetch("SELECT orchestrator.orchestrator_wake_channel(x) AS c FROM unnest($1::text[]) x", ids)
    finally:
        await conn.close()
    assert [r["c"] for r in sql] == [channel(shard_of(i)) for i in ids]
    assert len({shard_of(i) for i in ids}) == SHARDS, "2,000 ids fall in every shard"


@contextlib.asynccontextmanager
async def _listeners(url: str, count: int) -> AsyncIterator[tuple[list[ShardListener], list[Counter[str]]]]:
    heard: list[Counter[str]] = [Counter() for _ in range(count)]
    made: list[ShardListener] = []
    try:
        for n in range(count):

            def on_notify(_c: object, _p: int, _ch: str, payload: object, n: int = n) -> None:
                heard[n][str(payload)] += 1

            made.append(await ShardListener.open(url, "orchestrator", on_notify))
        yield made, heard
    finally:
        for listener in made:
            listener.terminate()


async def _balanced(listeners: list[ShardListener]) -> None:
    for _ in range(3):
        for listener in listeners:
            await listener.balance()


async def test_each_notification_reaches_one_router_and_a_dead_router_s_shards_go_to_the_others(
    fresh_db: str, platform: Platform
) -> None:
    async with _listeners(fresh_db, 3) as (listeners, heard):
        await _balanced(listeners)
        held = [set(listener.held) for listener in listeners]
        assert sorted(s for h in held for s in h) == list(range(SHARDS)), "every shard held once"
        assert all(0 < len(h) <= fair_share(3) for h in held), held

        sessions = [f"ses_{n}" for n in range(200)]
        writer = await asyncpg.connect(fresh_db)
        try:
            for sid in sessions:
                await writer.execute("SELECT pg_notify(orchestrator.orchestrator_wake_channel($1), $1)", sid)

            async def all_heard() -> bool:
                return sum(sum(h.values()) for h in heard) >= len(sessions)

            await eventually(all_heard, within=5, what="every notification")
            await asyncio.sleep(0.2)
            for sid in sessions:
                hearers = [n for n in range(3) if heard[n][sid]]
                assert len(hearers) == 1 and heard[hearers[0]][sid] == 1, (sid, hearers)
                assert shard_of(sid) in held[hearers[0]]

            # One dies (its connection with it): the others take its shards at their next turns.
            listeners[0].terminate()
            await asyncio.sleep(0.2)
            await _balanced(listeners[1:])
            assert sorted(s for listener in listeners[1:] for s in listener.held) == list(range(SHARDS))
            for h in heard:
                h.clear()
            for sid in sessions:
                await writer.execute("SELECT pg_notify(orchestrator.orchestrator_wake_channel($1), $1)", sid)
            await eventually(all_heard, within=5, what="every notification after the death")
            assert not heard[0]
            assert all(heard[1][sid] + heard[2][sid] == 1 for sid in sessions)
        finally:
            await writer.close()


async def _lock_holders(conn: asyncpg.Connection, listeners: list[ShardListener]) -> dict[int, int]:
    """Each shard locked on the server: which listener's connection holds it."""
    pids = {listener.conn.get_server_pid(): n for n, listener in enumerate(listeners)}
    rows = await conn.fetch(
        "SELECT objid::bigint AS shard, pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2"
        " AND classid = $1::bigint::oid AND granted",
        listeners[0].space,
    )
    return {int(r["shard"]): pids.get(r["pid"], -1) for r in rows}


async def test_the_locks_on_the_server_are_the_shards_each_router_thinks_it_holds(
    fresh_db: str, platform: Platform
) -> None:
    """Turns with shares that do not divide 64 (22, 22, 20), then a fourth router: each holds 16, and the server's
    locks say the same (a shard locked twice by one router, once given back, stayed locked by nobody's list)."""
    conn = await asyncpg.connect(fresh_db)
    try:
        async with _listeners(fresh_db, 3) as (three, _):
            for _ in range(6):
                for listener in three:
                    await listener.balance()
            async with _listeners(fresh_db, 1) as ([fourth], _):
                everyone = [*three, fourth]
                for _ in range(4):
                    for listener in everyone:
                        await listener.balance()
                assert [len(listener.held) for listener in everyone] == [16, 16, 16, 16]
                holders = await _lock_holders(conn, everyone)
                assert holders == {s: n for n, listener in enumerate(everyone) for s in listener.held}
                # Each lock once: after giving back all it holds, a router holds none on the server.
                for _ in range(3):
                    await fourth.balance()
                gone = sorted(fourth.held)
                assert await fourth.conn.fetchval(
                    "SELECT bool_and(pg_advisory_unlock($1, s)) FROM unnest($2::integer[]) s", fourth.space, gone
                )
                assert not [s for s, n in (await _lock_holders(conn, everyone)).items() if n == 3]
    finally:
        await conn.close()


async def test_the_channel_of_the_releases_before_wakes_every_router_while_an_upgrade_runs(
    fresh_db: str, platform: Platform
) -> None:
    async with _listeners(fresh_db, 2) as (listeners, heard):
        await _balanced(listeners)
        writer = await asyncpg.connect(fresh_db)
        try:
            await writer.execute("SELECT pg_notify('orchestrator_events', 'ses_old')")

            async def both() -> bool:
                return all(h["ses_old"] == 1 for h in heard)

            await eventually(both, within=5, what="the old channel's notification at both routers")
        finally:
            await writer.close()


async def test_the_shard_is_the_same_in_a_database_of_another_encoding(fresh_db: str) -> None:
    admin = await asyncpg.connect(fresh_db)
    name = f"latin_{random.getrandbits(32):08x}"
    try:
        await admin.execute(f"CREATE DATABASE {name} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
        head, _, query = fresh_db.partition("?")
        latin = await asyncpg.connect(head.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else ""))
        try:
            await latin.execute("CREATE SCHEMA orchestrator")
            await latin.execute(dict(function_files())["orchestrator_wake_channel.sql"])
            ids = ["ses_é", "ses_ÿ", "ses_plain", "Ünïcode"]
            got = await latin.fetch(
                "SELECT orchestrator.orchestrator_wake_channel(x) AS c FROM unnest($1::text[]) x", ids
            )
        finally:
            await latin.close()
        assert [r["c"] for r in got] == [channel(shard_of(i)) for i in ids]
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {name}")
        await admin.close()


async def test_a_stream_hub_listens_on_its_sessions_shards_only_while_it_streams_them(
    fresh_db: str, platform: Platform
) -> None:
    hub = StreamHub(lambda: fresh_db)
    same = [f"ses_{n}" for n in range(400)]
    a, b = [sid for sid in same if shard_of(sid) == shard_of(same[0])][:2]
    writer = await asyncpg.connect(fresh_db)

    async def channels() -> set[str]:
        assert hub._conn is not None
        return {r[0] for r in await hub._conn.fetch("SELECT pg_listening_channels()")}

    try:
        async with hub.subscribed(a) as woke_a:
            async with hub.subscribed(b) as woke_b:
                assert await channels() == {LEGACY_CHANNEL, channel(shard_of(a))}
                woke_a.clear()  # set when the hub connected: every stream looks again
                await writer.execute("SELECT pg_notify(orchestrator.orchestrator_wake_channel($1), $1)", b)
                await asyncio.wait_for(woke_b.wait(), 5)
                await asyncio.sleep(0.1)
                assert not woke_a.is_set(), "a session of the same shard is not woken by another's write"
            assert await channels() == {LEGACY_CHANNEL, channel(shard_of(a))}, "a still streams in that shard"
            await writer.execute("SELECT pg_notify(orchestrator.orchestrator_wake_channel($1), $1)", a)
            await asyncio.wait_for(woke_a.wait(), 5)
        assert await channels() == {LEGACY_CHANNEL}, "nobody streams that shard any more"
        # The connection dropped under it: the next subscriber listens again, on its own shard.
        assert hub._conn is not None
        hub._conn.terminate()
        async with hub.subscribed(b) as woke:
            await writer.execute("SELECT pg_notify(orchestrator.orchestrator_wake_channel($1), $1)", b)
            await asyncio.wait_for(woke.wait(), 5)
    finally:
        await writer.close()
        await hub.close()


async def test_a_router_that_joins_gets_its_share_and_no_shard_is_held_twice(fresh_db: str, platform: Platform) -> None:
    async with _listeners(fresh_db, 1) as ([first], _):
        assert first.held == set(range(SHARDS)), "alone, it holds every shard"
        async with _listeners(fresh_db, 1) as ([second], _):
            assert second.held == set(), "nothing is free yet"
            await first.balance()  # gives back what is beyond half
            assert len(first.held) == SHARDS // 2
            await second.balance()
            assert second.held == set(range(SHARDS)) - first.held
        # Its backend ends a moment after its connection is cut (the server's, not the client's, doing): the
        # balance each second takes the shards once the locks are free.
        deadline = asyncio.get_running_loop().time() + 5
        while first.held != set(range(SHARDS)) and asyncio.get_running_loop().time() < deadline:
            await first.balance()
            await asyncio.sleep(0.05)
        assert first.held == set(range(SHARDS)), "the one that left gave its shards back with its connection"


async def _shared_out(routers: Sequence[Router]) -> bool:
    return shared_out([r.listener.held if r.listener else set() for r in routers])


@pytest.mark.parametrize("temporal_env", ["time_skipping"], indirect=True)
async def test_two_routers_route_every_session_and_each_write_wakes_one_of_them(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    store = platform.store
    assert isinstance(store, PostgresStore)
    rounds: list[Counter[str]] = [Counter(), Counter()]

    class Counting(Router):
        def __init__(self, n: int) -> None:
            super().__init__(
                store, store.lanes, temporal_env.client, platform.direct_url, platform.settings, poll_seconds=60
            )
            self.n = n

        async def route_session(self, session_id: str) -> int:
            rounds[self.n][session_id] += 1
            return await super().route_session(session_id)

    routers = [Counting(0), Counting(1)]
    tasks = [asyncio.create_task(r.run()) for r in routers]
    try:
        await eventually(lambda: _shared_out(routers), within=10, what="the shards shared out")
        first = routers[0].listener
        assert first is not None
        present = await first.routers()
        assert present == 2, f"{present} routers in this database: another test's router still runs in it"
        sessions = [str((await ok(platform, "open_session"))["session"]["id"]) for _ in range(40)]
        # A router's first look for sessions behind comes with its first wake-up: had the writes below been it,
        # either router would have found every session behind. Both woken once first (the channel both hear).
        await first.conn.execute("SELECT pg_notify($1, 'nobody')", LEGACY_CHANNEL)
        await asyncio.sleep(0.5)
        for r in rounds:
            r.clear()
        for sid in sessions:
            await ok(platform, "write_object", session_id=sid, alias="a", value={"type": "t"})
        conn = await asyncpg.connect(platform.direct_url)
        try:

            async def routed() -> bool:
                behind = await conn.fetchval(
                    "SELECT count(*) FROM orchestrator.sessions s JOIN orchestrator.routing_cursors c"
                    " ON c.session_id = s.id WHERE s.id = ANY($1::text[]) AND c.routed_event_id < s.last_event_id",
                    sessions,
                )
                return int(behind) == 0

            # The slow poll is a minute away: only the notifications route them.
            await eventually(routed, within=10, what="every session routed")
        finally:
            await conn.close()
        both = [sid for sid in sessions if rounds[0][sid] and rounds[1][sid]]
        assert not both, f"woke both routers: {both}"
        assert rounds[0] and rounds[1], "the routers share the sessions"
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@pytest.mark.parametrize("temporal_env", ["time_skipping"], indirect=True)
async def test_a_router_whose_listening_connection_the_server_drops_comes_back_and_every_shard_is_held(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    store = platform.store
    assert isinstance(store, PostgresStore)
    routers = [
        Router(store, store.lanes, temporal_env.client, platform.direct_url, platform.settings, poll_seconds=60)
        for _ in range(2)
    ]
    tasks = [asyncio.create_task(r.run()) for r in routers]
    conn = await asyncpg.connect(platform.direct_url)
    try:
        await eventually(lambda: _shared_out(routers), within=10, what="the shards shared out")
        first = routers[0].listener
        assert first is not None
        pid = first.conn.get_server_pid()
        assert await conn.fetchval("SELECT pg_terminate_backend($1)", pid)
        await eventually(
            lambda: asyncio.sleep(0, routers[0].listener is not None and routers[0].listener is not first),
            within=15,
            what="the router to connect again",
        )
        await eventually(lambda: _shared_out(routers), within=15, what="every shard held again, by both")
        sid = str((await ok(platform, "open_session"))["session"]["id"])
        await ok(platform, "write_object", session_id=sid, alias="a", value={"type": "t"})

        async def routed() -> bool:
            return bool(
                await conn.fetchval(
                    "SELECT c.routed_event_id >= s.last_event_id FROM orchestrator.sessions s"
                    " JOIN orchestrator.routing_cursors c ON c.session_id = s.id WHERE s.id = $1",
                    sid,
                )
            )

        await eventually(routed, within=10, what="a write after it routed by a notification")
    finally:
        await conn.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@pytest.mark.parametrize("temporal_env", ["time_skipping"], indirect=True)
async def test_a_router_cancelled_as_it_is_woken_stops(platform: Platform, temporal_env: WorkflowEnvironment) -> None:
    """Python 3.11's `asyncio.wait_for` returns, rather than raises, when the task is cancelled in the loop turn
    its awaitable completes in: a router waiting for its wake-up that way outlived the cancel."""
    store = platform.store
    assert isinstance(store, PostgresStore)
    router = Router(store, store.lanes, temporal_env.client, platform.direct_url, platform.settings, poll_seconds=60)
    task = asyncio.create_task(router.run())
    try:
        await eventually(lambda: _shared_out([router]), within=15, what="the router to hold the shards")
        await asyncio.sleep(0.5)  # idle at its wait for a wake-up
        router._wake.set()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(task), 10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.mark.parametrize("temporal_env", ["time_skipping"], indirect=True)
async def test_a_router_cancelled_as_it_listens_stops(
    platform: Platform, temporal_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same race on its listening connection: the cancel lands as a LISTEN completes (the router's first
    thing, and again after every outage). Under `wait_for` the router went on routing as if never cancelled: a
    test's teardown waited out its 30 s for it, eight times in one run of the suite."""
    store = platform.store
    assert isinstance(store, PostgresStore)
    router = Router(store, store.lanes, temporal_env.client, platform.direct_url, platform.settings, poll_seconds=60)
    task = asyncio.create_task(router.run())
    listen = asyncpg.Connection.add_listener

    async def cancelled_as_it_listens(self: asyncpg.Connection[Any], channel: str, callback: Any) -> None:
        await listen(self, channel, callback)
        task.cancel()  # the LISTEN is done; the router has not yet been given control back

    monkeypatch.setattr(asyncpg.Connection, "add_listener", cancelled_as_it_listens)
    try:
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(task), 10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
