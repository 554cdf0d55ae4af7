"""Versioned SQL migrations, then the SQL functions' own files, applied at start-up.

Owns the `schema_migrations` and `schema_functions` tables and the order of what they record. Table changes
are `migrations/NNNN_name.sql`, ordered and append-only: a shipped file never changes, and each runs once, with
the search path it was written for (the platform's schema, `SET LOCAL`). Every SQL function's current body is
`functions/<function>.sql`, every name in it schema-qualified; after the migrations, each file whose text changed
since it was last applied (its SHA-256 in `schema_functions`) runs again, in name order (Flyway's repeatable
migrations; `check_function_bodies` off, as pg_dump sets it, so SQL functions may name each other in any order).
A start applies all of it in one transaction: no process runs old function bodies over new tables, and a
failure leaves the database as it was. A database whose recorded migrations are not the ones
shipped (made by an earlier schema, which v0 squashed rather than upgraded: docs/decisions.md) is refused before
anything is applied.

The transaction takes the transaction-scoped advisory lock first and reads what is recorded under it, so
processes that start together apply each file once, and the runner holds nothing across transactions: it works
through any pooler, in transaction mode too. Its SQL names `orchestrator` and `in_schema` moves it to the
configured schema (`schema_names.py`).

Everything lives in a schema of the platform's own (`orchestrator` unless set), so it can share a database with
the application. A database made before there was one (everything in `public`) is upgraded in place: its
migrations' record moves first, and `0011_own_schema` moves the rest.
"""

from __future__ import annotations

import hashlib
import re
from importlib import resources

import asyncpg

from orchestrator.core.database_schema import DEFAULT_SCHEMA, checked_schema
from orchestrator.core.schema_names import in_schema

# Any fixed number works; it only has to be the same for every process that migrates this database (and it is
# the one the session-scoped lock of earlier versions took, so an older process starting beside waits too).
MIGRATION_LOCK_KEY = 7_245_001

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
_FUNCTION_FILE = re.compile(r"^[a-z_][a-z0-9_]*\.sql$")

_LOCK = "SELECT pg_advisory_xact_lock($1)"
_BOOKKEEPING = """
CREATE TABLE IF NOT EXISTS orchestrator.schema_migrations (
    version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS orchestrator.schema_functions (
    name text PRIMARY KEY, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());
"""
_RECORDED = "SELECT version, name FROM orchestrator.schema_migrations"
_CHECKSUMS = "SELECT name, checksum FROM orchestrator.schema_functions"
_RECORD_MIGRATION = "INSERT INTO orchestrator.schema_migrations (version, name) VALUES ($1, $2)"
_RECORD_FUNCTION = (
    "INSERT INTO orchestrator.schema_functions (name, checksum) VALUES ($1, $2)"
    " ON CONFLICT (name) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now()"
)
_FORGET_FUNCTIONS = "DELETE FROM orchestrator.schema_functions WHERE NOT name = ANY ($1::text[])"
# A function file names everything it uses: it is applied with no schema of the platform's on the path.
_FUNCTION_SETTINGS = "SET LOCAL check_function_bodies = off;\nSET LOCAL search_path = '';\n"


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


def function_files() -> list[tuple[str, str]]:
    """(name, sql) of every SQL function's file shipped with the package, in name order."""
    folder = resources.files("orchestrator.store").joinpath("functions")
    found = [(e.name, e.read_text(encoding="utf-8")) for e in folder.iterdir() if _FUNCTION_FILE.match(e.name)]
    return sorted(found)


def checksum(sql: str) -> str:
    return hashlib.sha256(sql.encode("utf-8")).hexdigest()


async def migrate(conn: asyncpg.Connection, schema: str = DEFAULT_SCHEMA) -> list[str]:
    """Apply to `schema` (made if missing) the migrations this database has not seen, then the function files
    whose text it has not seen, all in one transaction; answer the names applied."""
    schema = checked_schema(schema)
    files = migration_files()
    functions = [(name, in_schema(sql, schema)) for name, sql in function_files()]
    applied: list[str] = []
    # One transaction, under the lock: no process ever runs a release's old function bodies over its new tables
    # (or the reverse), and a failure anywhere leaves the database as it was.
    async with conn.transaction():
        await conn.execute(_LOCK, MIGRATION_LOCK_KEY)
        await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        if await _made_in_public(conn, schema):
            await conn.execute(f'ALTER TABLE public.schema_migrations SET SCHEMA "{schema}"')
        await conn.execute(in_schema(_BOOKKEEPING, schema))
        recorded = {row["version"]: row["name"] for row in await conn.fetch(in_schema(_RECORDED, schema))}
        checksums = {row["name"]: row["checksum"] for row in await conn.fetch(in_schema(_CHECKSUMS, schema))}
        shipped = {version: name for version, name, _ in files}
        foreign = sorted(name for version, name in recorded.items() if shipped.get(version) != name)
        if foreign:
            raise SchemaMismatch(
                f"the database was made by another version of the schema ({', '.join(foreign)}), which this one"
                " does not upgrade: point the platform at an empty database (for `orchestrator dev`, a new"
                " --data-dir)"
            )
        for version, name, sql in files:
            if version not in recorded:
                # The search path the migration was written for, for the transaction only (a pooler hands the
                # next transaction to whichever server connection it likes); each file sets its own.
                await conn.execute(f'SET LOCAL search_path TO "{schema}", pg_temp;\n{in_schema(sql, schema)}')
                await conn.execute(in_schema(_RECORD_MIGRATION, schema), version, name)
                applied.append(name)
        for name, sql in functions:
            sum_ = checksum(sql)
            if checksums.get(name) != sum_:
                await conn.execute(_FUNCTION_SETTINGS + sql)
                await conn.execute(in_schema(_RECORD_FUNCTION, schema), name, sum_)
                applied.append(name)
        if set(checksums) - {name for name, _ in functions}:
            await conn.execute(in_schema(_FORGET_FUNCTIONS, schema), [name for name, _ in functions])
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
