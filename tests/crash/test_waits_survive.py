"""Runs that wait survive their worker and Temporal: a worker SIGKILLed while a hundred runs wait, Temporal's server
SIGKILLed and started again, the events they wait for written while no worker runs, the next worker dead right
after its routing round answered the waits and before it told any run (`route.saved`), and a third started;
every run hears its event, once."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
import pytest

from orchestrator.crossings import FAULTS_VARIABLE, KILLED_STATUS
from orchestrator.platform import Platform
from tests.crash.conftest import DevServer

pytestmark = pytest.mark.devserver

RUNS = 100
WITHIN_SECONDS = 120.0
# A keyed lane per ask, all of them running at once.
WIDE = {"ORCHESTRATOR_LIMITS__LISTENER_PARALLEL_RUNS": str(RUNS)}


async def _count(database_url: str, sql: str) -> int:
    conn = await asyncpg.connect(database_url)
    try:
        return int(await conn.fetchval(sql))
    finally:
        await conn.close()


async def _until(database_url: str, sql: str, want: int, what: str) -> None:
    deadline = time.monotonic() + WITHIN_SECONDS
    while (found := await _count(database_url, sql)) < want:
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: {found} of {want} within {WITHIN_SECONDS:.0f} s")
        await asyncio.sleep(0.5)


async def test_a_hundred_waiting_runs_hear_their_events_once_across_a_worker_kill(
    crash_db: str, writer: Platform, temporal_server: DevServer, workers_for: Any
) -> None:
    workers = workers_for(crash_db, temporal_server.address)
    listener = {
        "name": "asks",
        "filter": {"types": ["object.written"], "aliases": ["asks/*"]},
        "concurrency": {"mode": "keyed", "key": "alias", "max_parallel": RUNS},
        "batch": {"max_events": 1},
        "action": {"type": "workflow", "workflow": "waiter"},
    }
    worker = await workers.start(WIDE)
    assert (await writer.command({"command": "save_listener", "listener": listener}))["status"] == "success"
    sid = (await writer.command({"command": "open_session"}))["session"]["id"]
    for n in range(RUNS):
        await writer.command(
            {"command": "write_object", "session_id": sid, "alias": f"asks/{n}", "value": {"type": "ask"}}
        )
    open_waits = "SELECT count(*) FROM orchestrator.run_waits WHERE state = 'open'"
    await _until(crash_db, open_waits, RUNS, "runs waiting")

    await workers.kill(worker)
    await temporal_server.kill()
    await temporal_server.start_again()
    replies = {}
    for n in range(RUNS):
        reply = await writer.command(
            {"command": "write_object", "session_id": sid, "alias": f"asks/{n}/reply", "value": {"type": "reply"}}
        )
        replies[f"asks/{n}"] = reply["event_id"]
    try:
        dying = await workers.start({**WIDE, FAULTS_VARIABLE: "route.saved@1"})
        await asyncio.to_thread(dying.process.wait, 60)
        assert dying.process.returncode in (KILLED_STATUS, -9), dying.log_tail()
    except AssertionError as err:  # it may die before it is seen ready
        assert f"exited with {KILLED_STATUS}" in str(err), err
    answered = "SELECT count(*) FROM orchestrator.run_waits WHERE state = 'answered' AND told_at IS NULL"
    assert await _count(crash_db, answered) == RUNS, "the round answered every wait, and no run was told"
    await workers.start(WIDE)

    await _until(crash_db, "SELECT count(*) FROM crash_waits", RUNS, "runs that heard their reply")
    conn = await asyncpg.connect(crash_db)
    try:
        rows = await conn.fetch("SELECT lane, matched, event_ids, answers FROM crash_waits")
    finally:
        await conn.close()
    assert {r["lane"]: (r["matched"], list(r["event_ids"])) for r in rows} == {
        lane: (0, [event_id]) for lane, event_id in replies.items()
    }
    assert all(r["answers"] == 1 for r in rows), "each run heard once"
    # The replies took no run of `asks` of their own: they were the waits'.
    assert await _count(crash_db, "SELECT count(*) FROM orchestrator.executions") == RUNS
