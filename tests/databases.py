"""Migrated databases on one PostgreSQL server, each lent to one user at a time and emptied in between: the
suite's `fresh_db` (tests/conftest.py), and the lane worlds a state machine or a schedule of faults opens per
example (tests/lane_worlds/), in the suite and in `bench/`.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg

from bench.common import in_platform_schema
from orchestrator.dev.embedded import EmbeddedPostgres, start_postgres
from orchestrator.store.migrate import migrate

# Empties a lent database: drops the tables a test made of its own (an application's in `public`, or a test
# app's beside the platform's), truncates every table the migrations made (but their own record), and restarts
# every sequence, so ids start at 1 again as in a new database.
EMPTY_DATABASE = """
DO $$
DECLARE
    known text[] := $1;
    name text;
BEGIN
    FOR name IN SELECT format('%I.%I', schemaname, tablename) FROM pg_tables
                WHERE schemaname = 'public' OR (schemaname = 'orchestrator' AND NOT tablename = ANY(known)) LOOP
        EXECUTE format('DROP TABLE IF EXISTS %s CASCADE', name);
    END LOOP;
    EXECUTE (SELECT 'TRUNCATE ' || string_agg(format('orchestrator.%I', tablename), ', ') || ' RESTART IDENTITY CASCADE'
             FROM pg_tables WHERE schemaname = 'orchestrator' AND tablename <> 'schema_migrations');
    FOR name IN SELECT sequencename FROM pg_sequences WHERE schemaname = 'orchestrator' LOOP
        EXECUTE format('ALTER SEQUENCE orchestrator.%I RESTART', name);
    END LOOP;
END $$
"""


class Databases:
    """Migrated databases on the session's server, each lent to one test at a time and emptied in between.

    Creating a database costs 0.2 to 0.5 s on this machine, emptying one about 20 ms; with hundreds of tests
    that is minutes of the suite. What a test leaves connected is cut off before its database is emptied.
    """

    def __init__(self, server: EmbeddedPostgres) -> None:
        self.server = server
        self.free: list[str] = []
        self.tables: list[str] | None = None

    async def lend(self) -> str:
        if self.free:
            return self.free.pop()
        name = f"t_{uuid.uuid4().hex}"
        admin = await asyncpg.connect(self.server.url)
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
        finally:
            await admin.close()
        url = in_platform_schema(self.server.url_for(name))
        conn = await asyncpg.connect(url)
        try:
            await migrate(conn)
            if self.tables is None:
                rows = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'orchestrator'")
                self.tables = [r["tablename"] for r in rows]
        finally:
            await conn.close()
        return url

    async def give_back(self, url: str) -> None:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            await conn.execute(EMPTY_DATABASE.replace("$1", _text_array(self.tables or [])))
        finally:
            await conn.close()
        self.free.append(url)


def _text_array(names: list[str]) -> str:
    return "ARRAY[" + ", ".join("'" + n.replace("'", "''") + "'" for n in names) + "]::text[]"


async def commit_without_waiting(server: EmbeddedPostgres) -> None:
    """Commits need not wait for the disk on a server that never crashes on purpose: many small commits run
    faster."""
    admin = await asyncpg.connect(server.url)
    try:
        await admin.execute("ALTER SYSTEM SET synchronous_commit = off")
        await admin.execute("SELECT pg_reload_conf()")
    finally:
        await admin.close()


@contextmanager
def databases_of_their_own() -> Iterator[Databases]:
    """Databases on an embedded PostgreSQL of their own, in a temporary folder, for as long as the block runs (the
    benchmarks' `--store postgres`; each lend and give back runs in the caller's event loop of the moment)."""
    with tempfile.TemporaryDirectory(prefix="bench-") as folder:
        server = asyncio.run(start_postgres(Path(folder)))
        try:
            asyncio.run(commit_without_waiting(server))
            yield Databases(server)
        finally:
            asyncio.run(server.stop())
