"""A captured change takes its event's id at its transaction's commit, under its session's lock
(0029_wakeups_coalesced.sql): writers of one session no longer wait for each other's whole transactions, and ids
still follow the order of the commits, so a reader paging by id never skips one.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import asyncpg
import pytest

from orchestrator.platform import Platform
from orchestrator.transactional import emit
from tests.store.helpers import all_events, ok


@pytest.fixture
async def app(fresh_db: str, platform: Platform) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(fresh_db)
    await conn.execute("CREATE TABLE tickets (id bigint PRIMARY KEY, session text, title text)")
    await ok(platform, "capture_table", table="tickets", type_prefix="ticket", session_column="session")
    await ok(platform, "save_event_type", name="ticket.escalated", schema={"type": "object"})
    yield conn
    await conn.close()


async def _session(platform: Platform) -> str:
    return str((await ok(platform, "open_session"))["session"]["id"])


async def test_a_captured_change_held_open_holds_up_no_other_writer_and_takes_its_id_at_its_commit(
    platform: Platform, app: asyncpg.Connection, fresh_db: str
) -> None:
    sid = await _session(platform)
    other = await asyncpg.connect(fresh_db)
    try:
        async with app.transaction():
            await app.execute("INSERT INTO tickets VALUES (1, $1, 'first in')", sid)
            # Its session's other writers commit meanwhile, captured or through the platform.
            await asyncio.wait_for(other.execute("INSERT INTO tickets VALUES (2, $1, 'first out')", sid), 5)
            await asyncio.wait_for(ok(platform, "write_object", session_id=sid, alias="a", value={"type": "t"}), 5)
            assert [e["type"] for e in await all_events(platform, sid)] == ["ticket.created", "object.written"]
    finally:
        await other.close()
    events = await all_events(platform, sid)
    assert [(e["type"], (e["data"] or {}).get("_id")) for e in events] == [
        ("ticket.created", 2),
        ("object.written", None),
        ("ticket.created", 1),  # the statement ran first, the commit came last: so did its id
    ]
    assert [e["id"] for e in events] == sorted(e["id"] for e in events)


async def test_an_emit_after_a_captured_change_in_one_transaction_comes_after_it(
    platform: Platform, app: asyncpg.Connection
) -> None:
    sid = await _session(platform)
    async with app.transaction():
        await app.execute("INSERT INTO tickets VALUES (1, $1, 'one')", sid)
        emitted = await emit(app, sid, "ticket.escalated", {"ticket": 1})
        await app.execute("UPDATE tickets SET title = 'two' WHERE id = 1")
    events = await all_events(platform, sid)
    assert [e["type"] for e in events] == ["ticket.created", "ticket.escalated", "ticket.updated"]
    assert events[1]["id"] == emitted
    assert [e["id"] for e in events] == sorted(e["id"] for e in events)


async def test_a_savepoint_rolled_back_takes_its_captured_events_with_it(
    platform: Platform, app: asyncpg.Connection
) -> None:
    sid = await _session(platform)
    async with app.transaction():
        await app.execute("INSERT INTO tickets VALUES (1, $1, 'kept')", sid)
        with pytest.raises(RuntimeError):
            async with app.transaction():  # a savepoint
                await app.execute("INSERT INTO tickets VALUES (2, $1, 'gone')", sid)
                raise RuntimeError("the application changes its mind")
        await emit(app, sid, "ticket.escalated", {"ticket": 1})
        await app.execute("INSERT INTO tickets VALUES (3, $1, 'kept too')", sid)
    events = await all_events(platform, sid)
    assert [(e["type"], (e["data"] or {}).get("_id")) for e in events] == [
        ("ticket.created", 1),
        ("ticket.escalated", None),
        ("ticket.created", 3),
    ]


async def test_a_session_closed_before_the_commit_of_its_captured_change_fails_that_commit(
    platform: Platform, app: asyncpg.Connection
) -> None:
    sid = await _session(platform)
    with pytest.raises(asyncpg.ObjectNotInPrerequisiteStateError, match=r"session_id: session .* is not open"):
        async with app.transaction():
            await app.execute("INSERT INTO tickets VALUES (1, $1, 'too late')", sid)
            await ok(platform, "close_session", session_id=sid)
    assert await all_events(platform, sid) == []
    assert await app.fetchval("SELECT count(*) FROM tickets") == 0, "the change went with its event"
    assert await app.fetchval("SELECT count(*) FROM orchestrator.captured_pending") == 0
    # A session that is not open refuses the statement itself, as before.
    with pytest.raises(asyncpg.ObjectNotInPrerequisiteStateError):
        await app.execute("INSERT INTO tickets VALUES (2, $1, 'closed')", sid)
    with pytest.raises(asyncpg.NoDataFoundError, match="session_id: no session 'ses_nope'"):
        await app.execute("INSERT INTO tickets VALUES (3, 'ses_nope', 'nowhere')")


async def test_concurrent_captured_writers_and_a_tailing_reader_agree(
    platform: Platform, app: asyncpg.Connection, fresh_db: str
) -> None:
    """Writers of one session with random pauses inside their transactions (captured rows, emits beside them,
    some rolled back); a reader tailing the stream by id sees every committed event, none twice, in id order."""
    sid = await _session(platform)
    rng = random.Random(45)
    pool = await asyncpg.create_pool(fresh_db, min_size=4, max_size=16)
    rows = iter(range(1, 1_000_000))
    committed: set[int] = set()
    done = asyncio.Event()

    async def writer(seed: int) -> None:
        mine = random.Random(seed)
        for _ in range(12):
            row = next(rows)
            try:
                async with pool.acquire() as conn, conn.transaction():
                    await conn.execute("INSERT INTO tickets VALUES ($1, $2, 'x')", row, sid)
                    await asyncio.sleep(mine.random() * 0.01)
                    if mine.random() < 0.3:
                        await emit(conn, sid, "ticket.escalated", {"ticket": row})
                        await asyncio.sleep(mine.random() * 0.005)
                    if mine.random() < 0.2:
                        raise LookupError("rolled back")
                committed.add(row)
            except LookupError:
                pass

    seen: list[int] = []

    async def reader() -> None:
        while True:
            finished = done.is_set()
            after = seen[-1] if seen else 0
            page = await ok(platform, "list_session_events", session_id=sid, after=after, limit=1000)
            seen.extend(e["id"] for e in page["events"])
            if finished and not page["events"]:
                return
            await asyncio.sleep(rng.random() * 0.003)

    tail = asyncio.create_task(reader())
    try:
        await asyncio.gather(*(writer(n) for n in range(16)))
    finally:
        await pool.close()
    done.set()
    await tail
    events = await all_events(platform, sid)
    assert seen == [e["id"] for e in events], "the tailing reader skipped nothing and saw nothing twice"
    created = sorted(e["data"]["_id"] for e in events if e["type"] == "ticket.created")
    assert created == sorted(committed)
    assert len(committed) > 100


async def test_a_statement_of_many_rows_appends_at_once_after_what_waits_before_it(
    platform: Platform, app: asyncpg.Connection
) -> None:
    sid = await _session(platform)
    async with app.transaction():
        await app.execute("INSERT INTO tickets VALUES (1, $1, 'one')", sid)
        await app.execute("INSERT INTO tickets SELECT n, $1, 'many' FROM generate_series(2, 1201) n", sid)
        await app.execute("INSERT INTO tickets VALUES (1202, $1, 'last')", sid)
        assert await app.fetchval("SELECT count(*) FROM orchestrator.captured_pending") == 1, "only the last waits"
    ids: list[int] = []
    while page := (await ok(platform, "list_session_events", session_id=sid, after=ids[-1] if ids else 0))["events"]:
        ids.extend(e["id"] for e in page)
        rows = [e["data"]["_id"] for e in page]
        assert rows == list(range(len(ids) - len(page) + 1, len(ids) + 1))
    assert len(ids) == 1202
