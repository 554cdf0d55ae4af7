"""Events in the application's own transactions: emitted in the commit of its change (rolled back with it), and
its own tables as event sources (a trigger appends `<prefix>.created`, `.updated`, `.deleted`).

The application's connections here are its own (`asyncpg.connect` on the database's URL, on the server's default
search path, as the platform's are too), as an application sharing the database would hold them.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

import asyncpg
import pytest

from orchestrator.core.errors import CommandError
from orchestrator.platform import Platform
from orchestrator.store.captures import captured_schema
from orchestrator.transactional import emit, emit_events, emit_events_sa_async, emit_sa, emit_sa_async
from tests.store.helpers import all_events, ok, refused

MIGRATIONS = Path(__file__).parents[2] / "orchestrator" / "store" / "migrations"

TICKET = {
    "name": "ticket.escalated",
    "schema": {"type": "object", "properties": {"priority": {"type": "integer"}}, "required": ["priority"]},
}


@pytest.fixture
async def app(fresh_db: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(fresh_db)
    await conn.execute(
        "CREATE TABLE tickets (id bigint PRIMARY KEY, session text, title text, priority int, secret text)"
    )
    yield conn
    await conn.close()


async def _session(platform: Platform) -> str:
    return str((await ok(platform, "open_session"))["session"]["id"])


async def test_an_emit_commits_with_the_change_and_rolls_back_with_it(
    platform: Platform, app: asyncpg.Connection
) -> None:
    await ok(platform, "save_event_type", **TICKET)
    sid = await _session(platform)
    with pytest.raises(RuntimeError):
        async with app.transaction():
            await app.execute("INSERT INTO tickets (id, priority) VALUES (1, 1)")
            await emit(app, sid, "ticket.escalated", {"priority": 1})
            raise RuntimeError("the application changes its mind")
    assert await all_events(platform, sid) == [], "a rolled-back transaction leaves no event"
    assert await app.fetchval("SELECT count(*) FROM tickets") == 0

    async with app.transaction():
        await app.execute("INSERT INTO tickets (id, priority) VALUES (1, 1)")
        first = await emit(app, sid, "ticket.escalated", {"priority": 1}, idempotency_key="t1")
        again = await emit(app, sid, "ticket.escalated", {"priority": 1}, idempotency_key="t1")
    assert first == again
    [event] = await all_events(platform, sid)
    assert (event["id"], event["type"], event["data"]) == (first, "ticket.escalated", {"priority": 1})


async def test_an_emit_takes_its_commits_time_not_its_calls(platform: Platform, app: asyncpg.Connection) -> None:
    """SPEC 2: an event's `created_at` is its commit's time, and routing judges it by the listener in effect then.
    An emit in a transaction left open took the call's time: a listener that took effect before the commit never
    got its event. An event an idempotency key answers again keeps its own commit's time."""
    await ok(platform, "save_event_type", **TICKET)
    sid = await _session(platform)
    first = await emit(app, sid, "ticket.escalated", {"priority": 1}, idempotency_key="k1")
    kept = {e["id"]: e["created_at"] for e in await all_events(platform, sid)}
    async with app.transaction():
        again = await emit(app, sid, "ticket.escalated", {"priority": 1}, idempotency_key="k1")
        [new, newer] = await emit_events(
            app, sid, [{"type": "ticket.escalated", "data": {"priority": n}} for n in (2, 3)]
        )
        await asyncio.sleep(1.0)
        last_call = await app.fetchval("SELECT clock_timestamp()")
    committed = await app.fetchval("SELECT clock_timestamp()")
    assert again == first
    found = {e["id"]: datetime.fromisoformat(e["created_at"]) for e in await all_events(platform, sid)}
    assert found[first] == datetime.fromisoformat(kept[first]), "an event answered again keeps its time"
    assert last_call < found[new] <= found[newer] < committed, (last_call, found, committed)


