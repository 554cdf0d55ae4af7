"""Fixtures for retention: the lane engine on the dev server, whose clock is the database's (a retention of
seconds passes in seconds), with the workers' own retention rounds held back so that each test runs the
rounds it asserts on (`retention_round`).

`rows_of_session` looks at every table the schema has, from information_schema, so a table added later is
covered: a row belongs to the session when its text names the session, or it names one of the session's
lanes, batches or events by id.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from orchestrator.config import Settings
from orchestrator.core.limits import Limits
from orchestrator.core.retention import Retention as RetentionSettings
from orchestrator.lanes.retention import Retention
from orchestrator.platform import Platform
from tests.engine.harness import Engine, running_engine

# Columns that name a session's rows by id rather than by the session.
ID_COLUMNS = ("lane_id", "batch_id", "event_id")


@pytest.fixture
def settings() -> Settings:
    return Settings(
        database_url=None,
        temporal_address=None,
        limits=Limits(activation_delay_seconds=0),
        run_check_seconds=2.0,
        # The workers' rounds run once at their start and then wait: the tests run theirs.
        retention=RetentionSettings(round_seconds=3600, rows_per_statement=50),
    )


@pytest.fixture
async def engine(platform: Platform, dev_env: WorkflowEnvironment) -> AsyncIterator[Engine]:
    async with running_engine(platform, dev_env.client) as running:
        yield running


async def retention_round(engine: Engine) -> int:
    """One worker's retention round, as the workers run it; answers the rows it deleted."""
    return await Retention(engine.platform.store, engine.client, engine.platform.settings).round()


async def session_ids(pool: asyncpg.Pool, session_id: str) -> dict[str, list[int]]:
    """The ids of the session's lanes, batches and events, for the tables that name rows by them."""
    return {
        "lane_id": [
            r["id"] for r in await pool.fetch("SELECT id FROM orchestrator.lanes WHERE session_id = $1", session_id)
        ],
        "batch_id": [
            r["id"] for r in await pool.fetch("SELECT id FROM orchestrator.batches WHERE session_id = $1", session_id)
        ],
        "event_id": [
            r["id"] for r in await pool.fetch("SELECT id FROM orchestrator.events WHERE session_id = $1", session_id)
        ],
    }


async def rows_of_session(pool: asyncpg.Pool, session_id: str, ids: dict[str, list[int]]) -> dict[str, int]:
    """Per table of the schema, the rows that belong to the session (tables with none left out)."""
    tables = await pool.fetch(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'orchestrator'"
        " AND table_type = 'BASE TABLE' ORDER BY table_name"
    )
    found: dict[str, int] = {}
    for table in (r["table_name"] for r in tables):
        columns = {
            r["column_name"]
            for r in await pool.fetch(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = 'orchestrator'"
                " AND table_name = $1",
                table,
            )
        }
        checks, args = ["strpos(t::text, $1) > 0"], [session_id]
        for column in ID_COLUMNS:
            if column in columns:
                args.append(ids[column])
                checks.append(f"t.{column} = ANY (${len(args)}::bigint[])")
        count = await pool.fetchval(f'SELECT count(*) FROM orchestrator."{table}" t WHERE {" OR ".join(checks)}', *args)
        if count:
            found[table] = int(count)
    return found


async def workflow_status(engine: Engine, workflow_id: str) -> WorkflowExecutionStatus | None:
    described = await engine.client.get_workflow_handle(workflow_id).describe()
    return described.status


async def schedule_exists(engine: Engine, schedule_id: str) -> bool:
    try:
        await engine.client.get_schedule_handle(schedule_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


async def reply(engine: Engine, command: str, **args: Any) -> dict[str, Any]:
    """A command's reply, an error included."""
    return await engine.platform.command({"command": command, **args})
