"""`orchestrator api` stops within its bound on SIGTERM (how Kubernetes stops a replica), whatever its clients
do: ten readers hold streams open, one more holds a stream and never reads, one keeps a connection alive."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
import time
from pathlib import Path

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from orchestrator.embedded import free_port
from tests.ops.conftest import platform_env
from tests.stream_clients import StreamClients

pytestmark = pytest.mark.devserver

ORCHESTRATOR = str(Path(sys.executable).parent / "orchestrator")
START_SECONDS = 30
BOUND_SECONDS = 4
STREAMS = 10


async def test_the_api_ends_open_streams_and_stops_within_its_bound_on_sigterm(
    fresh_db: str, dev_env: WorkflowEnvironment
) -> None:
    port = free_port()
    env = platform_env(fresh_db, dev_env, ORCHESTRATOR_SHUTDOWN_SECONDS=str(BOUND_SECONDS))
    process = await asyncio.create_subprocess_exec(
        ORCHESTRATOR,
        "api",
        "--http-port",
        str(port),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdout is not None
    url = f"http://127.0.0.1:{port}"
    stalled = socket.socket()
    try:
        async with asyncio.timeout(START_SECONDS):
            while b"Ready." not in (line := await process.stdout.readline()):
                assert line, "the API stopped while starting"
        async with httpx.AsyncClient(base_url=url) as http:
            reply = (await http.post("/v1/commands", json={"command": "open_session"})).json()
            session_id = reply["session"]["id"]
            for i in range(50):
                body = {"command": "write_object", "session_id": session_id, "alias": f"a/{i}", "value": {"type": "t"}}
                await http.post("/v1/commands", json=body)
        streams = StreamClients(url, session_id, STREAMS)
        await streams.open()
        # A client that asks for the whole stream and never reads a byte of it.
        stalled.connect(("127.0.0.1", port))
        stalled.sendall(f"GET /v1/sessions/{session_id}/stream?after=0 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await asyncio.sleep(0.5)
    finally:
        process.send_signal(signal.SIGTERM)
        stopping = time.monotonic()
        output, _ = await asyncio.wait_for(process.communicate(), START_SECONDS)
        stalled.close()
    took = time.monotonic() - stopping

    assert process.returncode == 0, output.decode()
    assert took < BOUND_SECONDS + 1, f"stopping took {took:.1f} s"
    for received in await streams.received():
        assert "event: shutdown" in received, received