async def test_a_commits_time_stamps_its_own_events_only_savepoints_and_all(
    platform: Platform, app: asyncpg.Connection, fresh_db: str
) -> None:
    """Another transaction's captured change, appended under this one's lock, keeps its own commit's time; an emit
    made in a savepoint is stamped with the rest of its transaction (its rows carry the savepoint's id)."""
    await ok(platform, "save_event_type", **TICKET)
    await ok(platform, "capture_table", table="tickets", type_prefix="ticket", session_column="session")
    sid = await _session(platform)
    other = await asyncpg.connect(fresh_db)
    try:
        async with app.transaction():
            async with app.transaction():  # a savepoint, released
                first = await emit(app, sid, "ticket.escalated", {"priority": 1})
            await other.execute("INSERT INTO tickets (id, session, priority) VALUES (1, $1, 1)", sid)
            await asyncio.sleep(0.5)
            second = await emit(app, sid, "ticket.escalated", {"priority": 2})  # its lock appends the capture
            await asyncio.sleep(0.5)
            last_call = await app.fetchval("SELECT clock_timestamp()")
    finally:
        await other.close()
    found = {e["id"]: (e["type"], datetime.fromisoformat(e["created_at"])) for e in await all_events(platform, sid)}
    [captured] = [at for kind, at in found.values() if kind == "ticket.created"]
    assert captured < last_call, "the capture keeps a time of its own, not the emitting transaction's commit"
    assert last_call < found[first][1] <= found[second][1], found


async def test_an_emit_that_cannot_be_is_refused_naming_the_field_and_aborts_nothing_it_was_not_asked_to(
    platform: Platform, app: asyncpg.Connection
) -> None:
    await ok(platform, "save_event_type", **TICKET)
    sid = await _session(platform)
    with pytest.raises(CommandError, match=r"events\.0\.data\.priority"):
        await emit(app, sid, "ticket.escalated", {"priority": "high"})
    # A mapping of any kind is an object, as before.
    proxied = await emit(app, sid, "ticket.escalated", MappingProxyType({"priority": 1}))
    assert [e["id"] for e in await all_events(platform, sid)] == [proxied]
    # Data that is no object, named as the SQL function names it (a TypeError or ValueError before).
    for data in ([1], "x", None):
        with pytest.raises(CommandError, match=r"events\.0\.data: an object is required"):
            await emit(app, sid, "ticket.escalated", data)  # type: ignore[arg-type]
        with pytest.raises(CommandError, match=r"events\.0\.data: an object is required"):
            await emit_events(app, sid, [{"type": "ticket.escalated", "data": data}])
    with pytest.raises(asyncpg.InvalidParameterValueError, match=r"events\.1\.type: \"ticket\.closed\" is not"):
        await emit_events(
            app, sid, [{"type": "ticket.escalated", "data": {"priority": 1}}, {"type": "ticket.closed", "data": {}}]
        )
    with pytest.raises(asyncpg.NoDataFoundError, match="session_id: no session 'ses_nope'"):
        await emit(app, "ses_nope", "ticket.escalated", {"priority": 1})
    await ok(platform, "close_session", session_id=sid)
    with pytest.raises(asyncpg.ObjectNotInPrerequisiteStateError, match=r"session_id: session .* is not open"):
        await emit(app, sid, "ticket.escalated", {"priority": 1})
    # Straight from SQL: the type and the shape are checked there too.
    other = await _session(platform)
    with pytest.raises(asyncpg.InvalidParameterValueError, match=r"events\.0\.data: an object is required"):
        await app.fetchval("SELECT orchestrator.emit($1, 'ticket.escalated', '[1]')", other)
    assert [e["id"] for e in await all_events(platform, sid)] == [proxied] and await all_events(platform, other) == []
    # A key the session holds for another kind of event is no retry of this one.
    third = await _session(platform)
    await ok(platform, "save_event_type", name="ticket.noted", schema={"type": "object"})
    first = await emit(app, third, "ticket.escalated", {"priority": 1}, idempotency_key="once")
    with pytest.raises(asyncpg.InvalidParameterValueError, match=r"events\.0\.key: this key names another kind"):
        await emit(app, third, "ticket.noted", {}, idempotency_key="once")
    # Nor is one given before it in the same call with another type (the second answered the first's id).
    twice = [
        {"type": "ticket.noted", "data": {}, "key": "new"},
        {"type": "ticket.escalated", "data": {"priority": 2}, "key": "new"},
    ]
    with pytest.raises(asyncpg.InvalidParameterValueError, match=r"events\.1\.key: this key names another kind"):
        await emit_events(app, third, twice)
    assert [e["id"] for e in await all_events(platform, third)] == [first]


