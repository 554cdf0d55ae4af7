"""Emit events inside the application's own transaction, over the connection it already holds.

The event commits or rolls back with the application's change, and the platform routes it only once committed
(docs/transactions.md). Each helper checks the events' data against their declared types' JSON schemas (read on
the same connection), then calls the platform's SQL function `<schema>.emit_events`, which checks that each type
is declared, the session open and each key seen once, and appends them under the session's lock.

    async with conn.transaction():
        await conn.execute("UPDATE tickets SET priority = 1 WHERE id = $1", ticket)
        await orchestrator.transactional.emit(conn, session_id, "ticket.escalated", {"priority": 1})

`emit`/`emit_events` take an asyncpg connection (or pool connection), or a SQLAlchemy `AsyncSession` or
`AsyncConnection`; `emit_sa`/`emit_events_sa` a SQLAlchemy `Session` or `Connection` (they are not awaited), and
`emit_sa_async`/`emit_events_sa_async` the async ones by name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from orchestrator.core.database_schema import DEFAULT_SCHEMA
from orchestrator.core.errors import CommandError
from orchestrator.core.event_types import data_check
from orchestrator.core.schema_names import in_schema

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession


class _Asyncpg(Protocol):
    async def fetch(self, query: str, *args: Any) -> list[Any]: ...


def _event(type_: str, data: Mapping[str, Any], key: str | None, client: str | None) -> dict[str, Any]:
    event: dict[str, Any] = {"type": type_, "data": data}
    if key is not None:
        event["key"] = key
    if client is not None:
        event["client"] = client
    return event


# An event as the SQL function takes it; its key also by the commands' name (`idempotency_key`).
EMITTED_FIELDS = ("type", "data", "key", "idempotency_key", "client")


def _checked(given: Sequence[Mapping[str, Any]], schemas: Mapping[str, Any]) -> str:
    """The events as the SQL function takes them (JSON text), once each one's data fits its type's schema;
    an undeclared type is left to the function, which names it."""
    events = _as_dicts(given)
    if not events:
        raise CommandError("invalid_request", "events: at least one is required")
    for index, event in enumerate(events):
        unknown = sorted(str(k) for k in event if k not in EMITTED_FIELDS)
        if unknown:
            raise CommandError(
                "invalid_request", f"events.{index}.{unknown[0]}: not a field of an event {EMITTED_FIELDS}"
            )
        schema = schemas.get(str(event.get("type")))
        if schema is None:
            continue
        schema = json.loads(schema) if isinstance(schema, str) else schema
        problems = data_check(schema)(event.get("data"), f"events.{index}.data")
        if problems:
            raise CommandError("invalid_request", "; ".join(problems))
    return json.dumps(events, separators=(",", ":"))


def _as_dicts(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each event and its data as plain dicts (what the schema check and JSON read), data that is no mapping refused
    as the SQL function refuses it, before anything reads it as one."""
    plain: list[dict[str, Any]] = []
    for index, event in enumerate(events):
        copy = dict(event)
        if "data" in copy:
            if not isinstance(copy["data"], Mapping):
                given = type(copy["data"]).__name__
                raise CommandError("invalid_request", f"events.{index}.data: an object is required ({given} given)")
            copy["data"] = dict(copy["data"])
        plain.append(copy)
    return plain


