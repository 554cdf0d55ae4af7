"""Versioned SQL migrations, applied in order at start-up.

Owns the `schema_migrations` table and the order of `migrations/NNNN_name.sql`. Each file runs in its own
transaction under an advisory lock, so workers that start together apply each migration once.
"""

from __future__ import annotations

import re
from importlib import resources

import asyncpg

# Any fixed number works; it only has to be the same for every process that migrates this database.
MIGRATION_LOCK_KEY = 7_245_001

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def migration_files() -> list[tuple[int, str, str]]:
    """(version, name, sql) of every migration shipped with the package, in order."""
    found: list[tuple[int, str, str]] = []
    for entry in resources.files("orchestrator.store").joinpath("migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


async def migrate(conn: asyncpg.Connection) -> list[str]:
    """Apply the migrations this database has not seen; answer the names applied."""
    applied: list[str] = []
    await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {row["version"] for row in await conn.fetch("SELECT version FROM schema_migrations")}
        for version, name, sql in migration_files():
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version, name)
            applied.append(name)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
    return applied