async def test_sqlalchemy_sessions_emit_in_their_transactions(platform: Platform, fresh_db: str) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
    from sqlalchemy.orm import Session

    await ok(platform, "save_event_type", **TICKET)
    sid = await _session(platform)
    url = fresh_db.replace("postgresql://", "postgresql+psycopg://", 1)
    sync_engine = sqlalchemy.create_engine(url)
    try:
        with Session(sync_engine) as session, session.begin():
            sync_id = emit_sa(session, sid, "ticket.escalated", {"priority": 2})
        with pytest.raises(RuntimeError), Session(sync_engine) as session, session.begin():
            emit_sa(session, sid, "ticket.escalated", {"priority": 9})
            raise RuntimeError("rolled back")
    finally:
        sync_engine.dispose()
    async_engine = create_async_engine(fresh_db.replace("postgresql://", "postgresql+asyncpg://", 1))
    try:
        async with AsyncSession(async_engine) as session, session.begin():
            async_id = await emit_sa_async(session, sid, "ticket.escalated", {"priority": 3})
            [bulk] = await emit_events_sa_async(session, sid, [{"type": "ticket.escalated", "data": {"priority": 4}}])
            # `emit` itself, as the README says it: over an async session as over an asyncpg connection.
            plain = await emit(session, sid, "ticket.escalated", {"priority": 5})
    finally:
        await async_engine.dispose()
    events = await all_events(platform, sid)
    assert [(e["id"], e["data"]["priority"]) for e in events] == [
        (sync_id, 2), (async_id, 3), (bulk, 4), (plain, 5)
    ]  # fmt: skip


async def test_a_key_is_taken_by_the_commands_name_too_and_a_field_of_no_event_is_refused(
    platform: Platform, app: asyncpg.Connection
) -> None:
    """`idempotency_key`, as the commands name it, is the key (a second emit with it writes nothing); a misspelt
    field is refused naming it, by the Python helper and by the SQL function alike, never ignored."""
    await ok(platform, "save_event_type", **TICKET)
    sid = await _session(platform)
    keyed = [{"type": "ticket.escalated", "data": {"priority": 1}, "idempotency_key": "esc-42"}]
    first = await emit_events(app, sid, keyed)
    assert await emit_events(app, sid, keyed) == first
    raw = await app.fetchval(
        "SELECT array_agg(event_id) FROM orchestrator.emit_events($1, $2::jsonb)", sid, json.dumps(keyed)
    )
    assert list(raw) == first, "the SQL function takes it as the key too"
    misspelt = [{"type": "ticket.escalated", "data": {"priority": 2}, "idempotency_kye": "esc-43"}]
    with pytest.raises(CommandError, match=r"events\.0\.idempotency_kye: not a field of an event"):
        await emit_events(app, sid, misspelt)
    with pytest.raises(asyncpg.InvalidParameterValueError, match=r"events\.0\.idempotency_kye: not a field"):
        await app.fetch("SELECT * FROM orchestrator.emit_events($1, $2::jsonb)", sid, json.dumps(misspelt))
    both = [{"type": "ticket.escalated", "data": {}, "key": "a", "idempotency_key": "b"}]
    with pytest.raises(asyncpg.InvalidParameterValueError, match=r"events\.0\.idempotency_key: give the key once"):
        await app.fetch("SELECT * FROM orchestrator.emit_events($1, $2::jsonb)", sid, json.dumps(both))
    assert [e["id"] for e in await all_events(platform, sid)] == first


