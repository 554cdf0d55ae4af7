"""The PostgreSQL store (asyncpg): sessions, objects, threads, listeners and the event stream.

Owns every SQL statement of the command surface. Every change appends its event in the same transaction;
`_locked_session` takes the session row lock first, so ids within a session are drawn in commit order (see
0001_store.sql) and `list_events(after=...)` can never skip an event that commits late. Each event also keeps the
traceparent of the span current at its write (`orchestrator.telemetry`), outside its envelope. Engine-side records
(executions, outcomes, lanes, router positions) live in `engine_records.py` and the lane store.

Every statement of the store names the platform's schema (`orchestrator.sessions`); no connection sets a search
path. The store's connections are of one class (`connection_class`): asyncpg's own, less its reset, for the default
schema, or one that moves each statement to the configured schema (`core/schema_names.in_schema`).
"""

from __future__ import annotations

import functools
import json
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, Self

import asyncpg

from orchestrator.causes import current_cause
from orchestrator.core.database_schema import DEFAULT_SCHEMA, checked_schema
from orchestrator.core.errors import KEY_REUSED, CommandError
from orchestrator.core.events import Committed, Event, envelope_of, preview
from orchestrator.core.globs import compile_alias_glob, compile_type_glob
from orchestrator.core.schema_names import in_schema
from orchestrator.store import json_codec
from orchestrator.store.connection import Connection, quiet_pool_outages
from orchestrator.store.held_connections import note_lent
from orchestrator.store.listener_rules import compile_missing_rules, save_rule
from orchestrator.store.migrate import migrate
from orchestrator.telemetry import current_traceparent

EVENT_COLUMNS = "id, session_id, type, alias, item, execution, source, depth, data, cause, graph, created_at"


async def _init_connection(conn: Connection) -> None:
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json_codec.loads, schema="pg_catalog")
    await conn.set_type_codec("json", encoder=json.dumps, decoder=json_codec.loads, schema="pg_catalog")


class _PooledConnection(asyncpg.Connection):
    """A connection of the store's (pooled, or the one that migrates) that skips the reset round trip on release.

    The store keeps no session state on its connections (advisory locks are transaction-scoped, LISTEN runs on
    connections of its own, and no statement depends on a search path: each names the platform's schema), so
    asyncpg's `RESET ALL; UNLISTEN *; ...` would only cost a round trip per command: half the latency of a write.
    """

    def get_reset_query(self) -> str:
        return ""


def connection_class(schema: str) -> type[_PooledConnection]:
    """The class of the store's connections for `schema`: for the default schema `_PooledConnection` itself (no
    work per statement), for another one made once, which hands every statement to `in_schema` on its way out."""
    return _PooledConnection if schema == DEFAULT_SCHEMA else _in_schema_class(checked_schema(schema))


@functools.cache
def _in_schema_class(schema: str) -> type[_PooledConnection]:
    class InSchema(_PooledConnection):
        # Every statement with arguments, and every prepared one, goes through `_get_statement`; one without
        # arguments through `execute`'s simple query. The store uses nothing else (no COPY).
        async def execute(self, query: str, *args: Any, timeout: float | None = None) -> str:  # noqa: ASYNC109
            return await super().execute(in_schema(query, schema), *args, timeout=timeout)

        async def _get_statement(self, query: str, timeout: float | None, **kwargs: Any) -> Any:  # noqa: ASYNC109
            return await super()._get_statement(in_schema(query, schema), timeout, **kwargs)  # type: ignore[misc]

    InSchema.__name__ = InSchema.__qualname__ = f"InSchema_{schema}"
    return InSchema


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(10)}"


# What the engine reads with each event beside its envelope: a thread item's whole message, which a
# listener's paths and templates see as `item.message` (the stream's envelope keeps a preview).
WHOLE_MESSAGE = (
    "(SELECT coalesce(to_jsonb(t.message), t.message_json) FROM orchestrator.thread_items t WHERE t.session_id ="
    " e.session_id"
    " AND t.alias = e.alias AND t.id = e.item->>'id' AND e.type = 'thread.item_posted') AS whole_message"
)


