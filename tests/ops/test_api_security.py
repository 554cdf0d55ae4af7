"""The HTTP surface's defaults beyond the token checks of tests/test_api_auth.py: it listens on loopback
unless told otherwise, reads no more than `max_request_bytes`, and never hands a secret back or to the logs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from orchestrator.cli import _parser
from orchestrator.config import Settings
from orchestrator.dev.runtime import ApiServer, Endpoints, describe, health_app, redact_url, serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform

TOKEN = "tok-3f9d2c81"
DB_PASSWORD = "pw-77c1e0"
LIMIT = 2048


@pytest.fixture
async def guarded(platform: Platform, settings: Settings) -> AsyncIterator[str]:
    strict = settings.model_copy(update={"api_token": SecretStr(TOKEN), "max_request_bytes": LIMIT})
    async with serve_api(create_app(platform, strict), "127.0.0.1", 0) as url:
        yield url


def _write(session_id: str, size: int) -> dict[str, Any]:
    return {
        "command": "write_object",
        "session_id": session_id,
        "alias": "big/one",
        "value": {"type": "t", "pad": "x" * size},
    }


def test_the_api_listens_on_loopback_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("ORCHESTRATOR_")]:
        monkeypatch.delenv(name)

    assert Settings().http_host == "127.0.0.1"
    assert _parser().parse_args(["api"]).host is None  # no flag: the setting's loopback default stands


async def test_a_server_on_the_default_host_is_bound_to_loopback_only(settings: Settings) -> None:
    server = ApiServer(health_app(), settings.http_host, 0)
    await server.start()
    try:
        assert server._socket is not None
        assert server._socket.getsockname()[0] == "127.0.0.1"
    finally:
        await server.stop()


async def test_the_worker_health_endpoint_answers(settings: Settings) -> None:
    async with serve_api(health_app(), settings.http_host, 0) as url, httpx.AsyncClient(base_url=url) as http:
        assert (await http.get("/healthz")).json() == {"status": "ok"}
        assert (await http.post("/v1/commands", json={"command": "list_listeners"})).status_code == 404


async def test_an_oversize_body_is_refused_with_413_and_changes_nothing(guarded: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=guarded, headers=headers) as http:
        session_id = (await http.post("/v1/commands", json={"command": "open_session"})).json()["session"]["id"]

        refused = await http.post("/v1/commands", json=_write(session_id, LIMIT))
        accepted = await http.post("/v1/commands", json=_write(session_id, LIMIT // 4))

        assert refused.status_code == 413
        assert refused.json()["error"] == "limit_exceeded"
        assert str(LIMIT) in refused.json()["message"]
        assert accepted.status_code == 200
        events = await http.post("/v1/commands", json={"command": "list_session_events", "session_id": session_id})
        assert len(events.json()["events"]) == 1


async def test_an_unauthorized_oversize_body_is_refused_before_it_is_read(guarded: str) -> None:
    async with httpx.AsyncClient(base_url=guarded) as http:
        response = await http.post("/v1/commands", content=b"{" + b" " * (LIMIT * 8) + b"}")

    assert response.status_code == 401


async def test_refusals_and_logs_never_carry_the_token(guarded: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    bodies = []
    async with httpx.AsyncClient(base_url=guarded) as http:
        for authorization in (f"Bearer {TOKEN}x", f"Basic {TOKEN}", f"bearer {TOKEN[:-1]}"):
            response = await http.post(
                "/v1/commands", json={"command": "list_listeners"}, headers={"Authorization": authorization}
            )
            assert response.status_code == 401
            bodies.append(response.text + str(response.headers))
        bad_json = await http.post("/v1/commands", content=b"{not json", headers={"Authorization": f"Bearer {TOKEN}"})
        bodies.append(bad_json.text)

    for text in [*bodies, caplog.text]:
        assert TOKEN not in text
        assert TOKEN[:-1] not in text


async def test_a_failure_inside_the_platform_is_answered_without_its_details(
    platform: Platform, guarded: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken() -> list[dict[str, Any]]:
        raise RuntimeError(f"connection to postgresql://app:{DB_PASSWORD}@db/app refused")

    monkeypatch.setattr(platform.store, "list_listeners", broken)
    async with httpx.AsyncClient(base_url=guarded, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        command = await http.post("/v1/commands", json={"command": "list_listeners"})
        ready = await http.get("/readyz")

    assert command.status_code == 500
    assert command.json() == {
        "status": "error",
        "error": "internal_error",
        "message": "the command failed inside the platform",
    }
    assert ready.status_code == 503
    assert DB_PASSWORD not in command.text + ready.text


def test_the_announced_database_url_hides_its_password(settings: Settings) -> None:
    url = f"postgresql://app:{DB_PASSWORD}@db.internal:5432/app?sslmode=require"
    lines = describe(Endpoints(url, "temporal:7233", "default", None, "http://127.0.0.1:8700"), settings)

    assert DB_PASSWORD not in "\n".join(lines)
    assert "postgresql://app:***@db.internal:5432/app?sslmode=require" in lines[0]
    assert redact_url("postgresql://postgres:@/postgres?host=/tmp") == "postgresql://postgres:@/postgres?host=/tmp"


def test_secret_settings_never_show_in_a_printed_or_dumped_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCHESTRATOR_API_TOKEN", TOKEN)
    monkeypatch.setenv("ORCHESTRATOR_TEMPORAL_API_KEY", "key-" + TOKEN)
    settings = Settings()
    for shown in (repr(settings), str(settings), settings.model_dump_json()):
        assert TOKEN not in shown
    assert settings.api_token is not None and settings.api_token.get_secret_value() == TOKEN


@pytest.fixture
async def open_api(platform: Platform, settings: Settings) -> AsyncIterator[str]:
    """The API as a first start leaves it: no token, no key, so nobody needs credentials."""
    async with serve_api(create_app(platform, settings), "127.0.0.1", 0) as url:
        yield url


async def _sessions(http: httpx.AsyncClient) -> int:
    return len((await http.post("/v1/commands", json={"command": "list_sessions"})).json()["sessions"])


async def test_the_open_api_refuses_what_a_page_of_another_origin_sends(open_api: str) -> None:
    """A page elsewhere may POST `text/plain` to any address with no preflight: while the API asks no credentials,
    such a request (its browser says where it comes from) is refused and writes nothing."""
    async with httpx.AsyncClient(base_url=open_api) as http:
        before = await _sessions(http)
        body = json.dumps({"command": "open_session"})
        for headers in (
            {"Origin": "https://attacker.example", "Content-Type": "text/plain"},
            {"Origin": "null", "Content-Type": "text/plain"},
            {"Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"},
        ):
            refused = await http.post("/v1/commands", content=body, headers=headers)
            assert refused.status_code == 403, refused.text
            assert refused.json()["error"] == "access_denied"
            assert refused.json()["message"].startswith("origin: ")
        assert await _sessions(http) == before
        # The API's own pages (the dashboard) send their own origin, and pass.
        own = await http.post("/v1/commands", content=body, headers={"Origin": open_api})
        assert own.status_code == 200, own.text
        assert await _sessions(http) == before + 1


async def test_a_token_is_not_refused_for_its_origin(guarded: str) -> None:
    """A bearer token is no page's to send by itself: a closed API answers it whatever the origin."""
    headers = {"Authorization": f"Bearer {TOKEN}", "Origin": "https://app.example"}
    async with httpx.AsyncClient(base_url=guarded, headers=headers) as http:
        assert (await http.post("/v1/commands", json={"command": "list_sessions"})).status_code == 200


