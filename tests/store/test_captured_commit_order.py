"""A captured change stages its event in its commit, and the event takes its id when it is appended after the commit,
by the session's next writer or reader or the router (0033_captured_staged.sql): writers of one session take no
lock, and ids still follow the order of the commits a writer or reader saw, so a reader paging by id never skips
one.
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


async def test_staged_changes_take_their_ids_in_the_order_of_their_commits_not_of_their_statements(
    platform: Platform, app: asyncpg.Connection, fresh_db: str
) -> None:
    """Nobody reads or writes the session between the commits: the events are appended together after both, the
    later statement's first, as its commit came first (the embedded cluster stamps commits)."""
    assert await app.fetchval("SHOW track_commit_timestamp") == "on"
    sid = await _session(platform)
    other = await asyncpg.connect(fresh_db)
    try:
        async with app.transaction():
            await app.execute("INSERT INTO tickets VALUES (1, $1, 'statement first, commit last')", sid)
            async with other.transaction():
                await other.execute("INSERT INTO tickets VALUES (2, $1, 'statement last, commit first')", sid)
            assert await app.fetchval("SELECT count(*) FROM orchestrator.events WHERE session_id = $1", sid) == 0
    finally:
        await other.close()
    events = await all_events(platform, sid)
    assert [(e["type"], e["data"]["_id"]) for e in events] == [("ticket.created", 2), ("ticket.created", 1)]


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


async def test_a_change_made_while_its_session_was_open_keeps_its_event_when_the_session_closes_before_its_commit(
    platform: Platform, app: asyncpg.Connection
) -> None:
    """The statement found the session open: its event is staged with the change and appended after the commit,
    though the session closed meanwhile (0033_captured_staged.sql). A statement that finds it closed is refused."""
    sid = await _session(platform)
    async with app.transaction():
        await app.execute("INSERT INTO tickets VALUES (1, $1, 'just in time')", sid)
        await ok(platform, "close_session", session_id=sid)
    assert [(e["type"], e["data"]["_id"]) for e in await all_events(platform, sid)] == [("ticket.created", 1)]
    assert await app.fetchval("SELECT count(*) FROM orchestrator.captured_staged") == 0
    with pytest.raises(asyncpg.ObjectNotInPrerequisiteStateError, match=r"session_id: session .* is not open"):
        await app.execute("INSERT INTO tickets VALUES (2, $1, 'closed')", sid)
    with pytest.raises(asyncpg.NoDataFoundError, match="session_id: no session 'ses_nope'"):
        await app.execute("INSERT INTO tickets VALUES (3, 'ses_nope', 'nowhere')")
    assert await app.fetchval("SELECT count(*) FROM tickets") == 1


async def test_a_captured_event_is_staged_in_the_commit_and_appended_by_the_next_writer_or_reader(
    platform: Platform, app: asyncpg.Connection
) -> None:
    sid = await _session(platform)
    async with app.transaction():
        await app.execute("INSERT INTO tickets VALUES (1, $1, 'one')", sid)
        # Not in the stream before its commit, even to a reader that settles what is staged.
        assert await all_events(platform, sid) == []
    assert await app.fetchval("SELECT count(*) FROM orchestrator.captured_staged") == 1, "staged in the commit"
    last = await app.fetchval("SELECT last_event_id FROM orchestrator.sessions WHERE id = $1", sid)
    # The session's next writer appends it first: its id comes before the writer's own.
    await ok(platform, "write_object", session_id=sid, alias="a", value={"type": "t"})
    assert await app.fetchval("SELECT count(*) FROM orchestrator.captured_staged") == 0
    rows = await app.fetch("SELECT id, type FROM orchestrator.events WHERE session_id = $1 ORDER BY id", sid)
    assert [r["type"] for r in rows] == ["ticket.created", "object.written"]
    assert rows[0]["id"] > last
    # A reader appends what is staged before it reads.
    await app.execute("INSERT INTO tickets VALUES (2, $1, 'two')", sid)
    assert [e["type"] for e in await all_events(platform, sid)] == [
        "ticket.created",
        "object.written",
        "ticket.created",
    ]
    # A rolled-back change stages nothing.
    with pytest.raises(RuntimeError):
        async with app.transaction():
            await app.execute("INSERT INTO tickets VALUES (3, $1, 'gone')", sid)
            raise RuntimeError("rolled back")
    assert await app.fetchval("SELECT count(*) FROM orchestrator.captured_staged") == 0


async def test_a_table_captured_before_keeps_its_statement_triggers_and_they_stage_too(
    platform: Platform, app: asyncpg.Connection
) -> None:
    """A table captured by a release before 0033 keeps the statement triggers it was given (the upgrade makes no
    DDL on the application's tables): they stage its events as the row triggers do."""
    await app.execute(
        "DROP TRIGGER orchestrator_capture_insert ON tickets; DROP TRIGGER orchestrator_capture_update"
        " ON tickets; DROP TRIGGER orchestrator_capture_delete ON tickets"
    )
    await app.execute(
        "CREATE TRIGGER orchestrator_capture_insert AFTER INSERT ON tickets REFERENCING NEW TABLE AS new_rows"
        " FOR EACH STATEMENT EXECUTE FUNCTION orchestrator.orchestrator_captured();"
        "CREATE TRIGGER orchestrator_capture_update AFTER UPDATE ON tickets REFERENCING OLD TABLE AS old_rows"
        " NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION orchestrator.orchestrator_captured();"
        "CREATE TRIGGER orchestrator_capture_delete AFTER DELETE ON tickets REFERENCING OLD TABLE AS old_rows"
        " FOR EACH STATEMENT EXECUTE FUNCTION orchestrator.orchestrator_captured()"
    )
    sid = await _session(platform)
    async with app.transaction():
        await app.execute("INSERT INTO tickets VALUES (1, $1, 'one'), (2, $1, 'two')", sid)
        await app.execute("UPDATE tickets SET title = 'uno' WHERE id = 1")
        await app.execute("DELETE FROM tickets WHERE id = 2")
        assert await app.fetchval("SELECT count(*) FROM orchestrator.captured_staged") == 3, "a statement each"
    events = await all_events(platform, sid)
    assert [(e["type"], e["data"]["_id"]) for e in events] == [
        ("ticket.created", 1),
        ("ticket.created", 2),
        ("ticket.updated", 1),
        ("ticket.deleted", 2),
    ]
    assert events[2]["data"]["changed"] == ["title"]


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


async def test_a_statement_of_many_rows_stages_every_row_in_order_between_those_before_and_after_it(
    platform: Platform, app: asyncpg.Connection
) -> None:
    sid = await _session(platform)
    async with app.transaction():
        await app.execute("INSERT INTO tickets VALUES (1, $1, 'one')", sid)
        await app.execute("INSERT INTO tickets SELECT n, $1, 'many' FROM generate_series(2, 1201) n", sid)
        await app.execute("INSERT INTO tickets VALUES (1202, $1, 'last')", sid)
        assert await app.fetchval("SELECT count(*) FROM orchestrator.captured_staged") == 1202, "a row each"
    ids: list[int] = []
    while page := (await ok(platform, "list_session_events", session_id=sid, after=ids[-1] if ids else 0))["events"]:
        ids.extend(e["id"] for e in page)
        rows = [e["data"]["_id"] for e in page]
        assert rows == list(range(len(ids) - len(page) + 1, len(ids) + 1))
    assert len(ids) == 1202
