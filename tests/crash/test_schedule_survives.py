"""A schedule's firing waits for the run it started (timers and a local activity on the run's record, no PostgreSQL
record of the wait itself): its worker SIGKILLed while it waits, the next worker replays the firing, which goes on
waiting; the schedule's runs go on, one after another, never two at once, each run ended once."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import asyncpg
import pytest

from orchestrator.config import Settings
from orchestrator.core.limits import Limits
from orchestrator.platform import Platform
from tests.crash.conftest import DevServer, temporal_client

pytestmark = pytest.mark.devserver

# Every second, a run of 3 s: a kill while a run sleeps lands while its firing waits for it.
RUN_SECONDS = 3.0
WITHIN_SECONDS = 90.0


async def _runs(database_url: str, session_id: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(database_url)
    try:
        return list(
            await conn.fetch(
                "SELECT execution_id, started_at, ended_at, start_pid, end_pid FROM crash_runs"
                " WHERE session_id = $1 ORDER BY started_at",
                session_id,
            )
        )
    finally:
        await conn.close()


async def _until(database_url: str, session_id: str, enough: Any, what: str) -> list[asyncpg.Record]:
    deadline = time.monotonic() + WITHIN_SECONDS
    while True:
        runs = await _runs(database_url, session_id)
        if enough(runs):
            return runs
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {WITHIN_SECONDS:.0f} s; runs: {[dict(r) for r in runs]}")
        await asyncio.sleep(0.2)


async def test_a_firing_waiting_for_its_run_when_its_worker_is_killed_goes_on_waiting_in_the_next(
    crash_db: str, temporal_server: DevServer, workers_for: Any
) -> None:
    workers = workers_for(crash_db, temporal_server.address)
    first = await workers.start()
    temporal = await temporal_client(temporal_server.address)
    settings = Settings(
        database_url=None,
        temporal_address=temporal_server.address,
        task_queue=workers.task_queue,
        limits=Limits(activation_delay_seconds=0),
    )
    platform = await Platform.connect(settings, crash_db, temporal)
    try:
        sid = (await platform.command({"command": "open_session"}))["session"]["id"]
        created = await platform.command(
            {
                "command": "create_schedule",
                "session_id": sid,
                "alias": "slow",
                "repeat": {"type": "interval", "every_seconds": 1},
                "invocation_target_type": "workflow",
                "target": {"workflow": "tracked", "input": {"sleep": RUN_SECONDS}},
            }
        )
        assert created["status"] == "success", created

        in_flight = await _until(
            crash_db, sid, lambda runs: any(r["ended_at"] is None for r in runs), "a run of the schedule in flight"
        )
        caught = next(r["execution_id"] for r in in_flight if r["ended_at"] is None)
        await workers.kill(first)
        await asyncio.sleep(1.0)
        second = await workers.start()

        # The run caught by the kill ends, and the schedule goes on past it: two more runs, started and ended.
        def went_on(runs: list[asyncpg.Record]) -> bool:
            ended = [r for r in runs if r["ended_at"] is not None]
            return any(r["execution_id"] == caught for r in ended) and len(ended) >= len(in_flight) + 2

        runs = await _until(crash_db, sid, went_on, "the schedule's runs to go on after the kill")
        deleted = await platform.command({"command": "delete_schedule", "session_id": sid, "alias": "slow"})
        assert deleted["status"] == "success", deleted
    finally:
        await platform.close()

    ended = [r for r in runs if r["ended_at"] is not None]
    for earlier, later in itertools.pairwise(ended):
        assert earlier["ended_at"] <= later["started_at"], f"{later['execution_id']} started beside the run before"
    assert any(r["start_pid"] == second.pid for r in runs), "no run started in the worker after the kill"
    # Each ended run's end recorded once, as completed, whichever worker recorded it (the record follows the run's
    # last activity by a workflow task: waited for).
    deadline = time.monotonic() + WITHIN_SECONDS
    while True:
        ends = await _ends(crash_db, sid)
        recorded = {run["execution_id"]: ends.get(run["execution_id"]) for run in ended}
        if all(end is not None and end[0] != "running" for end in recorded.values()) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    assert all(end == ("completed", 1) for end in recorded.values()), recorded


async def _ends(database_url: str, session_id: str) -> dict[str, tuple[str, int]]:
    """Per execution of the session: its recorded status and how many `execution.ended` events it has."""
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch(
            "SELECT x.id, x.status, (SELECT count(*) FROM orchestrator.events e WHERE e.session_id = x.session_id"
            " AND e.type = 'execution.ended' AND e.execution ->> 'id' = x.id) AS ends"
            " FROM orchestrator.executions x WHERE x.session_id = $1",
            session_id,
        )
        return {r["id"]: (r["status"], int(r["ends"])) for r in rows}
    finally:
        await conn.close()
