"""Tables of the application's whose changes are events (`capture_table`).

Owns the statements over `captures`; the checks, the trigger and the events themselves are SQL
(`orchestrator_capture`, `orchestrator_captured`, migration 0012), so a captured change is an event in the commit
that made it, whoever writes the row. Its event is staged in that commit and appended to the session's stream just
after (0033_captured_staged.sql): by the session's next writer or reader, or the router, whose settling is here.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from orchestrator.core.errors import CommandError
from orchestrator.store.postgres import PostgresStore

CAPTURED_KINDS = ("created", "updated", "deleted")

# The shape of each kind of captured event's data: the row's primary key and the row as JSON (less the columns left
# out), and on an update the columns whose value changed and those now null; nothing else, so a path no event of
# the kind can have is refused at save (`data.changed` of a `.created`). The row's columns are not listed: a table
# may gain one after its capture, and its events carry it.
_ROW: dict[str, Any] = {"_id": {}, "doc": {"type": "object"}}
_CHANGES: dict[str, Any] = {
    "changed": {"type": "array", "items": {"type": "string"}},
    "removed": {"type": "array", "items": {"type": "string"}},
}


def captured_schema(kind: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {**_ROW, **(_CHANGES if kind == "updated" else {})},
        "required": ["_id", "doc"],
        "additionalProperties": False,
    }


def captured_types(prefix: str, table: str) -> list[dict[str, Any]]:
    """The event types a capture of `table` declares under `prefix`: each kind's name, schema and description."""
    return [
        {"name": f"{prefix}.{kind}", "schema": captured_schema(kind), "description": f"a row of {table} {kind}"}
        for kind in CAPTURED_KINDS
    ]


# What captures declared for all three kinds before each had its own: a type of it is a capture's too.
EARLIER_CAPTURED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {**_ROW, **_CHANGES},
    "required": ["_id", "doc"],
}


def declared_by_a_capture(schema: Any) -> bool:
    """Whether a `.created` type of this schema was declared by a capture (so a capture may take it again)."""
    return schema in (captured_schema("created"), EARLIER_CAPTURED_SCHEMA)


_COLUMNS = "table_name, type_prefix, id_column, session_column, session_id, exclude, saved_at"
# A captured table as it is named now (`k` its pg_class row, `n` its schema's): `schema.table` always, where
# regclass's text leaves out a schema on the caller's search path.
_TABLE_NAME = "quote_ident(n.nspname) || '.' || quote_ident(k.relname)"


def _capture(row: asyncpg.Record) -> dict[str, Any]:
    found = {k: row[k] for k in ("table_name", "type_prefix", "id_column", "session_column", "session_id")}
    found = {k: v for k, v in found.items() if v is not None}
    # Taken out before the rest is spread: `table` is its name in a reply.
    table = found.pop("table_name")
    return {
        **found,
        "table": table,
        "exclude": list(row["exclude"]),
        "types": [f"{row['type_prefix']}.{kind}" for kind in CAPTURED_KINDS],
        "saved_at": row["saved_at"].isoformat(),
    }


