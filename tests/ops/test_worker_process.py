"""`orchestrator worker --health-port`: the probe the Kubernetes manifests use, and the stop on SIGTERM; and
`worker --app` of an app that makes its own tables.

The worker runs as the real console script against the dev server and a fresh database, as it does in a
pod: it answers `/healthz` once its servers answer, and SIGTERM drains it and exits 0.
"""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from pathlib import Path

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from orchestrator.platform import Platform
from tests.ops.conftest import platform_env

pytestmark = pytest.mark.devserver

ORCHESTRATOR = str(Path(sys.executable).parent / "orchestrator")
REPO = Path(__file__).resolve().parents[2]
# Start-up connects to both servers, migrates a fresh database and saves the example app's listeners.
START_SECONDS = 30


async def test_the_worker_serves_healthz_and_stops_cleanly_on_sigterm(
    fresh_db: str, dev_env: WorkflowEnvironment
) -> None:
    env = platform_env(fresh_db, dev_env, ORCHESTRATOR_WORKER_GRACEFUL_SHUTDOWN_SECONDS="5")
    process = await asyncio.create_subprocess_exec(
        ORCHESTRATOR,
        "worker",
        "--app",
        "examples.missions.app",
        "--health-port",
        "0",
        cwd=REPO,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    try:
        url = None
        async with asyncio.timeout(START_SECONDS):
            while url is None:
                line = (await process.stdout.readline()).decode()
                assert line, f"the worker stopped: {(await process.stderr.read()).decode()}"  # type: ignore[union-attr]
                found = re.match(r"health\s+(\S+)/healthz", line)
                url = found.group(1) if found else None
        assert url is not None and url.startswith("http://127.0.0.1:")  # loopback unless HTTP_HOST says otherwise
        async with httpx.AsyncClient(base_url=url) as http:
            assert (await http.get("/healthz")).json() == {"status": "ok"}
    finally:
        process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(process.wait(), START_SECONDS)
    assert code == 0


async def test_the_worker_runs_the_apps_migrate_then_applies_its_capture_on_the_table_it_made(
    fresh_db: str, dev_env: WorkflowEnvironment, platform: Platform
) -> None:
    """`worker --app` of the desk on a database without its table: the app's `migrate` makes it, then the plan
    captures it, before the worker says `Ready.`"""
    process = await asyncio.create_subprocess_exec(
        ORCHESTRATOR, "worker", "--app", "examples.desk.app", cwd=REPO, env=platform_env(fresh_db, dev_env),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    said: list[str] = []
    try:
        async with asyncio.timeout(START_SECONDS):
            while not said or not said[-1].startswith("Ready."):
                line = (await process.stdout.readline()).decode()
                assert line, f"the worker stopped: {''.join(said)}{(await process.stderr.read()).decode()}"
                said.append(line)
        assert said[0] == "migrate      examples.desk.app: running\n", said
        assert said[1].startswith("migrate      examples.desk.app: done in"), said
        assert "plan         add     capture public.tickets\n" in said
        [capture] = (await platform.command({"command": "list_captures"}))["captures"]
        assert capture["table"] == "public.tickets"
    finally:
        process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(process.wait(), START_SECONDS)
    assert code == 0
