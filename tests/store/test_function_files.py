"""One file per SQL function (orchestrator/store/functions/): every function in the schema has its file and
every file its function; a database upgraded from a release before the files ends with exactly the functions
and triggers of one made new; a changed file is applied again at the next start and an unchanged one is not;
processes that migrate at once apply each file once; a start's migrations and files land in one transaction."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

import asyncpg
import pytest

from orchestrator.dev.embedded import EmbeddedPostgres
from orchestrator.store import migrate as migrate_module
from orchestrator.store.migrate import function_files, migrate, migration_files
from tests.conftest import scratch_database
from tests.store.earlier_releases import BEFORE_FUNCTION_FILES, released_through

# Advisory locks held in this database (the server is shared by the tests running beside).
LOCKS_HELD = (
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)
CREATED_TEXT = "orchestrator_created_text.sql"
WRITE_TIME = "SELECT orchestrator.orchestrator_created_text('2026-01-02 03:04:05+00')"
DEFINED = re.compile(r"^CREATE OR REPLACE FUNCTION orchestrator\.([a-z_][a-z0-9_]*)\(", re.MULTILINE)


async def definitions(conn: asyncpg.Connection, schema: str = "orchestrator") -> dict[str, str]:
    """Every function of the schema by its signature, as PostgreSQL states it (body, settings and all), and
    every trigger on a table of the schema."""
    rows = await conn.fetch(
        "SELECT p.oid::regprocedure::text AS name, pg_get_functiondef(p.oid) AS text FROM pg_proc p"
        " WHERE p.pronamespace = $1::regnamespace"
        " UNION ALL SELECT 'trigger ' || t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t"
        " JOIN pg_class k ON k.oid = t.tgrelid WHERE k.relnamespace = $1::regnamespace AND NOT t.tgisinternal",
        schema,
    )
    return {r["name"]: r["text"] for r in rows}


@pytest.fixture
async def blank_db(embedded_pg: EmbeddedPostgres) -> AsyncIterator[str]:
    async with scratch_database(embedded_pg, "functions") as url:
        yield url


@pytest.fixture
async def blank(blank_db: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(blank_db)
    yield conn
    await conn.close()


async def test_every_function_in_the_schema_has_its_file_and_every_file_defines_its_function(fresh_db: str) -> None:
    files = dict(function_files())
    for name, sql in files.items():
        # More than once only to keep a signature the release before calls, beside the one that replaced it.
        assert set(DEFINED.findall(sql)) == {name.removesuffix(".sql")}, f"{name} defines its own function, and only it"
    conn = await asyncpg.connect(fresh_db)
    try:
        rows = await conn.fetch("SELECT proname FROM pg_proc WHERE pronamespace = 'orchestrator'::regnamespace")
    finally:
        await conn.close()
    assert sorted({f"{r['proname']}.sql" for r in rows}) == sorted(files)


@pytest.mark.parametrize("through", [7, 22, BEFORE_FUNCTION_FILES])
async def test_a_database_upgraded_in_place_ends_with_the_functions_of_one_made_new(
    fresh_db: str, blank: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch, through: int
) -> None:
    with released_through(monkeypatch, through):
        assert await migrate(blank) == [name for version, name, _ in migration_files() if version <= through]
    before = await definitions(blank)
    applied = await migrate(blank)
    assert applied == [name for version, name, _ in migration_files() if version > through] + [
        name for name, _ in function_files()
    ]
    new = await asyncpg.connect(fresh_db)
    try:
        made_new = await definitions(new)
    finally:
        await new.close()
    upgraded = await definitions(blank)
    assert before != made_new, "the release's own bodies, restated by its migrations"
    assert sorted(upgraded) == sorted(made_new)
    assert {name: text for name, text in upgraded.items() if made_new[name] != text} == {}


async def test_a_changed_file_is_applied_again_at_the_next_start_and_an_unchanged_one_is_not(
    blank: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert CREATED_TEXT in await migrate(blank)
    assert await migrate(blank) == [], "nothing changed, nothing applied"
    shipped = function_files()
    # The commit time's text ends in a lower-case `z`.
    changed = [(name, sql.replace("END || 'Z'", "END || 'z'")) for name, sql in shipped]
    assert [name for (name, sql), (_, was) in zip(changed, shipped, strict=True) if sql != was] == [CREATED_TEXT]
    monkeypatch.setattr(migrate_module, "function_files", lambda: changed)
    assert await migrate(blank) == [CREATED_TEXT]
    assert await blank.fetchval(WRITE_TIME) == "2026-01-02T03:04:05z"
    assert await migrate(blank) == []
    # A release that ships the file as it was puts it back, as it would any other text.
    monkeypatch.setattr(migrate_module, "function_files", lambda: shipped)
    assert await migrate(blank) == [CREATED_TEXT]
    assert await blank.fetchval(WRITE_TIME) == "2026-01-02T03:04:05Z"


async def test_a_file_gone_from_the_release_is_forgotten(
    blank: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = function_files()
    extra = "CREATE OR REPLACE FUNCTION orchestrator.orchestrator_extra() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;\n"
    monkeypatch.setattr(migrate_module, "function_files", lambda: [*shipped, ("orchestrator_extra.sql", extra)])
    assert "orchestrator_extra.sql" in await migrate(blank)
    monkeypatch.setattr(migrate_module, "function_files", lambda: shipped)
    assert await migrate(blank) == []
    recorded = await blank.fetch("SELECT name FROM orchestrator.schema_functions ORDER BY name")
    assert [r["name"] for r in recorded] == [name for name, _ in shipped]


async def test_processes_that_migrate_at_once_apply_each_file_once(blank_db: str) -> None:
    conns = [await asyncpg.connect(blank_db) for _ in range(3)]
    try:
        answers = await asyncio.gather(*(migrate(conn) for conn in conns))
        applied = sorted(name for answer in answers for name in answer)
        assert applied == sorted([name for _, name, _ in migration_files()] + [name for name, _ in function_files()])
        held = await conns[0].fetchval(LOCKS_HELD)
        assert held == 0, "the migration lock is a transaction's: nothing holds it once the runner is done"
    finally:
        for conn in conns:
            await conn.close()


async def test_a_function_file_names_every_table_it_uses(blank: asyncpg.Connection) -> None:
    """Applied with an empty search path and its bodies checked, every file's function is created: an unqualified
    name in a SQL function's body would not be found. (A PL/pgSQL body is checked when it runs: the suite runs
    them with no search path of the platform's.)"""
    await migrate(blank)
    async with blank.transaction():
        await blank.execute("SET LOCAL search_path = ''")
        for _, sql in function_files():
            await blank.execute(sql)


async def test_a_start_applies_its_migrations_and_files_in_one_transaction(
    blank: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release's migrations and function files land together or not at all: a file that fails after every
    migration ran leaves the database as it was (no process ever runs old bodies over new tables)."""
    broken = "SELECT 1 / 0;\n"
    monkeypatch.setattr(migrate_module, "function_files", lambda: [*function_files(), ("zz_broken.sql", broken)])
    with pytest.raises(asyncpg.DivisionByZeroError):
        await migrate(blank)
    assert await blank.fetchval("SELECT to_regnamespace('orchestrator')") is None, "nothing of it committed"
    monkeypatch.setattr(migrate_module, "function_files", function_files)
    assert await migrate(blank) == [name for _, name, _ in migration_files()] + [name for name, _ in function_files()]
