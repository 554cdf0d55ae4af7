"""`orchestrator restored`, run as the console script an operator runs: on a restored database the next event id moves
a trillion on and every schedule is marked to be made again, in one transaction, and what it did is printed; with
`--temporal-only` the schedules alone; a database that holds no platform in the configured schema is refused,
unchanged; and the schema the settings name reaches the SQL quoted (a reserved word works) or not at all (anything
but a plain name is refused before a connection)."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from orchestrator.dev.embedded import EmbeddedPostgres
from orchestrator.platform import Platform
from orchestrator.store.restored import EVENT_ID_JUMP
from tests.conftest import OTHER_SCHEMA, scratch_database
from tests.ops.conftest import child_env

CLI = str(Path(sys.executable).parent / "orchestrator")
CLI_SECONDS = 60


async def _value(url: str, sql: str) -> Any:
    """One value read from the database at `url`, on a connection of its own."""
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval(sql)
    finally:
        await conn.close()


async def run_restored(*args: str, **settings: str) -> tuple[int, str, str]:
    """`orchestrator restored ARGS` with only `settings` (ORCHESTRATOR_...) of the platform's set."""
    process = await asyncio.create_subprocess_exec(
        CLI,
        "restored",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=child_env(**settings),
    )
    out, err = await asyncio.wait_for(process.communicate(), CLI_SECONDS)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def written(platform: Platform, writes: int = 3) -> tuple[str, int]:
    """A session with `writes` events and two schedules made (rows as a worker leaves them); answers the session
    and the id its last event took."""
    reply = await platform.command({"command": "open_session"})
    session_id = reply["session"]["id"]
    for n in range(writes):
        body = {"command": "write_object", "session_id": session_id, "alias": f"docs/{n}", "value": {"type": "doc"}}
        reply = await platform.command(body)
        assert reply["status"] == "success", reply
    async with platform.store.pool.acquire() as conn:
        for alias in ("clocks/1", "clocks/2"):
            await conn.execute(
                "INSERT INTO orchestrator.schedules (session_id, alias, schedule_id, body, enabled, made)"
                " VALUES ($1, $2, $3, $4, true, true)",
                session_id,
                alias,
                f"sch_{uuid.uuid4().hex}",
                {"repeat": {"type": "interval", "every_seconds": 60}},
            )
    return session_id, int(reply["event_id"])


async def state(url: str, schema: str = "orchestrator") -> tuple[int, list[bool]]:
    """The id the event sequence hands out next (read, not drawn), and each schedule's `made`."""
    conn = await asyncpg.connect(url)
    try:
        seq = await conn.fetchrow(f'SELECT last_value, is_called FROM "{schema}".event_ids')
        assert seq is not None
        made = [r["made"] for r in await conn.fetch(f'SELECT made FROM "{schema}".schedules ORDER BY alias')]
    finally:
        await conn.close()
    return int(seq["last_value"]) + (1 if seq["is_called"] else 0), made


async def test_the_next_event_id_moves_a_trillion_on_and_every_schedule_is_marked(
    platform: Platform, fresh_db: str
) -> None:
    session_id, last = await written(platform)

    code, out, err = await run_restored("--database-url", fresh_db)

    assert code == 0, err
    assert f"event ids    the next was {last + 1}, now {last + 1 + EVENT_ID_JUMP}" in out, out
    assert "schedules    2 marked to be made again" in out, out
    assert err == ""
    assert await state(fresh_db) == (last + 1 + EVENT_ID_JUMP, [False, False])
    after = await platform.command(
        {"command": "write_object", "session_id": session_id, "alias": "docs/after", "value": {"type": "doc"}}
    )
    assert after["event_id"] == last + 1 + EVENT_ID_JUMP


async def test_temporal_only_marks_the_schedules_and_leaves_the_event_ids(platform: Platform, fresh_db: str) -> None:
    """Temporal restored empty, PostgreSQL kept: the database is the settings' own (no --database-url)."""
    session_id, last = await written(platform)

    code, out, err = await run_restored("--temporal-only", ORCHESTRATOR_DATABASE_URL=fresh_db)

    assert code == 0, err
    assert f"event ids    left as they were (--temporal-only): the next is {last + 1}" in out, out
    assert "schedules    2 marked" in out, out
    assert await state(fresh_db) == (last + 1, [False, False])
    after = await platform.command(
        {"command": "write_object", "session_id": session_id, "alias": "docs/after", "value": {"type": "doc"}}
    )
    assert after["event_id"] == last + 1


@pytest.fixture
async def empty_db(embedded_pg: EmbeddedPostgres) -> AsyncIterator[str]:
    async with scratch_database(embedded_pg, "unmigrated") as url:
        yield url


async def test_a_database_never_migrated_is_refused_and_left_as_it_was(empty_db: str) -> None:
    code, out, err = await run_restored("--database-url", empty_db)

    assert (code, out) == (2, ""), err
    name = urlsplit(empty_db).path.lstrip("/")
    assert f"the database {name!r}" in err and "has no schema 'orchestrator'" in err, err
    assert "nothing was changed" in err and "Traceback" not in err, err
    assert await _value(empty_db, "SELECT to_regnamespace('orchestrator')") is None


