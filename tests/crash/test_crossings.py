"""A worker that dies at a crossing between PostgreSQL and Temporal, and the workers after it recover what it left.

Each worker here is told to die (`ORCHESTRATOR_FAULTS`, an exit as SIGKILL's, nothing after the point runs) at
one crossing: a batch and its run recorded and the run not started (the window that lost 38 acknowledged
writes when the whole tree was killed: the sweep read the unstarted run as stopped); a run started and its
batch not finished; a run's end recorded and the lanes its slot went to not driven. The sweep looks at runs
every second here, so it meets an unstarted run before any lane's own retry does.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import asyncpg
import pytest
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.crossings import FAULTS_VARIABLE, KILLED_STATUS
from orchestrator.platform import Platform
from tests.crash.conftest import DevServer, WorkerProcess, Workers, Workload, explain_missing, settle, temporal_client

pytestmark = pytest.mark.devserver
log = logging.getLogger(__name__)

QUICK_SWEEP = {"ORCHESTRATOR_RUN_CHECK_SECONDS": "1"}
DEATH_SECONDS = 40.0


async def _dies(workers: Workers, worker: WorkerProcess, load: Workload) -> None:
    """Write until `worker` dies at its crossing; it must die there, as SIGKILL's status says."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEATH_SECONDS
    while worker.alive() and loop.time() < deadline:
        await load.burst(12)
        await asyncio.sleep(0.3)
    await asyncio.to_thread(worker.process.wait, 10)
    assert worker.process.returncode in (KILLED_STATUS, -9), worker.log_tail()
    assert "dying at crossing" in worker.log_path.read_text(), worker.log_tail()


async def _unstarted_runs(database_url: str, temporal: Any) -> list[str]:
    """Runs recorded with their batch still claimed that Temporal has never heard of."""
    conn = await asyncpg.connect(database_url)
    try:
        ids = [
            r["execution_id"]
            for r in await conn.fetch(
                "SELECT r.execution_id FROM orchestrator.lane_runs r JOIN orchestrator.batches b ON b.run_key ="
                " r.run_key AND b.retry = r.retry"
                " WHERE b.state = 'claimed'"
            )
        ]
    finally:
        await conn.close()
    unknown = []
    for execution_id in ids:
        try:
            await temporal.get_workflow_handle(execution_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                unknown.append(execution_id)
    return unknown


# Each worker in turn dies at one of these (the nth time it passes it); the last one lives.
DEATHS = ("batch.recorded@3", "run.started@2", "run_end.recorded@2", "batch.finished@4")


async def test_workers_dead_at_each_crossing_in_turn_lose_nothing_and_start_every_recorded_run(
    crash_db: str, writer: Platform, temporal_server: DevServer, workers_for: Any
) -> None:
    workers = workers_for(crash_db, temporal_server.address)
    temporal = await temporal_client(temporal_server.address)
    load = await Workload.begin(writer)
    unstarted: list[str] = []
    for death in DEATHS:
        dying = await workers.start({**QUICK_SWEEP, FAULTS_VARIABLE: death})
        await _dies(workers, dying, load)
        if death.startswith("batch.recorded"):
            unstarted = await _unstarted_runs(crash_db, temporal)
            assert unstarted, "the worker died after a batch's record: its run is recorded and not on Temporal"

    worker = await workers.start(QUICK_SWEEP)
    await load.burst(20)
    verdict = await settle(crash_db, watch=[worker])
    assert not verdict.missing, await explain_missing(crash_db, temporal, verdict)
    verdict.assert_sound()
    conn = await asyncpg.connect(crash_db)
    try:
        reached = {r["execution_id"] for r in await conn.fetch("SELECT execution_id FROM crash_runs")}
        stopped = await conn.fetchval("SELECT count(*) FROM orchestrator.executions WHERE status = 'stopped'")
    finally:
        await conn.close()
    assert set(unstarted) <= reached, f"runs recorded and never started that no app workflow ran: {unstarted}"
    assert stopped == 0, "no run was stopped: Temporal never said so of any"
    log.info("%d writes, %d workers died at crossings: %s", load.written, len(DEATHS), verdict.summary())