def _names(events: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps(sorted({str(e.get("type")) for e in events}))


_READ = (
    "SELECT name, schema::text AS schema FROM orchestrator.event_types"
    # JSON bound as text, whatever codec the application's connection has for jsonb.
    " WHERE name IN (SELECT jsonb_array_elements_text(CAST(CAST({names} AS text) AS jsonb)))"
)
_WRITE = "SELECT event_id FROM orchestrator.emit_events(CAST({session} AS text), CAST(CAST({events} AS text) AS jsonb))"


def _statements(schema: str) -> tuple[str, str]:
    """The two statements in the application's connection, naming the platform's schema (the application's
    search path is its own)."""
    return in_schema(_READ, schema), in_schema(_WRITE, schema)


def _sqlalchemy_async(conn: Any) -> bool:
    """Whether `conn` is a SQLAlchemy `AsyncSession` or `AsyncConnection` (looked up only when SQLAlchemy is
    loaded: an application that uses it has imported it)."""
    import sys

    if "sqlalchemy.ext.asyncio" not in sys.modules:
        return False
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

    return isinstance(conn, AsyncSession | AsyncConnection)


async def emit_events(
    conn: _Asyncpg | AsyncSession | AsyncConnection,
    session_id: str,
    events: Sequence[Mapping[str, Any]],
    *,
    schema: str = DEFAULT_SCHEMA,
) -> list[int]:
    """Append `events` (`{type, data, key?, client?}` each) to the session in the connection's transaction, all
    or none; answer their ids. Outside a transaction block each call is its own commit. `conn` is an asyncpg
    connection, or a SQLAlchemy `AsyncSession` or `AsyncConnection` (as `emit_events_sa_async`)."""
    if _sqlalchemy_async(conn):
        return await emit_events_sa_async(conn, session_id, events, schema=schema)
    if not hasattr(conn, "fetch"):
        raise TypeError(
            f"emit_events: {type(conn).__name__} is neither an asyncpg connection nor a SQLAlchemy AsyncSession or"
            " AsyncConnection (a sync SQLAlchemy Session or Connection: emit_sa, emit_events_sa)"
        )
    read, write = _statements(schema)
    rows = await conn.fetch(read.format(names="$1"), _names(events))
    body = _checked(events, {r["name"]: r["schema"] for r in rows})
    found = await conn.fetch(write.format(session="$1", events="$2"), session_id, body)
    return [int(r["event_id"]) for r in found]


async def emit(
    conn: _Asyncpg | AsyncSession | AsyncConnection,
    session_id: str,
    type_: str,
    data: Mapping[str, Any],
    *,
    idempotency_key: str | None = None,
    client: str | None = None,
    schema: str = DEFAULT_SCHEMA,
) -> int:
    """Append one event to the session in the connection's transaction (asyncpg's, or a SQLAlchemy async
    session's or connection's); answer its id."""
    [event_id] = await emit_events(conn, session_id, [_event(type_, data, idempotency_key, client)], schema=schema)
    return event_id


def _sa_args(events: Sequence[Mapping[str, Any]], schema: str) -> tuple[Any, Any, str]:
    from sqlalchemy import text  # the helpers for SQLAlchemy need it; the rest of the platform does not

    read, write = _statements(schema)
    return text(read.format(names=":names")), text(write.format(session=":session", events=":events")), _names(events)


def emit_events_sa(
    session: Any, session_id: str, events: Sequence[Mapping[str, Any]], *, schema: str = DEFAULT_SCHEMA
) -> list[int]:
    """`emit_events` over a SQLAlchemy `Session` or `Connection`, in its transaction."""
    read, write, names = _sa_args(events, schema)
    rows = session.execute(read, {"names": names}).mappings().all()
    body = _checked(events, {r["name"]: r["schema"] for r in rows})
    return [int(r[0]) for r in session.execute(write, {"session": session_id, "events": body}).all()]


def emit_sa(
    session: Any,
    session_id: str,
    type_: str,
    data: Mapping[str, Any],
    *,
    idempotency_key: str | None = None,
    client: str | None = None,
    schema: str = DEFAULT_SCHEMA,
) -> int:
    """`emit` over a SQLAlchemy `Session` or `Connection`, in its transaction."""
    [event_id] = emit_events_sa(session, session_id, [_event(type_, data, idempotency_key, client)], schema=schema)
    return event_id


async def emit_events_sa_async(
    session: Any, session_id: str, events: Sequence[Mapping[str, Any]], *, schema: str = DEFAULT_SCHEMA
) -> list[int]:
    """`emit_events` over a SQLAlchemy `AsyncSession` or `AsyncConnection`, in its transaction."""
    read, write, names = _sa_args(events, schema)
    rows = (await session.execute(read, {"names": names})).mappings().all()
    body = _checked(events, {r["name"]: r["schema"] for r in rows})
    return [int(r[0]) for r in (await session.execute(write, {"session": session_id, "events": body})).all()]


async def emit_sa_async(
    session: Any,
    session_id: str,
    type_: str,
    data: Mapping[str, Any],
    *,
    idempotency_key: str | None = None,
    client: str | None = None,
    schema: str = DEFAULT_SCHEMA,
) -> int:
    """`emit` over a SQLAlchemy `AsyncSession` or `AsyncConnection`, in its transaction."""
    events = [_event(type_, data, idempotency_key, client)]
    [event_id] = await emit_events_sa_async(session, session_id, events, schema=schema)
    return event_id
