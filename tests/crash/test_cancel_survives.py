"""A `cancel_on` run that ignores its cancellation is terminated after its grace by a worker that dies right then,
before it records the end (`cancel.terminated`): the next worker's sweep finds the run terminated on Temporal and
records it `cancelled` (its cancel watch holds the event that asked), with one `execution.ended`; its key's slot
is free again and the run is not repeated, whatever its retry says."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus

from orchestrator.crossings import FAULTS_VARIABLE, KILLED_STATUS
from orchestrator.platform import Platform
from tests.crash.conftest import DevServer, temporal_client

pytestmark = pytest.mark.devserver

QUICK_SWEEP = {"ORCHESTRATOR_RUN_CHECK_SECONDS": "1"}
WITHIN_SECONDS = 60.0

LISTENER = {
    "name": "renders",
    "filter": {"types": ["object.written"], "aliases": ["docs/*"]},
    "concurrency": {"mode": "keyed", "key": "alias", "max_parallel": 4},
    "batch": {"max_events": 1},
    "action": {"type": "workflow", "workflow": "stubborn"},
    "retry": {"attempts": 3, "delay_seconds": 0.1},
    "cancel_on": [{"types": ["object.deleted"], "aliases": ["docs/*"], "key": "alias", "grace_seconds": 1}],
}


async def _until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + WITHIN_SECONDS
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {WITHIN_SECONDS:.0f} s")
        await asyncio.sleep(0.3)


async def test_a_run_terminated_after_its_grace_by_a_worker_that_dies_then_ends_cancelled_once(
    crash_db: str, writer: Platform, temporal_server: DevServer, workers_for: Any
) -> None:
    workers = workers_for(crash_db, temporal_server.address)
    dying = await workers.start({**QUICK_SWEEP, FAULTS_VARIABLE: "cancel.terminated@1"})
    assert (await writer.command({"command": "save_listener", "listener": LISTENER}))["status"] == "success"
    sid = (await writer.command({"command": "open_session"}))["session"]["id"]

    async def runs() -> list[dict[str, Any]]:
        reply = await writer.command({"command": "list_executions", "session_id": sid, "listener": "renders"})
        return list(reply["executions"])

    async def one_running() -> bool:
        return [r["status"] for r in await runs()] == ["running"]

    written = await writer.command(
        {"command": "write_object", "session_id": sid, "alias": "docs/a", "value": {"type": "doc", "n": 1}}
    )
    assert written["status"] == "success", written
    await _until(one_running, "the render running")
    [run] = await runs()
    deleted = await writer.command({"command": "delete_object", "session_id": sid, "alias": "docs/a"})
    assert deleted["status"] == "success", deleted

    await asyncio.to_thread(dying.process.wait, WITHIN_SECONDS)
    assert dying.process.returncode in (KILLED_STATUS, -9), dying.log_tail()
    assert "dying at crossing cancel.terminated" in dying.log_path.read_text(), dying.log_tail()
    temporal = await temporal_client(temporal_server.address)
    described = await temporal.get_workflow_handle(run["id"]).describe()
    assert described.status == WorkflowExecutionStatus.TERMINATED
    assert [r["status"] for r in await runs()] == ["running"], "the worker died before it recorded the end"

    await workers.start(QUICK_SWEEP)

    async def ended() -> bool:
        return [r["status"] for r in await runs()] != ["running"]

    await _until(ended, "the sweep to record the terminated run's end")
    [after] = await runs()
    assert after["status"] == "cancelled", after
    events = (await writer.command({"command": "list_session_events", "session_id": sid}))["events"]
    endings = [e for e in events if e["type"] == "execution.ended"]
    assert len(endings) == 1, endings
    assert endings[0]["execution"]["status"] == "cancelled", endings[0]
    assert endings[0]["cause"]["event"] == deleted["event_id"], "the event that asked is the cause"

    # The key's slot is free: the next write of it starts a run, and the cancelled one was not repeated.
    written = await writer.command(
        {"command": "write_object", "session_id": sid, "alias": "docs/a", "value": {"type": "doc", "n": 2}}
    )
    assert written["status"] == "success", written

    async def next_running() -> bool:
        return sorted(r["status"] for r in await runs()) == ["cancelled", "running"]

    await _until(next_running, "a run of the key's next write")
    await asyncio.sleep(1.5)
    assert len(await runs()) == 2, "a cancelled run is not repeated"
