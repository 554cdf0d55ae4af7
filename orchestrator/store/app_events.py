"""The application's own events and many writes in one request: event types, emits, bulk writes.

Owns the statements of `save_event_type` and its reads, `emit_event(s)` (one statement, the session's lock
held once for all), `write_objects` and `post_thread_items` (one statement each, all or none, their request's key
checked there under the session's lock). A bulk write the database refuses part of raises `orchestrator: <index>
<outcome> <rev>` from its SQL function, which is answered as the command error naming that item (or, for a bulk
write's key, the request's `idempotency_key`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import asyncpg

from orchestrator.causes import current_cause
from orchestrator.core.errors import KEY_REUSED, CommandError
from orchestrator.store import json_codec
from orchestrator.telemetry import current_traceparent

_REFUSALS = {
    "not_found": ("not_found", "session_id: no session {session!r}"),
    "session_not_open": ("session_not_open", "session_id: session {session!r} is not open"),
}


def _clean(source: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (source or {}).items() if v is not None}


def _refused(err: asyncpg.RaiseError, session_id: str, field: str | None, *, request_key: bool = False) -> CommandError:
    """The command error of a bulk write's first refused item (`orchestrator: <index> <outcome> <rev>`); `field`
    None for a command of one item, whose fields are its own (`emit_event`'s `idempotency_key`). `request_key`:
    the key is the request's, not its items' (`write_objects`, `post_thread_items`), and a refusal names it."""
    _, _, detail = str(err).partition("orchestrator: ")
    parts = detail.split()
    index = parts[0] if parts else "0"
    outcome = parts[1] if len(parts) > 1 else "internal_error"
    rev = parts[2] if len(parts) > 2 else "0"
    if outcome in _REFUSALS:
        code, message = _REFUSALS[outcome]
        return CommandError(code, message.format(session=session_id))  # type: ignore[arg-type]
    # The item's place (`events.2`) before its field's name; a command of one item names its own fields.
    place = f"{field}.{index}" if field is not None else None
    if outcome == "rev_conflict":
        return CommandError("rev_conflict", ".".join(filter(None, (place, f"if_rev: the stored rev is {rev}"))))
    if outcome == "key_reused":
        return CommandError("invalid_request", ".".join(filter(None, (None if request_key else place, KEY_REUSED))))
    return CommandError("internal_error", f"{place}: refused ({outcome})" if place else f"refused ({outcome})")


# The captured table (named as `list_captures` names it) whose capture declares the type $1: a capture of a table
# that exists (a dropped table's trigger went with it). Its kinds are `CAPTURED_KINDS` (store/captures.py).
_CAPTURE_OF_TYPE = (
    "SELECT quote_ident(n.nspname) || '.' || quote_ident(k.relname) FROM orchestrator.captures c"
    " JOIN pg_class k ON k.oid = c.table_oid JOIN pg_namespace n ON n.oid = k.relnamespace"
    " WHERE $1::text IN (c.type_prefix || '.created', c.type_prefix || '.updated', c.type_prefix || '.deleted')"
)


# What to do instead of declaring a captured type otherwise (`save_event_type`, an app's `event_types`).
CAPTURED_SCHEMA = "its schema is the capture's (it says what the captured events hold); declare a type of another name"


def captured_refusal(name: str, table: str, then: str) -> str:
    """Why a type a capture declares is not to be deleted or declared otherwise (`then`: what to do instead)."""
    return f"name: {name!r} is a type of the capture of {table}: {then}"


class AppEvents:
    """Mixed into the store, which provides `pool`."""

    pool: asyncpg.Pool

    async def save_event_type(
        self, name: str, schema: dict[str, Any], allow: list[str] | None, description: str | None
    ) -> dict[str, Any]:
        row = await self.pool.fetchrow(
            "INSERT INTO orchestrator.event_types (name, schema, allow, description) VALUES ($1, $2, $3, $4)"
            " ON CONFLICT (name) DO UPDATE SET schema = EXCLUDED.schema, allow = EXCLUDED.allow,"
            " description = EXCLUDED.description, saved_at = clock_timestamp()"
            " RETURNING name, schema, allow, description, saved_at",
            name,
            schema,
            allow,
            description,
        )
        assert row is not None
        return _event_type(row)

    async def get_event_type(self, name: str) -> dict[str, Any]:
        row = await self.pool.fetchrow(
            "SELECT name, schema, allow, description, saved_at FROM orchestrator.event_types WHERE name = $1", name
        )
        if row is None:
            raise CommandError("not_found", f"name: no event type {name!r}")
        return _event_type(row)

    async def list_event_types(self) -> list[dict[str, Any]]:
        rows = await self.pool.fetch(
            "SELECT name, schema, allow, description, saved_at FROM orchestrator.event_types ORDER BY name"
        )
        return [_event_type(r) for r in rows]

    async def delete_event_type(self, name: str) -> dict[str, Any]:
        """An event type no longer declared, as it was, and whichever app declared it no longer does: its events
        stay in the streams. A type a capture declares is refused while the capture lasts (its trigger goes on
        writing events of it), whoever asks: the command, or an app's plan."""
        async with self.pool.acquire() as conn, conn.transaction():
            # The capture's row locked against its ending meanwhile; a capture made meanwhile takes the type's
            # row, which the delete waits for, and then declares it again.
            table = await conn.fetchval(_CAPTURE_OF_TYPE + " FOR SHARE OF c", name)
            if table is not None:
                raise CommandError("invalid_request", captured_refusal(name, table, "uncapture_table it first"))
            row = await conn.fetchrow(
                "WITH gone AS (DELETE FROM orchestrator.app_declarations WHERE kind = 'event_type' AND name = $1)"
                " DELETE FROM orchestrator.event_types WHERE name = $1 RETURNING name, schema, allow, description,"
                " saved_at",
                name,
            )
        if row is None:
            raise CommandError("not_found", f"name: no event type {name!r}")
        return _event_type(row)

    async def capture_of_type(self, name: str) -> str | None:
        """The table whose capture declares the event type `name` (`schema.table`), while it lasts; None: none."""
        table: str | None = await self.pool.fetchval(_CAPTURE_OF_TYPE, name)
        return table

    async def declared_by(self) -> dict[tuple[str, str], str]:
        """Which app declared each listener and event type, by (kind, name)."""
        rows = await self.pool.fetch("SELECT kind, name, app FROM orchestrator.app_declarations")
        return {(r["kind"], r["name"]): r["app"] for r in rows}

    async def declare(self, kind: str, name: str, app: str | None) -> None:
        """Record that `app` declares `kind` `name` (None: it no longer does)."""
        if app is None:
            await self.pool.execute(
                "DELETE FROM orchestrator.app_declarations WHERE kind = $1 AND name = $2", kind, name
            )
            return
        await self.pool.execute(
            "INSERT INTO orchestrator.app_declarations (kind, name, app) VALUES ($1, $2, $3)"
            " ON CONFLICT (kind, name) DO UPDATE SET app = EXCLUDED.app",
            kind,
            name,
            app,
        )

    async def event_schemas(self, names: Collection[str] | None = None) -> dict[str, dict[str, Any]]:
        """Every declared type's schema by name, or those of `names` only (an emit reads its own types, not every
        schema the application declared)."""
        if names is None:
            rows = await self.pool.fetch("SELECT name, schema FROM orchestrator.event_types")
        else:
            rows = await self.pool.fetch(
                "SELECT name, schema FROM orchestrator.event_types WHERE name = ANY($1::text[])", list(names)
            )
        return {r["name"]: r["schema"] for r in rows}

    async def emit(
        self,
        session_id: str,
        events: Sequence[dict[str, Any]],
        *,
        source: dict[str, Any] | None = None,
        depth: int = 0,
        field: str | None = "events",
    ) -> list[int]:
        """Append the application's events (each `{type, data, client?, key?}`, already checked), in order, in
        one transaction; answer their ids (a key seen before answers the first event's). `field`: where a refusal
        names them (None: one event, named by its own fields)."""
        try:
            rows = await self.pool.fetch(
                "SELECT o_event FROM orchestrator.orchestrator_emit($1, $2::text::jsonb, $3, $4, $5, $6)",
                session_id,
                # Checked by the command (`app_events.checked`): no NaN, so the fast encoding is the same JSON.
                json_codec.dumps_checked(list(events)),
                _clean(source),
                depth,
                current_traceparent(),
                current_cause(),
            )
        except asyncpg.RaiseError as err:
            raise _refused(err, session_id, field) from None
        return [int(r["o_event"]) for r in rows]

    async def write_objects(
        self,
        session_id: str,
        objects: Sequence[dict[str, Any]],
        *,
        source: dict[str, Any] | None = None,
        depth: int = 0,
        idempotency_key: str | None = None,
    ) -> list[tuple[dict[str, Any], int]]:
        """Write each `{alias, value, if_rev?}` as `write_object` would, all or none, in one statement; the request's
        `idempotency_key` keys them `<key>:<index>`, and a retry answers the first request's writes."""
        try:
            rows = await self.pool.fetch(
                "SELECT o_rev, o_event FROM orchestrator.orchestrator_write_objects($1, $2::jsonb, $3, $4, $5, $6, $7)",
                session_id,
                list(objects),
                idempotency_key,
                _clean(source),
                depth,
                current_traceparent(),
                current_cause(),
            )
        except asyncpg.RaiseError as err:
            raise _refused(err, session_id, "objects", request_key=True) from None
        return [
            ({"alias": o["alias"], "rev": int(r["o_rev"])}, int(r["o_event"]))
            for o, r in zip(objects, rows, strict=True)
        ]

    async def post_thread_items(
        self,
        session_id: str,
        alias: str,
        items: Sequence[dict[str, Any]],
        *,
        source: dict[str, Any] | None = None,
        depth: int = 0,
        idempotency_key: str | None = None,
    ) -> list[tuple[str, int]]:
        """Post each item (already checked, with its `id`, `preview` and text or JSON message) as
        `post_thread_item` would, all or none, in one statement, keyed as `write_objects` keys its writes; answer
        each item's id and event id."""
        try:
            rows = await self.pool.fetch(
                "SELECT o_item, o_event FROM orchestrator.orchestrator_post_thread_items($1, $2, $3::jsonb, $4, $5,"
                " $6, $7, $8)",
                session_id,
                alias,
                list(items),
                idempotency_key,
                _clean(source),
                depth,
                current_traceparent(),
                current_cause(),
            )
        except asyncpg.RaiseError as err:
            raise _refused(err, session_id, "items", request_key=True) from None
        return [(str(r["o_item"]), int(r["o_event"])) for r in rows]


def _event_type(row: asyncpg.Record) -> dict[str, Any]:
    found = {"name": row["name"], "schema": row["schema"], "saved_at": row["saved_at"].isoformat()}
    if row["allow"] is not None:
        found["allow"] = row["allow"]
    if row["description"] is not None:
        found["description"] = row["description"]
    return found