async def test_a_captured_table_writes_an_event_for_each_change_in_its_commit(
    platform: Platform, app: asyncpg.Connection
) -> None:
    sid = await _session(platform)
    capture = (
        await ok(
            platform,
            "capture_table",
            table="tickets",
            type_prefix="ticket",
            session_column="session",
            exclude=["secret"],
        )
    )["capture"]
    assert capture["table"] == "public.tickets" and capture["id_column"] == "id", capture
    assert capture["types"] == ["ticket.created", "ticket.updated", "ticket.deleted"]
    await ok(platform, "get_event_type", name="ticket.updated")

    await app.execute("INSERT INTO tickets VALUES (7, $1, 'printer on fire', 2, 'x')", sid)
    await app.execute("UPDATE tickets SET priority = 1, title = NULL WHERE id = 7")
    await app.execute("UPDATE tickets SET secret = 'y' WHERE id = 7")  # only a column left out: no event
    with pytest.raises(RuntimeError):
        async with app.transaction():
            await app.execute("UPDATE tickets SET priority = 5 WHERE id = 7")
            raise RuntimeError("rolled back")
    await app.execute("DELETE FROM tickets WHERE id = 7")

    events = [(e["type"], e["data"]) for e in await all_events(platform, sid)]
    doc = {"id": 7, "session": sid, "title": "printer on fire", "priority": 2}
    assert events == [
        ("ticket.created", {"_id": 7, "doc": doc}),
        (
            "ticket.updated",
            {"_id": 7, "doc": {**doc, "priority": 1, "title": None}, "changed": ["priority"], "removed": ["title"]},
        ),
        ("ticket.deleted", {"_id": 7, "doc": {**doc, "priority": 1, "title": None}}),
    ]
    assert (await ok(platform, "list_captures"))["captures"] == [capture]

    # A row with no session fails its change: its event could go nowhere.
    with pytest.raises(
        asyncpg.NotNullViolationError, match=r"public\.tickets\.session: a captured row needs a session"
    ):
        await app.execute("INSERT INTO tickets (id) VALUES (8)")

    gone = (await ok(platform, "uncapture_table", table="public.tickets"))["capture"]
    assert gone["table"] == "public.tickets"
    await app.execute("INSERT INTO tickets VALUES (9, $1, 'quiet', 3, 'x')", sid)
    assert len(await all_events(platform, sid)) == 3, "no trigger after the capture ends"
    await ok(platform, "get_event_type", name="ticket.created")  # its types stay
    await refused(platform, "not_found", "table", "uncapture_table", table="tickets")


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"table": "nowhere"}, "table: no table 'public.nowhere'"),
        ({"table": "tickets; DROP TABLE tickets"}, "table"),
        ({"table": 'tickets" --'}, "table"),
        ({"table": "orchestrator.events"}, "table: 'orchestrator.events' is one of the platform's own"),
        ({"table": "pg_catalog.pg_class"}, "table: 'pg_catalog.pg_class' is one of PostgreSQL's own catalogs"),
        ({"table": "information_schema.sql_features"}, "table: 'information_schema.sql_features' is one of"),
        ({"session_column": "priority"}, "session_column: 'priority' is of type integer, and a session's id is text"),
        ({"session_column": "nope"}, "session_column: 'public.tickets' has no column 'nope'"),
        ({"exclude": ["id"]}, "exclude: 'id' is the primary key"),
        ({"exclude": ["x'); DROP TABLE tickets; --"]}, "exclude"),
        ({"exclude": ["title", "priority", "title"]}, "exclude.2: 'title' is given twice (first as exclude.0)"),
        ({"type_prefix": "object"}, "type_prefix"),
        ({"session_id": "ses_1"}, "session_column or session_id"),
    ],
)
async def test_a_capture_that_cannot_be_is_refused_and_changes_nothing(
    platform: Platform, app: asyncpg.Connection, args: dict[str, Any], field: str
) -> None:
    body = {"table": "tickets", "type_prefix": "ticket", "session_column": "session", **args}
    await refused(platform, "invalid_request", field, "capture_table", **body)
    assert (await ok(platform, "list_captures"))["captures"] == []
    assert await app.fetchval("SELECT count(*) FROM tickets") == 0, "the table is still there, untouched"
    triggers = await app.fetchval("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'tickets'::regclass")
    assert triggers == 0