def event_from_row(row: asyncpg.Record) -> Event:
    item = row["item"]
    whole = row.get("whole_message")
    if item is not None and whole is not None:
        item = {**item, "message": whole}
    return Event.model_validate(
        {
            "id": row["id"],
            "session_id": row["session_id"],
            "type": row["type"],
            "alias": row["alias"],
            "item": item,
            "execution": row["execution"],
            "source": row["source"] or {},
            "depth": row["depth"],
            "data": row["data"],
            "cause": row["cause"],
            "graph": row["graph"],
            "created_at": row["created_at"],
        }
    )


def thread_item_row(item: dict[str, Any]) -> dict[str, Any]:
    """An item as `orchestrator_post_thread_items` takes it: its id (one made when it has none), its message as
    text or as JSON (a `json` item's may be any JSON value), and the event's preview of it."""
    message = item.get("message")
    text = message if isinstance(message, str) or message is None else None
    return {
        "id": item.get("id") or new_id("itm"),
        "type": item["type"],
        "role": item.get("role"),
        "message": text,
        "message_json": None if text is not None or message is None else message,
        "preview": preview(message),
        "metadata": item.get("metadata"),
    }


def _clean_source(source: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (source or {}).items() if v is not None}


class PostgresStore:
    """The store on one asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool, *, lent_noted: bool = False) -> None:
        self.pool = pool
        # Whether the pool notes each connection it lends (`held_connections`), as the HTTP door's deadlines need.
        self.lent_noted = lent_noted

    @classmethod
    async def open(
        cls,
        database_url: str,
        *,
        pool_size: int = 10,
        direct_url: str | None = None,
        statement_cache_size: int = 100,
        schema: str = DEFAULT_SCHEMA,
        lent_noted: bool = False,
    ) -> Self:
        """Migrate (on `direct_url` when given) and open the pool on `database_url`, which may be a pooler in
        session or transaction mode (then `statement_cache_size` 0: asyncpg prepares unnamed statements only,
        which live within one transaction). Every statement names the platform's schema, `schema` (connections set
        no search path: docs/operations.md). With `lent_noted` the pool notes each connection it lends, for the
        work whose connections are held (`held_connections`: an HTTP door's commands); without it an acquire does
        nothing more than asyncpg's."""
        connection = connection_class(schema)
        conn = await asyncpg.connect(direct_url or database_url, connection_class=connection)
        try:
            await migrate(conn, schema)
            await _init_connection(conn)
            await compile_missing_rules(conn)
        finally:
            await conn.close()
        quiet_pool_outages()
        pool = await asyncpg.create_pool(
            database_url,
            min_size=1,
            max_size=pool_size,
            init=_init_connection,
            # Each connection lent is noted for the work that borrows it, when that work may be cut loose from a
            # database that stops answering (`held_connections`: the HTTP door's commands). Only a pool a door uses:
            # the engine's acquires (router, drivers, activities) are never cut, and take no hook.
            setup=note_lent if lent_noted else None,
            connection_class=connection,
            statement_cache_size=statement_cache_size,
        )
        return cls(pool, lent_noted=lent_noted)

    async def close(self) -> None:
        await self.pool.close()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Connection]:
        async with self.pool.acquire() as conn, conn.transaction():
            yield conn

    # -- sessions ------------------------------------------------------------------------------------

    async def open_session(self, alias: str | None) -> dict[str, Any]:
        async with self.transaction() as conn:
            if alias is not None:
                row = await conn.fetchrow(
                    "SELECT id, alias, status, drain_through FROM orchestrator.sessions WHERE alias = $1", alias
                )
                if row is not None:
                    found = {k: row[k] for k in ("id", "alias", "status")}
                    if row["status"] == "open" and row["drain_through"] is not None:
                        # Closing once its pending work ends (`close_session` with `drain`), as that reply said.
                        found |= {"draining": True, "drains_through": row["drain_through"]}
                    return found
            row = await conn.fetchrow(
                "INSERT INTO orchestrator.sessions (id, alias) VALUES ($1, $2)"
                " ON CONFLICT (alias) DO UPDATE SET alias = EXCLUDED.alias"
                " RETURNING id, alias, status",
                new_id("ses"),
                alias,
            )
            assert row is not None
            await conn.execute(
                "INSERT INTO orchestrator.routing_cursors (session_id) VALUES ($1) ON CONFLICT DO NOTHING", row["id"]
            )
            return dict(row)

    async def get_session(self, session_id: str) -> dict[str, Any]:
        row = await self.pool.fetchrow(
            "SELECT id, alias, status FROM orchestrator.sessions WHERE id = $1 AND status <> 'deleting'", session_id
        )
        if row is None:
            raise CommandError("not_found", f"session_id: no session {session_id!r}")
        return dict(row)

    async def set_session_status(self, session_id: str, status: str) -> dict[str, Any]:
        row = await self.pool.fetchrow(
            "UPDATE orchestrator.sessions SET status = $2, drain_through = NULL,"
            " closed_at = CASE WHEN $2 = 'closed' THEN clock_timestamp() END"
            " WHERE id = $1 AND status <> 'deleting' RETURNING id, alias, status",
            session_id,
            status,
        )
        if row is None:
            raise CommandError("not_found", f"session_id: no session {session_id!r}")
        return dict(row)

    async def list_sessions(
        self, status: str | None, limit: int, aliases: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        """The newest sessions first; with `aliases` (session alias globs), only those under one of them (a
        session with no alias only under `**`)."""
        patterns = None
        if aliases is not None and "**" not in aliases:
            # The core's compiled globs are plain enough for PostgreSQL's regular expressions (see list_events).
            patterns = [compile_alias_glob(a).pattern for a in aliases]
        rows = await self.pool.fetch(
            f"SELECT {_SESSION_SUMMARY} FROM orchestrator.sessions WHERE status <> 'deleting'"
            " AND ($1::text IS NULL OR status = $1) AND ($3::text[] IS NULL OR alias ~ ANY($3))"
            " ORDER BY created_at DESC, id LIMIT $2",
            status,
            limit,
            patterns,
        )
        return [_session_summary(r) for r in rows]

    async def describe_session(self, session_id: str) -> dict[str, Any]:
        """One session as `list_sessions` tells each: where its stream stands, when it closed."""
        row = await self.pool.fetchrow(
            f"SELECT {_SESSION_SUMMARY} FROM orchestrator.sessions WHERE id = $1 AND status <> 'deleting'", session_id
        )
        if row is None:
            raise CommandError("not_found", f"session_id: no session {session_id!r}")
        return _session_summary(row)

    async def drain_session(self, session_id: str) -> dict[str, Any]:
        """Ask an open session to close once what is pending now has fired and its runs have ended."""
        await self.settle_captured(session_id)  # changes committed before the ask are part of what is pending
        row = await self.pool.fetchrow(
            "UPDATE orchestrator.sessions SET drain_through = coalesce(drain_through, last_event_id)"
            " WHERE id = $1 AND status = 'open' RETURNING id, alias, status, drain_through",
            session_id,
        )
        if row is None:
            session = await self.get_session(session_id)  # not found, or closed already
            return {**session, "draining": False}
        await self.close_drained_sessions(session_id)
        return await self.session_view(session_id)

    async def session_view(self, session_id: str) -> dict[str, Any]:
        row = await self.pool.fetchrow(
            "SELECT id, alias, status, drain_through FROM orchestrator.sessions WHERE id = $1 AND status <> 'deleting'",
            session_id,
        )
        if row is None:
            raise CommandError("not_found", f"session_id: no session {session_id!r}")
        view = {"id": row["id"], "alias": row["alias"], "status": row["status"]}
        if row["status"] == "open" and row["drain_through"] is not None:
            view.update(draining=True, drains_through=int(row["drain_through"]))
        return view

    async def close_drained_sessions(self, session_id: str | None = None) -> list[str]:
        """Close the draining sessions (one, or all) whose pending has all fired and whose runs have ended
        (`orchestrator_close_drained`, which a run's end calls too)."""
        rows = await self.pool.fetch("SELECT orchestrator.orchestrator_close_drained($1) AS id", session_id)
        return [r["id"] for r in rows]

    # -- the stream ----------------------------------------------------------------------------------

    @staticmethod
    async def _locked_session(conn: Connection, session_id: str, *, require_open: bool) -> None:
        """Lock the session's row until commit: this is what keeps its event ids in commit order (captured
        changes staged before are appended first, `orchestrator_lock_session`)."""
        lock = await conn.fetchval("SELECT orchestrator.orchestrator_lock_session($1)", session_id)
        if lock == "not_found":
            raise CommandError("not_found", f"session_id: no session {session_id!r}")
        if require_open and lock != "ok":
            status = await conn.fetchval("SELECT status FROM orchestrator.sessions WHERE id = $1", session_id)
            raise CommandError("session_not_open", f"session_id: session {session_id!r} is {status}")

    @staticmethod
    async def _replayed(conn: Connection, session_id: str, key: str | None) -> Event | None:
        if key is None:
            return None
        row = await conn.fetchrow(
            f"SELECT {EVENT_COLUMNS} FROM orchestrator.events WHERE session_id = $1 AND idempotency_key = $2",
            session_id,
            key,
        )
        return None if row is None else event_from_row(row)

    @staticmethod
    async def _append(
        conn: Connection,
        session_id: str,
        type_: str,
        *,
        alias: str | None = None,
        item: dict[str, Any] | None = None,
        execution: dict[str, Any] | None = None,
        source: dict[str, Any] | None = None,
        depth: int = 0,
        data: dict[str, Any] | None = None,
        graph: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        cause: dict[str, Any] | None = None,
    ) -> Event:
        """Append one event; the caller holds the session lock (`_locked_session`). Its cause is the one given,
        else the one the caller acts under (`causes.current_cause`)."""
        row = await conn.fetchrow(
            "WITH e AS ("
            f" INSERT INTO orchestrator.events ({EVENT_COLUMNS.replace(', created_at', '')}, idempotency_key,"
            " traceparent)"
            " VALUES (nextval('orchestrator.event_ids'::regclass), $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
            f" RETURNING {EVENT_COLUMNS}),"
            " s AS (UPDATE orchestrator.sessions SET last_event_id = (SELECT id FROM e) WHERE id = $1)"
            " SELECT * FROM e",
            session_id,
            type_,
            alias,
            item,
            execution,
            _clean_source(source),
            depth,
            data,
            cause if cause is not None else current_cause(),
            graph,
            idempotency_key,
            current_traceparent(),
        )
        assert row is not None
        return event_from_row(row)

    async def append_event(
        self,
        session_id: str,
        type_: str,
        *,
        require_open: bool = False,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> Event:
        """Append an event that no object or thread change carries (execution.*, listener.failed, ...)."""
        async with self.transaction() as conn:
            await self._locked_session(conn, session_id, require_open=require_open)
            replayed = await self._replayed(conn, session_id, idempotency_key)
            if replayed is not None:
                return replayed
            return await self._append(conn, session_id, type_, idempotency_key=idempotency_key, **fields)

    async def settle_captured(self, session_id: str) -> int | None:
        """Append the session's captured events that committed and wait staged (0033_captured_staged.sql), so
        that a reader sees the changes committed before it asked. Waits a moment for the session's lock; None
        when it was not had (a writer in a long transaction holds it, and appends them at its own lock)."""
        try:
            found = await self.pool.fetchval("SELECT orchestrator.orchestrator_captured_settle_now($1)", session_id)
        except asyncpg.LockNotAvailableError:
            return None
        return int(found)

    async def list_events(
        self,
        session_id: str,
        *,
        after: int | None = None,
        before: int | None = None,
        limit: int = 100,
        types: Sequence[str] | None = None,
    ) -> list[Event]:
        await self.get_session(session_id)
        await self.settle_captured(session_id)
        # The core's compiled globs are plain enough for PostgreSQL's regular expressions (\A, \Z, (?:), [^.]),
        # so the stream is filtered with exactly the globs listeners use.
        patterns = [compile_type_glob(t).pattern for t in types] if types else None
        rows = await self.pool.fetch(
            f"SELECT {EVENT_COLUMNS} FROM orchestrator.events WHERE session_id = $1"
            " AND id > $2 AND ($3::bigint IS NULL OR id < $3)"
            " AND ($4::text[] IS NULL OR type ~ ANY($4))"
            " ORDER BY id LIMIT $5",
            session_id,
            after or 0,
            before,
            patterns,
            limit,
        )
        return [event_from_row(r) for r in rows]

    async def routed_events(
        self, session_id: str, *, after: int = 0, before: int | None = None, limit: int = 1000
    ) -> list[Committed]:
        """A page of the session's stream as the router reads it (a thread item's whole message in its
        envelope), with each event's commit."""
        await self.get_session(session_id)
        await self.settle_captured(session_id)
        rows = await self.pool.fetch(
            f"SELECT {EVENT_COLUMNS}, {WHOLE_MESSAGE}, e.xmin::text AS tx FROM orchestrator.events e"
            " WHERE e.session_id = $1 AND e.id > $2 AND ($3::bigint IS NULL OR e.id < $3) ORDER BY e.id LIMIT $4",
            session_id,
            after,
            before,
            limit,
        )
        return [Committed(envelope_of(dict(r)), r["created_at"], r["tx"]) for r in rows]

    # -- objects -------------------------------------------------------------------------------------

    async def write_object(
        self,
        session_id: str,
        alias: str,
        value: dict[str, Any],
        *,
        if_rev: int | None = None,
        source: dict[str, Any] | None = None,
        depth: int = 0,
        idempotency_key: str | None = None,
    ) -> tuple[dict[str, Any], int]:
        """Replace the value at `alias`, raising rev by one; `if_rev` 0 means "only if absent"."""
        row = await self.pool.fetchrow(
            "SELECT o_outcome, o_rev, o_event FROM orchestrator.orchestrator_write_object($1, $2, $3, $4, $5, $6, $7,"
            " $8, $9)",
            session_id,
            alias,
            value,
            if_rev,
            _clean_source(source),
            depth,
            idempotency_key,
            current_traceparent(),
            current_cause(),
        )
        assert row is not None
        outcome, rev = row["o_outcome"], row["o_rev"]
        if outcome == "rev_conflict":
            raise CommandError("rev_conflict", f"if_rev: {alias!r} is at rev {rev}, not {if_rev}")
        _refuse_write(outcome, session_id)
        return {"alias": alias, "rev": rev}, int(row["o_event"])

    async def read_object(self, session_id: str, alias: str) -> dict[str, Any]:
        await self.get_session(session_id)
        row = await self.pool.fetchrow(
            "SELECT alias, value, rev, updated_at FROM orchestrator.objects WHERE session_id = $1 AND alias = $2",
            session_id,
            alias,
        )
        if row is None:
            raise CommandError("not_found", f"alias: no object at {alias!r}")
        return _object_json(row)

    async def delete_object(
        self,
        session_id: str,
        alias: str,
        *,
        source: dict[str, Any] | None = None,
        depth: int = 0,
        idempotency_key: str | None = None,
    ) -> tuple[dict[str, Any], int]:
        async with self.transaction() as conn:
            await self._locked_session(conn, session_id, require_open=True)
            replayed = await self._replayed(conn, session_id, idempotency_key)
            if replayed is not None:
                if (replayed.type, replayed.alias) != ("object.deleted", alias):
                    raise CommandError("invalid_request", KEY_REUSED)
                return {"alias": alias, "rev": (replayed.data or {}).get("rev")}, replayed.id
            rev = await conn.fetchval(
                "DELETE FROM orchestrator.objects WHERE session_id = $1 AND alias = $2 RETURNING rev", session_id, alias
            )
            if rev is None:
                raise CommandError("not_found", f"alias: no object at {alias!r}")
            event = await self._append(
                conn,
                session_id,
                "object.deleted",
                alias=alias,
                source=source,
                depth=depth,
                data={"rev": rev},
                idempotency_key=idempotency_key,
            )
            return {"alias": alias, "rev": rev, "deleted": True}, event.id

    async def list_objects(self, session_id: str, prefix: str | None) -> list[dict[str, Any]]:
        await self.get_session(session_id)
        rows = await self.pool.fetch(
            "SELECT alias, value, rev, updated_at FROM orchestrator.objects WHERE session_id = $1"
            " AND ($2::text IS NULL OR alias LIKE $2 || '%') ORDER BY alias",
            session_id,
            None if prefix is None else prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_"),
        )
        return [_object_json(r) for r in rows]

    # -- threads -------------------------------------------------------------------------------------

    async def post_thread_item(
        self,
        session_id: str,
        alias: str,
        item: dict[str, Any],
        *,
        source: dict[str, Any] | None = None,
        depth: int = 0,
        idempotency_key: str | None = None,
    ) -> tuple[dict[str, Any], int]:
        """Append an item; an item id that is already there answers the first post (items never change).

        A message that is not a string (a `json` item's may be any JSON value) is kept as JSON.
        """
        message = item.get("message")
        text = message if isinstance(message, str) or message is None else None
        row = await self.pool.fetchrow(
            "SELECT o_outcome, o_item, o_event FROM orchestrator.orchestrator_post_thread_item("
            "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
            session_id,
            alias,
            item.get("id") or new_id("itm"),
            item["type"],
            item.get("role"),
            text,
            None if text is not None or message is None else message,
            preview(message),
            item.get("metadata"),
            _clean_source(source),
            depth,
            idempotency_key,
            current_traceparent(),
            current_cause(),
        )
        assert row is not None
        _refuse_write(row["o_outcome"], session_id)
        return {"id": row["o_item"], "alias": alias}, int(row["o_event"])

    async def list_thread_items(
        self, session_id: str, alias: str, *, after: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        await self.get_session(session_id)
        after_seq = 0
        if after is not None:
            found = await self.pool.fetchval(
                "SELECT seq FROM orchestrator.thread_items WHERE session_id = $1 AND alias = $2 AND id = $3",
                session_id,
                alias,
                after,
            )
            if found is None:
                raise CommandError("not_found", f"after: no item {after!r} in thread {alias!r}")
            after_seq = found
        rows = await self.pool.fetch(
            "SELECT id, type, role, coalesce(to_jsonb(message), message_json) AS message, metadata, source, event_id,"
            " created_at FROM orchestrator.thread_items"
            " WHERE session_id = $1 AND alias = $2 AND seq > $3 ORDER BY seq LIMIT $4",
            session_id,
            alias,
            after_seq,
            limit,
        )
        return [_item_json(r) for r in rows]

    # -- listeners -----------------------------------------------------------------------------------

    async def save_listener(self, name: str, body: dict[str, Any], delay_seconds: float) -> dict[str, Any]:
        async with self.transaction() as conn:
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('listener:' || $1))", name)
            # Saving the body already in effect changes nothing: workers that save their app's listeners at
            # every start must not pile up versions (or restart activation delays).
            current = await conn.fetchrow(
                "SELECT v.version, v.effective_at, v.body FROM orchestrator.listeners l"
                " JOIN orchestrator.listener_versions v USING (name, version) WHERE l.name = $1 AND l.deleted_at IS"
                " NULL",
                name,
            )
            if current is not None and current["body"] == body:
                return {"name": name, "version": current["version"], "effective_at": _iso(current["effective_at"])}
            version = await conn.fetchval(
                "SELECT coalesce(max(version), 0) + 1 FROM orchestrator.listener_versions WHERE name = $1", name
            )
            row = await conn.fetchrow(
                "INSERT INTO orchestrator.listener_versions (name, version, body, effective_at)"
                " VALUES ($1, $2, $3, clock_timestamp() + make_interval(secs => $4))"
                " RETURNING name, version, effective_at",
                name,
                version,
                body,
                delay_seconds,
            )
            await conn.execute(
                "INSERT INTO orchestrator.listeners (name, version) VALUES ($1, $2)"
                " ON CONFLICT (name) DO UPDATE SET version = EXCLUDED.version, deleted_at = NULL",
                name,
                version,
            )
            assert row is not None
            await save_rule(conn, name, version, row["effective_at"], body)
            return _listener_json(row)

    async def get_listener(self, name: str) -> dict[str, Any]:
        row = await self.pool.fetchrow(
            "SELECT v.name, v.version, v.effective_at, v.saved_at, v.body FROM orchestrator.listeners l"
            " JOIN orchestrator.listener_versions v USING (name, version) WHERE l.name = $1 AND l.deleted_at IS NULL",
            name,
        )
        if row is None:
            raise CommandError("not_found", f"name: no listener {name!r}")
        return _listener_json(row)

    async def list_listeners(self) -> list[dict[str, Any]]:
        rows = await self.pool.fetch(
            "SELECT v.name, v.version, v.effective_at, v.saved_at, v.body FROM orchestrator.listeners l"
            " JOIN orchestrator.listener_versions v USING (name, version) WHERE l.deleted_at IS NULL ORDER BY l.name"
        )
        return [_listener_json(r) for r in rows]

    async def listener_versions(self) -> list[dict[str, Any]]:
        """Every version of every listener not deleted, oldest first, but those from before the listener's last
        deletion (their rules went with it, 0025): what routing matches against."""
        rows = await self.pool.fetch(
            "SELECT v.name, v.version, v.effective_at, v.saved_at, v.body FROM orchestrator.listeners l"
            " JOIN orchestrator.listener_versions v USING (name) WHERE l.deleted_at IS NULL"
            " AND EXISTS (SELECT 1 FROM orchestrator.listener_rules r WHERE r.name = v.name AND r.version = v.version)"
            " ORDER BY v.name, v.version"
        )
        return [_listener_json(r) for r in rows]

    async def delete_listener(self, name: str) -> dict[str, Any]:
        listener = await self.get_listener(name)
        await self.pool.execute(
            "UPDATE orchestrator.listeners SET deleted_at = clock_timestamp() WHERE name = $1 AND deleted_at IS NULL",
            name,
        )
        return listener

    async def switch_listener(self, session_id: str, name: str, enabled: bool) -> bool:
        await self.get_session(session_id)
        await self.get_listener(name)
        await self.pool.execute(
            "INSERT INTO orchestrator.listener_switches (session_id, name, enabled) VALUES ($1, $2, $3)"
            " ON CONFLICT (session_id, name) DO UPDATE"
            " SET enabled = EXCLUDED.enabled, changed_at = clock_timestamp()",
            session_id,
            name,
            enabled,
        )
        return enabled

    async def disabled_listeners(self, session_id: str) -> set[str]:
        rows = await self.pool.fetch(
            "SELECT name FROM orchestrator.listener_switches WHERE session_id = $1 AND NOT enabled", session_id
        )
        return {r["name"] for r in rows}


def _refuse_write(outcome: str, session_id: str) -> None:
    """Turn a write function's refusal into the command error it stands for."""
    if outcome == "key_reused":
        raise CommandError("invalid_request", KEY_REUSED)
    if outcome == "not_found":
        raise CommandError("not_found", f"session_id: no session {session_id!r}")
    if outcome == "session_not_open":
        raise CommandError("session_not_open", f"session_id: session {session_id!r} is closed")


def _iso(value: datetime) -> str:
    return value.isoformat()


def _object_json(row: asyncpg.Record) -> dict[str, Any]:
    return {
        "alias": row["alias"],
        "value": row["value"],
        "rev": row["rev"],
        "updated_at": _iso(row["updated_at"]),
    }


def _item_json(row: asyncpg.Record) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": row["id"],
        "type": row["type"],
        "role": row["role"],
        "message": row["message"],
    }
    if row["metadata"] is not None:
        item["metadata"] = row["metadata"]
    item["source"] = row["source"]
    item["event_id"] = row["event_id"]
    item["created_at"] = _iso(row["created_at"])
    return item


def _listener_json(row: asyncpg.Record) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": row["name"],
        "version": row["version"],
        "effective_at": _iso(row["effective_at"]),
    }
    if "body" in row.keys():  # noqa: SIM118 - asyncpg.Record has keys() but no __contains__ for names
        out["body"] = row["body"]
        out["saved_at"] = _iso(row["saved_at"])
    return out


# A session as the lists tell it (`list_sessions`, `get_session`).
_SESSION_SUMMARY = "id, alias, status, created_at, closed_at, last_event_id, drain_through IS NOT NULL AS draining"


def _session_summary(r: Any) -> dict[str, Any]:
    return {
        "id": r["id"],
        "alias": r["alias"],
        "status": r["status"],
        "created_at": _iso(r["created_at"]),
        "closed_at": _iso(r["closed_at"]) if r["closed_at"] else None,
        "last_event_id": r["last_event_id"],
        "draining": r["draining"] and r["status"] == "open",
    }
