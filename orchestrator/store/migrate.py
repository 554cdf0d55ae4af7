"""Versioned SQL migrations, applied in order at start-up.

Owns the `schema_migrations` table and the order of `migrations/NNNN_name.sql`. Each file runs in its own
transaction under an advisory lock, so workers that start together apply each migration once. A database
whose recorded migrations are not the ones shipped (made by an earlier schema, which v0 squashed rather than
upgraded: docs/decisions.md) is refused before anything is applied.

Everything lives in a schema of the platform's own (`orchestrator` unless set), so it can share a database with
the application. A database made before there was one (everything in `public`) is upgraded in place: its
migrations' record moves first, and `0011_own_schema` moves the rest.
"""

from __future__ import annotations

import re
from importlib import resources

import asyncpg

from orchestrator.core.database_schema import DEFAULT_SCHEMA, checked_schema

# Any fixed number works; it only has to be the same for every process that migrates this database.
MIGRATION_LOCK_KEY = 7_245_001

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def schema_settings(schema: str) -> dict[str, str]:
    """What every connection of the platform sets: its own schema first, so its SQL names its tables plainly."""
    return {"search_path": checked_schema(schema)}


class SchemaMismatch(Exception):
    """The database holds a schema these migrations do not continue."""


def migration_files() -> list[tuple[int, str, str]]:
    """(version, name, sql) of every migration shipped with the package, in order."""
    found: list[tuple[int, str, str]] = []
    for entry in resources.files("orchestrator.store").joinpath("migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


async def migrate(conn: asyncpg.Connection, schema: str = DEFAULT_SCHEMA) -> list[str]:
    """Apply the migrations this database has not seen to `schema` (made if missing, and the connection's
    search path from then on); answer the names applied."""
    applied: list[str] = []
    await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY)
    try:
        await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{checked_schema(schema)}"')
        # `pg_temp` last: the functions keep this path (`SET search_path FROM CURRENT`), and a caller's temporary
        # table named like one of the platform's is never found before it.
        await conn.execute("SELECT set_config('search_path', $1, false)", f"{schema}, pg_temp")
        if await _made_in_public(conn, schema):
            await conn.execute(f'ALTER TABLE public.schema_migrations SET SCHEMA "{schema}"')
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        recorded = {
            row["version"]: row["name"] for row in await conn.fetch("SELECT version, name FROM schema_migrations")
        }
        files = migration_files()
        shipped = {version: name for version, name, _ in files}
        foreign = sorted(name for version, name in recorded.items() if shipped.get(version) != name)
        if foreign:
            raise SchemaMismatch(
                f"the database was made by another version of the schema ({', '.join(foreign)}), which this one does"
                " not upgrade: point the platform at an empty database (for `orchestrator dev`, a new --data-dir)"
            )
        done = set(recorded)
        for version, name, sql in files:
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version, name)
            applied.append(name)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
    return applied


async def _made_in_public(conn: asyncpg.Connection, schema: str) -> bool:
    """Whether this database holds the platform as it was before it had a schema of its own: a record of its
    first migration in `public` and none in `schema`."""
    if schema == "public" or await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"{schema}.schema_migrations"):
        return False
    # An application's own migration tool may keep a `public.schema_migrations` of another shape.
    shape = await conn.fetch(
        "SELECT column_name, data_type FROM information_schema.columns"
        " WHERE table_schema = 'public' AND table_name = 'schema_migrations'"
    )
    if {(r["column_name"], r["data_type"]) for r in shape} != {
        ("version", "integer"),
        ("name", "text"),
        ("applied_at", "timestamp with time zone"),
    }:
        return False
    return bool(
        await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM public.schema_migrations WHERE version = 1 AND name = '0001_store.sql')"
        )
    )