async def test_a_session_column_of_any_string_type_is_captured(platform: Platform, app: asyncpg.Connection) -> None:
    """Text, varchar or a domain over a domain over text: each holds a session's id (only other types are
    refused)."""
    sid = await _session(platform)
    await app.execute("CREATE DOMAIN sid_text AS text; CREATE DOMAIN sid_named AS sid_text")
    await app.execute("CREATE TABLE notes (id bigint PRIMARY KEY, session sid_named, label varchar(20))")
    await ok(platform, "capture_table", table="notes", type_prefix="note", session_column="session")
    await app.execute("INSERT INTO notes VALUES (1, $1, 'x')", sid)
    assert [e["type"] for e in await all_events(platform, sid)] == ["note.created"]


async def test_32_writers_committing_and_rolling_back_leave_each_committed_change_once(
    platform: Platform, fresh_db: str, app: asyncpg.Connection
) -> None:
    """32 concurrent transactions emitting beside their rows, and 32 writing a captured table, some rolled
    back: every committed change is an event exactly once, in its session, and no rolled-back one is."""
    await ok(platform, "save_event_type", name="order.placed", schema={"type": "object"})
    await app.execute("CREATE TABLE orders (id bigint PRIMARY KEY, session text NOT NULL)")
    sessions = [await _session(platform) for _ in range(4)]
    await ok(platform, "capture_table", table="tickets", type_prefix="ticket", session_column="session")
    pool = await asyncpg.create_pool(fresh_db, min_size=8, max_size=64)
    committed: dict[str, set[int]] = {"order": set(), "ticket": set()}
    seen_ids = iter(range(1, 1_000_000))

    async def writer(kind: str, seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(15):
            row, sid = next(seen_ids), rng.choice(sessions)
            try:
                async with pool.acquire() as conn, conn.transaction():
                    if kind == "order":
                        await conn.execute("INSERT INTO orders VALUES ($1, $2)", row, sid)
                        await emit(conn, sid, "order.placed", {"order": row})
                    else:
                        await conn.execute("INSERT INTO tickets (id, session) VALUES ($1, $2)", row, sid)
                    if rng.random() < 0.3:
                        raise LookupError("rolled back")
                committed[kind].add(row)
            except LookupError:
                pass

    try:
        await asyncio.gather(*(writer(kind, n) for kind in ("order", "ticket") for n in range(32)))
    finally:
        await pool.close()
    found: dict[str, list[int]] = {"order": [], "ticket": []}
    for sid in sessions:
        for event in await all_events(platform, sid):
            row = event["data"]["order"] if event["type"] == "order.placed" else event["data"]["_id"]
            found["order" if event["type"] == "order.placed" else "ticket"].append(row)
            table = "orders" if event["type"] == "order.placed" else "tickets"
            assert await app.fetchval(f"SELECT session FROM {table} WHERE id = $1", row) == sid
    for kind in ("order", "ticket"):
        assert sorted(found[kind]) == sorted(committed[kind]), kind
    assert len(committed["order"]) > 200 and len(committed["ticket"]) > 200


async def test_deleting_the_session_a_table_is_captured_into_ends_the_capture(
    platform: Platform, app: asyncpg.Connection
) -> None:
    sid = await _session(platform)
    await ok(platform, "capture_table", table="tickets", type_prefix="ticket", session_id=sid)
    await app.execute("INSERT INTO tickets (id) VALUES (1)")
    await ok(platform, "delete_session", session_id=sid)
    assert (await ok(platform, "list_captures"))["captures"] == []
    await app.execute("INSERT INTO tickets (id) VALUES (2)")  # the application's writes go on


async def test_an_emit_keeps_nulls_works_over_a_jsonb_codec_and_past_a_temporary_table_named_events(
    platform: Platform, app: asyncpg.Connection
) -> None:
    await ok(platform, "save_event_type", name="ticket.cleared", schema={"type": "object"})
    sid = await _session(platform)
    # What an application's own connection may hold: a jsonb codec of its own, a temporary table named like the
    # platform's.
    await app.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
    await app.execute("CREATE TEMPORARY TABLE events (id int)")
    await emit(app, sid, "ticket.cleared", {"assignee": None, "nested": {"a": None, "b": 1}})
    await app.fetchval("SELECT orchestrator.emit($1, 'ticket.cleared', '{\"x\": null}')", sid)
    assert [e["data"] for e in await all_events(platform, sid)] == [
        {"assignee": None, "nested": {"a": None, "b": 1}},
        {"x": None},
    ]


async def test_a_captured_statement_of_many_rows_and_a_changed_key_are_each_every_row_once(
    platform: Platform, app: asyncpg.Connection
) -> None:
    sid = await _session(platform)
    await ok(platform, "capture_table", table="tickets", type_prefix="ticket", session_id=sid)
    await app.execute("INSERT INTO tickets (id, title) SELECT n, 't' FROM generate_series(1, 12000) n")
    assert await platform.store.settle_captured(sid) == 12_000, "staged, then appended by the next reader"
    events = await app.fetchval("SELECT count(*) FROM orchestrator.events WHERE type = 'ticket.created'")
    assert events == 12_000, "more rows than one emit_events call takes, every one an event"
    await app.execute("UPDATE tickets SET id = id + 100000 WHERE id = 1")
    assert await platform.store.settle_captured(sid) == 2, "the changed key: a .created and a .deleted"
    changed = await app.fetch(
        "SELECT type, data -> '_id' AS row_id FROM orchestrator.events"
        " WHERE id > (SELECT max(id) - 2 FROM orchestrator.events) ORDER BY id"
    )
    assert [(r["type"], json.loads(r["row_id"])) for r in changed] == [
        ("ticket.created", 100001),
        ("ticket.deleted", 1),
    ]


async def test_a_row_moved_to_another_session_is_deleted_where_it_was_and_created_where_it_went(
    platform: Platform, app: asyncpg.Connection
) -> None:
    """A listener of the session a row left would otherwise never learn it left: the move is the old session's
    `.deleted` (the row as it was) and the new one's `.created`, as a changed key is."""
    left, went = await _session(platform), await _session(platform)
    await ok(platform, "capture_table", table="tickets", type_prefix="ticket", session_column="session")
    await app.execute("INSERT INTO tickets (id, session, title) VALUES (1, $1, 'a'), (2, $1, 'b')", left)
    await app.execute("UPDATE tickets SET session = $1, title = 'moved' WHERE id = 1", went)
    await app.execute("UPDATE tickets SET title = 'stays' WHERE id = 2")

    def seen(events: list[dict[str, Any]]) -> list[tuple[str, Any, Any]]:
        return [(e["type"], e["data"]["_id"], e["data"]["doc"]["title"]) for e in events]

    assert seen(await all_events(platform, left)) == [
        ("ticket.created", 1, "a"),
        ("ticket.created", 2, "b"),
        ("ticket.deleted", 1, "a"),
        ("ticket.updated", 2, "stays"),
    ]
    assert seen(await all_events(platform, went)) == [("ticket.created", 1, "moved")]


async def test_what_could_write_past_a_capture_is_refused_and_truncate_is_refused(
    platform: Platform, app: asyncpg.Connection
) -> None:
    sid = await _session(platform)
    await app.execute("CREATE TABLE parted (id int PRIMARY KEY, session text) PARTITION BY RANGE (id)")
    await app.execute("CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (100)")
    await app.execute("CREATE TABLE base (id int PRIMARY KEY, session text)")
    await app.execute("CREATE TABLE child (extra int) INHERITS (base)")
    await app.execute("ALTER TABLE child ADD PRIMARY KEY (id)")
    # A deferrable key lets one statement swap two rows' keys: its row events would read as rows deleted and made.
    await app.execute("CREATE TABLE swapped (id int PRIMARY KEY DEFERRABLE, session text)")
    for table, why in (
        ("parted", "not a plain table"),
        ("parted_1", "inherits"),
        ("base", "inherits"),
        ("swapped", "has a deferrable primary key"),
    ):
        await refused(platform, "invalid_request", why, "capture_table", table=table, type_prefix="p", session_id=sid)
    await ok(platform, "capture_table", table="tickets", type_prefix="ticket", session_id=sid)
    with pytest.raises(asyncpg.ObjectNotInPrerequisiteStateError, match="a captured table is not truncated"):
        await app.execute("TRUNCATE tickets")


async def test_a_table_dropped_and_made_again_is_captured_again_and_its_capture_can_end(
    platform: Platform, app: asyncpg.Connection
) -> None:
    sid = await _session(platform)
    body = {"table": "tickets", "type_prefix": "ticket", "session_id": sid}
    await ok(platform, "capture_table", **body)
    await app.execute("DROP TABLE tickets")
    assert (await ok(platform, "list_captures"))["captures"] == [], "a dropped table's capture went with it"
    await app.execute("CREATE TABLE tickets (id bigint PRIMARY KEY, session text, title text)")
    await ok(platform, "capture_table", **body)
    await app.execute("INSERT INTO tickets (id) VALUES (1)")
    assert [e["type"] for e in await all_events(platform, sid)] == ["ticket.created"]
    await app.execute("DROP TABLE tickets")
    await ok(platform, "uncapture_table", table="tickets")  # by the name it had


async def test_a_captured_type_is_not_deleted_under_its_capture(platform: Platform, app: asyncpg.Connection) -> None:
    sid = await _session(platform)
    await ok(platform, "capture_table", table="tickets", type_prefix="ticket", session_id=sid)
    await refused(platform, "invalid_request", "uncapture_table it first", "delete_event_type", name="ticket.created")
    await app.execute("INSERT INTO tickets (id) VALUES (1)")


async def test_an_event_of_the_applications_own_transaction_names_it_as_its_cause_and_its_role_as_actor(
    platform: Platform, fresh_db: str
) -> None:
    await ok(platform, "save_event_type", **TICKET)
    sid = await _session(platform)
    conn = await asyncpg.connect(fresh_db, server_settings={"application_name": "helpdesk-web"})
    try:
        await conn.execute("CREATE TABLE tickets (id bigint PRIMARY KEY, session text, priority int)")
        await ok(platform, "capture_table", table="tickets", type_prefix="ticket", session_column="session")
        role = await conn.fetchval("SELECT current_user")
        async with conn.transaction():
            await conn.execute("INSERT INTO tickets VALUES (1, $1, 2)", sid)
            emitted = await emit(conn, sid, "ticket.escalated", {"priority": 2})
    finally:
        await conn.close()

    events = (await ok(platform, "list_session_events", session_id=sid))["events"]
    assert [e["type"] for e in events] == ["ticket.created", "ticket.escalated"]
    cause = {"transaction": {"role": role, "application": "helpdesk-web"}}
    for event in events:
        assert (event["cause"], event["actor"]) == (cause, {"role": role}), event
    explained = await ok(platform, "explain_event", session_id=sid, event_id=emitted)
    assert explained["caused_by"] == [cause], "the chain back ends at the application's transaction"
    # A listener may tell the application's parts apart by it.
    by_role = {"types": ["ticket.*"], "where": [{"path": "actor.role", "op": "eq", "value": role}]}
    simulated = await ok(
        platform,
        "simulate_listener",
        session_id=sid,
        listener={
            "name": "by-role",
            "filter": by_role,
            "action": {"type": "object", "alias": "out/x", "value": {"type": "x"}},
        },
    )
    assert [i for b in simulated["batches"] for i in b["event_ids"]] == [e["id"] for e in events], simulated


async def test_emit_over_what_it_cannot_use_says_what_to_call_instead() -> None:
    class Sync:  # a sync SQLAlchemy Session has `execute`, not `fetch`, and nothing of it is awaited
        def execute(self, *args: Any) -> None:
            raise AssertionError("not to be called")

    with pytest.raises(TypeError, match="emit_sa, emit_events_sa"):
        await emit(Sync(), "ses_1", "ticket.escalated", {"priority": 1})


async def test_a_path_no_captured_event_of_its_kind_has_is_refused_at_save(
    platform: Platform, app: asyncpg.Connection
) -> None:
    """SPEC 2: a path that can never resolve for the listener's types is refused at save. `changed` and `removed` are
    an update's alone, and a captured event's data holds nothing beside `_id`, `doc` and those; the row's own columns
    (under `doc`) are not held to the table as it is now, which may gain a column its events then carry."""
    await ok(platform, "capture_table", table="tickets", type_prefix="ticket", session_column="session")

    def listener(types: list[str], path: str) -> dict[str, Any]:
        where = [{"path": path, "op": "exists"}]
        return {
            "name": "watch",
            "filter": {"types": types, "where": where},
            "action": {"type": "workflow", "workflow": "w"},
        }

    for types, path in (
        (["ticket.created"], "data.changed"),
        (["ticket.deleted"], "data.removed"),
        (["ticket.updated"], "data.nope"),
    ):
        await refused(
            platform, "invalid_request", "listener.filter.where.0.path", "save_listener", listener=listener(types, path)
        )
    for types, path in (
        (["ticket.updated"], "data.changed"),
        (["ticket.created", "ticket.updated"], "data.removed"),
        (["ticket.created"], "data.doc.a_column_to_come"),
        (["ticket.deleted"], "data._id"),
    ):
        await ok(platform, "save_listener", listener=listener(types, path))

    # A capture made before each kind had its own schema (one for the three) is a capture's to take again.
    earlier = {
        "type": "object",
        "required": ["_id", "doc"],
        "properties": {
            "_id": {},
            "doc": {"type": "object"},
            "changed": {"type": "array", "items": {"type": "string"}},
            "removed": {"type": "array", "items": {"type": "string"}},
        },
    }
    earlier_capture = "UPDATE orchestrator.event_types SET schema = $1 WHERE name LIKE 'ticket.%'"
    await platform.store.pool.execute(earlier_capture, earlier)
    await ok(platform, "capture_table", table="tickets", type_prefix="ticket", session_column="session")
    created = await ok(platform, "get_event_type", name="ticket.created")
    assert "changed" not in created["event_type"]["schema"]["properties"], created
    # Its migration gives a capture made before, not captured again, the schemas a capture now declares.
    await platform.store.pool.execute(earlier_capture, earlier)
    await platform.store.pool.execute((MIGRATIONS / "0035_captured_kinds_closed.sql").read_text())
    for kind in ("created", "updated", "deleted"):
        declared = await ok(platform, "get_event_type", name=f"ticket.{kind}")
        assert declared["event_type"]["schema"] == captured_schema(kind), (kind, declared)
    await refused(
        platform,
        "invalid_request",
        "listener.filter.where.0.path",
        "save_listener",
        listener=listener(["ticket.created"], "data.changed"),
    )
