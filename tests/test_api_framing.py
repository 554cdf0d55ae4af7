"""The HTTP door's framing: status codes follow the reply's error code; bodies too large or not JSON."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import get_args

import httpx
import pytest

from orchestrator.config import Settings
from orchestrator.core.errors import ErrorCode
from orchestrator.dev.runtime import ApiServer, serve_api
from orchestrator.door.api import STATUS_BY_ERROR, create_app, status_for
from orchestrator.platform import Platform

MAX_BYTES = 4096


@pytest.fixture
async def http(platform: Platform, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    small = settings.model_copy(update={"max_request_bytes": MAX_BYTES})
    async with (
        serve_api(create_app(platform, small), "127.0.0.1", 0) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        yield client


async def test_a_body_that_is_not_json_is_400_naming_body(http: httpx.AsyncClient) -> None:
    for raw in (b"{not json", b'{"command": NaN}', b"\xff\xfe"):
        response = await http.post("/v1/commands", content=raw)

        assert response.status_code == 400
        reply = response.json()
        assert (reply["status"], reply["error"]) == ("error", "invalid_request")
        assert reply["message"].startswith("body:")


async def test_a_body_over_the_limit_is_413(http: httpx.AsyncClient) -> None:
    value = {"type": "t", "text": "x" * MAX_BYTES}
    response = await http.post(
        "/v1/commands", json={"command": "write_object", "session_id": "s", "alias": "a", "value": value}
    )

    assert response.status_code == 413
    assert response.json()["error"] == "limit_exceeded"
    assert response.json()["message"].startswith("body:")


async def test_a_streamed_body_over_the_limit_is_413_without_a_length(http: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(8):
            yield b" " * 1024

    response = await http.post("/v1/commands", content=chunks())

    assert response.status_code == 413


async def test_the_status_follows_the_error_code(http: httpx.AsyncClient) -> None:
    unknown_session = {"command": "read_object", "session_id": "ses_missing", "alias": "a/b"}
    assert (await http.post("/v1/commands", json=unknown_session)).status_code == 404
    assert (await http.post("/v1/commands", json={"command": "nope"})).status_code == 400
    assert (await http.post("/v1/commands", json={"command": "open_session"})).status_code == 200


def test_every_error_code_has_a_status() -> None:
    assert status_for({"status": "success"}) == 200
    assert status_for({"status": "error", "error": "rev_conflict"}) == 409
    assert status_for({"status": "error", "error": "limit_exceeded"}) == 422
    assert status_for({"status": "error", "error": "something_new"}) == 400
    assert set(get_args(ErrorCode)) <= set(STATUS_BY_ERROR)


async def test_accepted_connections_send_replies_at_once_without_waiting_for_an_ack(
    platform: Platform, settings: Settings
) -> None:
    """Nagle's algorithm off on every accepted socket: with it on, a keep-alive client waits for the
    delayed ACK (about 40 ms) on every request. asyncio sets TCP_NODELAY only on sockets whose protocol
    is IPPROTO_TCP, so the listening socket must be made with it."""
    app = create_app(platform, settings)
    server = ApiServer(app, "127.0.0.1", 0)
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url) as client:
            assert (await client.get("/healthz")).status_code == 200
            connections = list(server.connections())
            assert connections, "the server keeps the keep-alive connection open"
            for sock in connections:
                assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        await server.stop()
