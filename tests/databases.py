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

from orchestrator.core.database_schema import DEFAULT_SCHEMA
from orchestrator.core.schema_names import in_schema
from orchestrator.dev.embedded import EmbeddedPostgres, start_postgres
from orchestrator.store.migrate import migrate

# Empties a lent database: drops the tables a test made of its own (an application's in `public`, or a test
# app's beside the platform's), empties every table the migrations made (but the runner's records) that holds a
# row, and restarts every sequence that was drawn from, so ids start at 1 again as in a new database. A table
# with no row and a sequence never drawn from are as a new database has them already. Most tests fill a few small
# tables: their rows are deleted with the foreign keys' and the triggers' checks off (a TRUNCATE of them cascades
# to every table that refers to them, and took most of a test's teardown, 0.1 s); a table past a megabyte is
# truncated, as deleting its rows would take longer and leave them for the vacuum. It names the platform's schema
# as the platform's SQL does, and `in_schema` moves it to the schema a database was lent for.
EMPTY_DATABASE = """
DO $$
DECLARE
    known text[] := $1;
    name text;
    filled text[] := '{}';
    large boolean := false;
    found boolean;
BEGIN
    FOR name IN SELECT format('%s.%I', c.relnamespace::regnamespace, c.relname) FROM pg_class c
                WHERE c.relkind IN ('r', 'p') AND (c.relnamespace = 'public'::regnamespace
                      OR (c.relnamespace = 'orchestrator'::regnamespace AND NOT c.relname = ANY(known))) LOOP
        EXECUTE format('DROP TABLE IF EXISTS %s CASCADE', name);
    END LOOP;
    FOR name IN SELECT format('%s.%I', c.relnamespace::regnamespace, c.relname) FROM pg_class c
                WHERE c.relkind = 'r' AND c.relnamespace = 'orchestrator'::regnamespace
                AND c.relname NOT IN ('schema_migrations', 'schema_functions') LOOP
        EXECUTE format('SELECT EXISTS (SELECT FROM %s)', name) INTO found;
        IF found THEN
            filled := filled || name;
            large := large OR pg_relation_size(name::regclass) > 1048576;
        END IF;
    END LOOP;
    IF large THEN
        EXECUTE 'TRUNCATE ' || array_to_string(filled, ', ') || ' CASCADE';
    ELSIF cardinality(filled) > 0 THEN
        SET LOCAL session_replication_role = replica;
        FOREACH name IN ARRAY filled LOOP
            EXECUTE format('DELETE FROM %s', name);
        END LOOP;
        SET LOCAL session_replication_role = origin;
    END IF;
    FOR name IN SELECT format('%s.%I', c.relnamespace::regnamespace, c.relname) FROM pg_class c
                WHERE c.relkind = 'S' AND c.relnamespace = 'orchestrator'::regnamespace LOOP
        -- Drawn from, or set elsewhere without a draw (`setval(..., false)`, as `orchestrator restored` does).
        EXECUTE format('SELECT is_called OR last_value <> (SELECT seqstart FROM pg_sequence'
                       ' WHERE seqrelid = %L::regclass) FROM %s', name, name) INTO found;
        IF found THEN
            EXECUTE format('ALTER SEQUENCE %s RESTART', name);
        END IF;
    END LOOP;
END $$
"""

# A schema of the platform's other than the default, for the tests that run it there too: a reserved word, so
# that every name the platform's SQL moves to it must be quoted.
OTHER_SCHEMA = "user"


class Databases:
    """Migrated databases on the session's server, each lent to one test at a time and emptied in between.

    Creating a database costs 0.2 to 0.5 s on this machine, emptying one about 20 ms; with hundreds of tests
    that is minutes of the suite. What a test leaves connected is cut off before its database is emptied. A
    database is migrated into one schema of the platform's, and lent again only for that schema.
    """

    def __init__(self, server: EmbeddedPostgres) -> None:
        self.server = server
        self.free: dict[str, list[str]] = {}
        self.tables: dict[str, list[str]] = {}

    async def lend(self, schema: str = DEFAULT_SCHEMA) -> str:
        if free := self.free.get(schema):
            return free.pop()
        name = f"t_{uuid.uuid4().hex}"
        admin = await asyncpg.connect(self.server.url)
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
        finally:
            await admin.close()
        url = self.server.url_for(name)
        conn = await asyncpg.connect(url)
        try:
            await migrate(conn, schema)
            if schema not in self.tables:
                rows = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = $1", schema)
                self.tables[schema] = [r["tablename"] for r in rows]
        finally:
            await conn.close()
        return url

    async def give_back(self, url: str, schema: str = DEFAULT_SCHEMA) -> None:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            empty = EMPTY_DATABASE.replace("$1", _text_array(self.tables.get(schema, [])))
            await conn.execute(in_schema(empty, schema))
        finally:
            await conn.close()
        self.free.setdefault(schema, []).append(url)


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