async def test_a_schema_of_the_platforms_name_that_is_not_its_is_refused(empty_db: str) -> None:
    conn = await asyncpg.connect(empty_db)
    try:
        await conn.execute("CREATE SCHEMA orchestrator; CREATE TABLE orchestrator.schedules (made boolean)")
        await conn.execute("INSERT INTO orchestrator.schedules VALUES (true)")
    finally:
        await conn.close()

    code, _, err = await run_restored("--database-url", empty_db)

    assert code == 2, err
    assert "has a schema 'orchestrator' with no schema_migrations, event_ids" in err, err
    assert await _value(empty_db, "SELECT made FROM orchestrator.schedules") is True


async def test_a_database_that_does_not_exist_is_named(embedded_pg: EmbeddedPostgres) -> None:
    code, _, err = await run_restored("--database-url", embedded_pg.url_for("restored_nowhere"))

    assert code == 2, err
    assert '"restored_nowhere" does not exist' in err and "Traceback" not in err, err


async def test_no_database_named_is_bad_usage() -> None:
    code, _, err = await run_restored()

    assert code == 2
    assert "--database-url" in err and "ORCHESTRATOR_DATABASE_URL" in err, err


async def test_a_platform_database_read_in_another_schema_is_refused_unchanged(
    platform: Platform, fresh_db: str
) -> None:
    _, last = await written(platform)

    code, _, err = await run_restored("--database-url", fresh_db, ORCHESTRATOR_DATABASE_SCHEMA="elsewhere")

    assert code == 2, err
    assert "has no schema 'elsewhere'" in err and "ORCHESTRATOR_DATABASE_SCHEMA" in err, err
    assert await state(fresh_db) == (last + 1, [True, True])


@pytest.mark.parametrize(
    "schema",
    [
        'orchestrator"; UPDATE orchestrator.schedules SET made = false; --',
        "orchestrator.schedules SET made = false; --",
        "Orchestrator",
        "pg_catalog",
    ],
)
async def test_a_schema_name_that_is_not_plain_never_reaches_the_database(
    platform: Platform, fresh_db: str, schema: str
) -> None:
    _, last = await written(platform)

    code, out, err = await run_restored("--database-url", fresh_db, ORCHESTRATOR_DATABASE_SCHEMA=schema)

    assert (code, out) == (2, ""), err
    assert "DATABASE_SCHEMA" in err and "Traceback" not in err, err
    assert await state(fresh_db) == (last + 1, [True, True])


async def test_a_schema_named_by_a_reserved_word_is_quoted(platform_elsewhere: Platform, elsewhere_db: str) -> None:
    """`user` is a reserved word: spliced unquoted, the statements would not parse."""
    _, last = await written_elsewhere(platform_elsewhere)

    code, out, err = await run_restored("--database-url", elsewhere_db, ORCHESTRATOR_DATABASE_SCHEMA=OTHER_SCHEMA)

    assert code == 0, err
    assert f"schema {OTHER_SCHEMA}" in out and f"now {last + 1 + EVENT_ID_JUMP}" in out, out
    assert await state(elsewhere_db, OTHER_SCHEMA) == (last + 1 + EVENT_ID_JUMP, [False])


async def written_elsewhere(platform: Platform) -> tuple[str, int]:
    """`written` in the platform's other schema: a session with an event, and one schedule made."""
    reply = await platform.command({"command": "open_session"})
    session_id = reply["session"]["id"]
    reply = await platform.command(
        {"command": "write_object", "session_id": session_id, "alias": "docs/1", "value": {"type": "doc"}}
    )
    async with platform.store.pool.acquire() as conn:
        # The store's connections move `orchestrator.` to the platform's schema.
        await conn.execute(
            "INSERT INTO orchestrator.schedules (session_id, alias, schedule_id, body, enabled, made)"
            " VALUES ($1, 'clocks/1', $2, '{}'::jsonb, true, true)",
            session_id,
            f"sch_{uuid.uuid4().hex}",
        )
    return session_id, int(reply["event_id"])


@pytest.fixture
async def restorer(fresh_db: str) -> AsyncIterator[str]:
    """The URL of `fresh_db` for a role that may mark the schedules but not touch the event sequence."""
    role = f"restorer_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(fresh_db)
    await admin.execute(
        f"CREATE ROLE {role} LOGIN; GRANT USAGE ON SCHEMA orchestrator TO {role};"
        f" GRANT SELECT, UPDATE ON orchestrator.schedules TO {role}"
    )
    try:
        parts = urlsplit(fresh_db)
        yield urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname or ''}"))
    finally:
        await admin.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")
        await admin.close()


async def test_a_statement_refused_midway_leaves_the_schedules_as_they_were(
    platform: Platform, fresh_db: str, restorer: str
) -> None:
    """The schedules are marked first and the sequence moved last: the sequence refused, the marks roll back."""
    _, last = await written(platform)

    code, out, err = await run_restored("--database-url", restorer)

    assert (code, out) == (1, ""), err
    assert "event_ids" in err and "nothing was changed" in err and "Traceback" not in err, err
    assert await state(fresh_db) == (last + 1, [True, True])
