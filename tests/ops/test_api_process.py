"""`orchestrator api` stops within its bound on SIGTERM (how Kubernetes stops a replica), whatever its clients
do: ten readers hold streams open, one more holds a stream and never reads, one keeps a connection alive; the
Python client's stream and `orchestrator events --follow --exit-on-disconnect` end on the server's last message,
the CLI saying the API is out of reach; without the flag `--follow` waits out a restart and resumes where it was."""

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

from orchestrator.client import Client
from orchestrator.dev.embedded import free_port
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
        follower = await asyncio.create_subprocess_exec(
            ORCHESTRATOR, "events", "--session", session_id, "--follow", "--exit-on-disconnect", "--url", url,
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert follower.stdout is not None
        async with asyncio.timeout(START_SECONDS):  # caught up, so following the stream when the API stops
            while b"a/49" not in (line := await follower.stdout.readline()):
                assert line, "the follower ended early"
        client = Client.http(url)
        followed = asyncio.create_task(_batches(client, session_id))
        # A client that asks for the whole stream and never reads a byte of it.
        stalled.connect(("127.0.0.1", port))
        stalled.sendall(
            f"GET /v1/sessions/{session_id}/stream?after=0 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        )
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
    # The Python client's stream ends at the last message, which is no batch.
    batches = await asyncio.wait_for(followed, 5)
    await client.aclose()
    assert batches and all("events" in b for b in batches), batches
    _, err = await asyncio.wait_for(follower.communicate(), START_SECONDS)
    assert follower.returncode == 3, err.decode()  # out of reach, as when the API was never there
    assert b"cannot reach the API" in err and b"Traceback" not in err, err.decode()


async def _batches(client: Client, session_id: str) -> list[dict[str, object]]:
    return [batch async for batch in client.stream(session_id, after=0)]


async def test_events_follow_waits_out_a_restart_and_resumes_where_it_was(
    fresh_db: str, dev_env: WorkflowEnvironment
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = platform_env(fresh_db, dev_env, ORCHESTRATOR_SHUTDOWN_SECONDS=str(BOUND_SECONDS))
    api = await _start_api(port, env)
    async with httpx.AsyncClient(base_url=url) as http:
        session_id = (await http.post("/v1/commands", json={"command": "open_session"})).json()["session"]["id"]
        await _write(http, session_id, [f"before/{i}" for i in range(3)])
    follower = await asyncio.create_subprocess_exec(
        ORCHESTRATOR, "events", "--session", session_id, "--follow", "--url", url,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert follower.stdout is not None and follower.stderr is not None
    try:
        await _read_until(follower.stdout, b"before/2")
        api.send_signal(signal.SIGTERM)
        await asyncio.wait_for(api.communicate(), START_SECONDS)
        assert b"lost the API" in await _read_until(follower.stderr, b"reconnecting")
        await asyncio.sleep(2)  # down a while: the follower keeps asking
        assert follower.returncode is None, "the follower gave up while the API was down"
        api = await _start_api(port, env)
        async with httpx.AsyncClient(base_url=url) as http:
            await _write(http, session_id, ["after/0"])
        await _read_until(follower.stderr, b"reconnected")
        printed = await _read_until(follower.stdout, b"after/0")
        assert b"before/" not in printed, "events printed before the restart were printed again"
    finally:
        if follower.returncode is None:
            follower.send_signal(signal.SIGINT)
        api.send_signal(signal.SIGTERM)
        await asyncio.wait_for(api.communicate(), START_SECONDS)
    _, err = await asyncio.wait_for(follower.communicate(), START_SECONDS)
    assert follower.returncode == 130, err.decode()  # Ctrl-C is the only way it ends


async def _start_api(port: int, env: dict[str, str]) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        ORCHESTRATOR, "api", "--http-port", str(port),
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert process.stdout is not None
    await _read_until(process.stdout, b"Ready.")
    return process


async def _write(http: httpx.AsyncClient, session_id: str, aliases: list[str]) -> None:
    for alias in aliases:
        body = {"command": "write_object", "session_id": session_id, "alias": alias, "value": {"type": "t"}}
        assert (await http.post("/v1/commands", json=body)).json()["status"] == "success"


async def _read_until(stream: asyncio.StreamReader, marker: bytes) -> bytes:
    """What `stream` printed up to and including the first line holding `marker`."""
    seen = b""
    async with asyncio.timeout(START_SECONDS):
        while True:
            line = await stream.readline()
            assert line, f"ended before {marker!r}: {seen.decode()[-2000:]}"
            seen += line
            if marker in line:
                return seen