class Captures(PostgresStore):
    async def capture_table(
        self, table: str, prefix: str, session_column: str | None, session_id: str | None, exclude: list[str]
    ) -> dict[str, Any]:
        """Record the capture, declare its three event types and put the trigger on the table, all or none."""
        async with self.transaction() as conn:
            if session_id is not None:
                await self._locked_session(conn, session_id, require_open=False)
            try:
                row = await conn.fetchrow(
                    f"SELECT {_COLUMNS} FROM orchestrator.orchestrator_capture($1, $2, $3, $4, $5)",
                    table,
                    prefix,
                    session_column,
                    session_id,
                    exclude,
                )
            except asyncpg.InvalidParameterValueError as err:
                raise CommandError("invalid_request", str(err)) from None
            except asyncpg.InsufficientPrivilegeError as err:
                # Its trigger needs the table's owner (or TRIGGER on it): the platform's role is not.
                raise CommandError(
                    "invalid_request", f"table: the platform's database role may not put a trigger on {table!r}: {err}"
                ) from None
            assert row is not None
            await conn.executemany(
                "INSERT INTO orchestrator.event_types (name, schema, description) VALUES ($1, $2, $3)"
                " ON CONFLICT (name) DO UPDATE SET schema = EXCLUDED.schema, description = EXCLUDED.description,"
                " saved_at = clock_timestamp()",
                [(t["name"], t["schema"], t["description"]) for t in captured_types(prefix, row["table_name"])],
            )
            return _capture(row)

    async def uncapture_table(self, table: str) -> dict[str, Any]:
        """End a capture: its trigger goes; its event types and events stay."""
        row = await self.pool.fetchrow(f"SELECT {_COLUMNS} FROM orchestrator.orchestrator_uncapture($1)", table)
        if row is None or row["table_name"] is None:
            raise CommandError("not_found", f"table: no capture of {table!r}")
        return _capture(row)

    async def capture_refusal(self, table: str, session_column: str | None, exclude: list[str]) -> str | None:
        """What `capture_table` would refuse of this capture's table (its key, columns, types), asked of the
        catalogs alone (`orchestrator_capture_check`: no lock on the table), so a plan says it before it applies
        anything; None when nothing."""
        try:
            await self.pool.execute(
                "SELECT orchestrator.orchestrator_capture_check($1, $2, $3)", table, session_column, exclude
            )
        except asyncpg.InvalidParameterValueError as err:
            return str(err)
        return None

    async def table_exists(self, table: str) -> bool:
        """Whether the application's `schema.table` is there (an app's captures need it before it starts)."""
        return bool(await self.pool.fetchval("SELECT to_regclass($1) IS NOT NULL", table))

    async def capture_prefixes(self) -> dict[str, tuple[str, bool]]:
        """Every capture's type prefix: the table it was for, and whether that table still exists."""
        rows = await self.pool.fetch(
            f"SELECT c.type_prefix, coalesce({_TABLE_NAME}, c.table_name) AS table_name, k.oid IS NOT NULL AS live"
            " FROM orchestrator.captures c LEFT JOIN pg_class k ON k.oid = c.table_oid"
            " LEFT JOIN pg_namespace n ON n.oid = k.relnamespace"
        )
        return {r["type_prefix"]: (r["table_name"], r["live"]) for r in rows}

    async def list_captures(self) -> list[dict[str, Any]]:
        """The captures of tables that exist, each by the name its table has now (a dropped table's trigger went
        with it; capturing the table made again replaces its capture)."""
        rows = await self.pool.fetch(
            f"SELECT {_TABLE_NAME} AS table_name, c.type_prefix, c.id_column, c.session_column, c.session_id,"
            " c.exclude, c.saved_at FROM orchestrator.captures c JOIN pg_class k ON k.oid = c.table_oid"
            " JOIN pg_namespace n ON n.oid = k.relnamespace ORDER BY 1"
        )
        return [_capture(r) for r in rows]

    async def any_captures(self) -> bool:
        """Whether any table is captured, or captured events wait staged (a capture ended since): the router
        looks for staged events only then."""
        return bool(
            await self.pool.fetchval(
                "SELECT EXISTS (SELECT 1 FROM orchestrator.captures)"
                " OR EXISTS (SELECT 1 FROM orchestrator.captured_staged)"
            )
        )

    async def settle_staged(self, limit: int = 1000) -> list[str]:
        """Append the captured events that wait staged (0033_captured_staged.sql), up to `limit` sessions, those
        that waited longest first, in one call; answers the sessions appended (a session a writer holds is left to
        that writer)."""
        rows = await self.pool.fetch("SELECT orchestrator.orchestrator_captured_settle_staged($1) AS id", limit)
        return [r["id"] for r in rows]
