"""A database restored from a dump, made ready for the platform: its event ids moved past any that the interval
lost with the restore drew, and every schedule marked to be made again (`orchestrator restored`; why each, in
docs/operations.md, "Restore"). With Temporal restored empty and PostgreSQL kept, the schedules only.

Owns those two statements and the look before them. The look refuses a database that holds no platform in the
configured schema (never migrated, restored into another database, or a schema set otherwise), naming the
database, the schema and what is missing, before anything changes; the names it looks for are bound as values.
The statements name the platform's schema as all of the store's do, and `in_schema` moves them, quoted, to a
schema of another name. Both run in one transaction, the schedules' first: a sequence's change is never rolled
back (`nextval` and `setval` are not transactional), so it comes last, after everything that can fail.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from orchestrator.core.database_schema import checked_schema
from orchestrator.core.schema_names import in_schema
from orchestrator.store.connection import DATABASE_AWAY, database_place, unreachable

# How far the next event id moves: more ids than the lost interval drew at any rate the platform takes (1,000
# events a second for 30 years), and ids stay far below 2^53, so JavaScript clients read them exactly.
EVENT_ID_JUMP = 10**12

# What the statements use, in the platform's schema: a database migrated by any release has all three.
_NEEDED = ["schema_migrations", "event_ids", "schedules"]

_LOOK = """
SELECT current_database() AS database,
       EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = $1) AS schema_found,
       ARRAY(SELECT n.name FROM unnest($2::text[]) WITH ORDINALITY AS n (name, at)
             WHERE to_regclass(format('%I.%I', $1::text, n.name)) IS NULL ORDER BY n.at) AS missing
"""
_MARK_SCHEDULES = (
    "WITH marked AS (UPDATE orchestrator.schedules SET made = false RETURNING 1) SELECT count(*) FROM marked"
)
# The id the next write would have taken is drawn (and never used), and the sequence set to hand out that id plus
# the jump next.
_JUMP = (
    "SELECT drawn, setval('orchestrator.event_ids'::regclass, drawn + $1, false) AS next"
    " FROM nextval('orchestrator.event_ids'::regclass) AS drawn"
)
_NEXT = "SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM orchestrator.event_ids"


class NotAPlatformDatabase(Exception):
    """The database a URL names does not exist, or holds no platform in the configured schema."""


@dataclass(frozen=True)
class Restored:
    """What `mark_restored` did: in which database, the next event id before and after, the schedules marked."""

    database: str
    schema: str
    next_event_id_before: int
    next_event_id: int
    schedules_marked: int


async def mark_restored(database_url: str, schema: str, *, jump_event_ids: bool = True) -> Restored:
    """Mark every schedule of the platform in `schema` to be made again and, with `jump_event_ids`, move the next
    event id `EVENT_ID_JUMP` on, in one transaction. Raises `NotAPlatformDatabase` (nothing changed) when the
    database holds no platform there, `DatabaseUrlInvalid` when its URL is none PostgreSQL's client reads,
    `DatabaseUnreachable` when it cannot be reached."""
    schema = checked_schema(schema)
    try:
        conn = await asyncpg.connect(database_url, statement_cache_size=0)
    except asyncpg.InvalidCatalogNameError as err:
        raise NotAPlatformDatabase(
            f"database_url: {err} at the {database_place(database_url)}: create it and restore the dump into it"
            " first (docs/operations.md, Restore)"
        ) from None
    except DATABASE_AWAY as err:
        raise unreachable(database_url, err) from err
    try:
        async with conn.transaction():
            database = await _look(conn, database_url, schema)
            marked = int(await conn.fetchval(in_schema(_MARK_SCHEDULES, schema)))
            if jump_event_ids:
                row = await conn.fetchrow(in_schema(_JUMP, schema), EVENT_ID_JUMP)
                assert row is not None
                before, after = int(row["drawn"]), int(row["next"])
            else:
                before = after = int(await conn.fetchval(in_schema(_NEXT, schema)))
    except DATABASE_AWAY as err:
        raise unreachable(database_url, err) from err
    finally:
        await conn.close()
    return Restored(database, schema, before, after, marked)


async def _look(conn: asyncpg.Connection, database_url: str, schema: str) -> str:
    """The database's name, once it is seen to hold the platform in `schema`; else `NotAPlatformDatabase`."""
    row = await conn.fetchrow(_LOOK, schema, _NEEDED)
    assert row is not None
    where = f"the database {row['database']!r} at the {database_place(database_url)}"
    if not row["schema_found"]:
        raise NotAPlatformDatabase(
            f"{where} has no schema {schema!r}: it holds no platform there (is it the database the dump was restored"
            " into, and is ORCHESTRATOR_DATABASE_SCHEMA the schema the platform had?); nothing was changed"
        )
    if row["missing"]:
        raise NotAPlatformDatabase(
            f"{where} has a schema {schema!r} with no {', '.join(row['missing'])}: it is not the platform's, or it"
            " was never migrated; nothing was changed"
        )
    return str(row["database"])