async def test_the_open_api_on_loopback_refuses_another_hosts_name(open_api: str) -> None:
    """A page whose name was pointed at 127.0.0.1 (DNS rebinding) is its own origin there: its requests name its
    host, which a server listening on loopback alone refuses while the API asks no credentials."""
    async with httpx.AsyncClient(base_url=open_api) as http:
        before = await _sessions(http)
        port = open_api.rsplit(":", 1)[1]
        for name in ("rebound.example", "127.rebound.example"):
            refused = await http.post(
                "/v1/commands", json={"command": "open_session"}, headers={"Host": f"{name}:{port}"}
            )
            assert refused.status_code == 421, refused.text
            assert refused.json()["message"].startswith(f"host: {name!r}")
        assert await _sessions(http) == before
        for name in ("localhost", "127.0.0.1"):
            ok = await http.post("/v1/commands", json={"command": "list_sessions"}, headers={"Host": f"{name}:{port}"})
            assert ok.status_code == 200, ok.text


async def test_a_client_that_leaves_mid_body_is_no_error_of_the_platform(
    open_api: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A body cut off by its client (it promised more bytes and closed) is answered to nobody and logged as no
    failure: an error and a traceback a request would let anyone fill the log that says the platform failed."""
    caplog.set_level(logging.INFO)
    host, port = open_api.removeprefix("http://").split(":")
    for _ in range(3):
        _, writer = await asyncio.open_connection(host, int(port))
        writer.write(
            b"POST /v1/commands HTTP/1.1\r\nHost: " + f"{host}:{port}".encode() + b"\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n" + b'{"command": "open_'
        )
        await writer.drain()
        writer.close()
        await writer.wait_closed()
    async with httpx.AsyncClient(base_url=open_api) as http:
        await asyncio.sleep(0.3)
        assert (await http.post("/v1/commands", json={"command": "list_sessions"})).status_code == 200
    failures = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not failures, [r.getMessage() for r in failures]
