"""The bearer token: every /v1 request needs it when one is set; a refused request changes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from orchestrator.client import Client
from orchestrator.config import Settings
from orchestrator.core.errors import CommandError
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform

TOKEN = "s3cret-token"
WRONG = "not-the-token"


@pytest.fixture
async def api_url(platform: Platform, settings: Settings) -> AsyncIterator[str]:
    guarded = settings.model_copy(update={"api_token": SecretStr(TOKEN)})
    async with serve_api(create_app(platform, guarded), "127.0.0.1", 0) as url:
        yield url


async def post(url: str, body: dict[str, Any], authorization: str | None) -> httpx.Response:
    headers = {"Authorization": authorization} if authorization is not None else {}
    async with httpx.AsyncClient(base_url=url) as http:
        return await http.post("/v1/commands", json=body, headers=headers)


async def test_no_token_is_401(api_url: str) -> None:
    response = await post(api_url, {"command": "list_listeners"}, None)

    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["status"] == "error"
    assert response.json()["error"] == "unauthorized"
    message = response.json()["message"]
    assert "--token" in message and "ORCHESTRATOR_API_TOKEN" in message and "--local" in message, "how to get in"


@pytest.mark.parametrize("authorization", [f"Bearer {WRONG}", f"Basic {TOKEN}", "Bearer", f"Bearer {TOKEN}x"])
async def test_a_wrong_token_is_401_and_never_echoed(api_url: str, authorization: str) -> None:
    """RFC 6750: a bearer token that is not valid is 401, its challenge saying so."""
    response = await post(api_url, {"command": "list_listeners"}, authorization)

    assert response.status_code == 401
    presented = authorization.startswith("Bearer ")  # a bearer token that is there and wrong
    expected = 'Bearer error="invalid_token"' if presented else "Bearer"
    assert response.headers["www-authenticate"] == expected
    assert response.json()["error"] == "unauthorized"
    assert WRONG not in response.text
    assert TOKEN not in response.text


async def test_the_right_token_is_200(api_url: str) -> None:
    response = await post(api_url, {"command": "list_listeners"}, f"Bearer {TOKEN}")

    assert response.status_code == 200
    assert response.json()["status"] == "success"


async def test_an_unauthorized_write_changes_nothing(api_url: str) -> None:
    async with Client.http(api_url, token=TOKEN) as client:
        session_id = (await client.open_session())["session"]["id"]
        write = {
            "command": "write_object",
            "session_id": session_id,
            "alias": "guarded/one",
            "value": {"type": "t"},
        }

        for authorization in (None, f"Bearer {WRONG}"):
            assert (await post(api_url, write, authorization)).status_code in (401, 403)

        assert (await client.list_session_events(session_id))["events"] == []
        with pytest.raises(CommandError) as caught:
            await client.read_object(session_id, "guarded/one")
        assert caught.value.code == "not_found"


async def test_the_probes_need_no_token(api_url: str) -> None:
    async with httpx.AsyncClient(base_url=api_url) as http:
        assert (await http.get("/healthz")).status_code == 200
        assert (await http.get("/readyz")).json() == {"status": "ready"}


@pytest.mark.parametrize("first", [f"Bearer {TOKEN}", f"Bearer {WRONG}"])
async def test_an_authorization_header_given_twice_is_refused_whichever_comes_first(api_url: str, first: str) -> None:
    """Two `Authorization` headers: which one is meant? The first was taken, so a request whose proxy in front read
    (or added) the other one acted as a key the proxy never saw. Neither is taken, and nothing is written."""
    second = f"Bearer {WRONG}" if first.endswith(TOKEN) else f"Bearer {TOKEN}"
    async with Client.http(api_url, token=TOKEN) as client:
        session_id = (await client.open_session())["session"]["id"]
        write = {"command": "write_object", "session_id": session_id, "alias": "a/b", "value": {"type": "t"}}
        async with httpx.AsyncClient(base_url=api_url) as http:
            headers = [("Authorization", first), ("Authorization", second)]
            response = await http.post("/v1/commands", json=write, headers=headers)
            stream = await http.get(f"/v1/sessions/{session_id}/stream", headers=headers)
        refusal = {
            "status": "error",
            "error": "invalid_request",
            "message": "authorization: given 2 times; send one bearer token",
        }
        assert (response.status_code, response.json()) == (400, refusal)
        assert (stream.status_code, stream.json()) == (400, refusal)
        assert (await client.list_session_events(session_id))["events"] == []


async def test_a_token_set_with_a_line_end_after_it_is_the_token(platform: Platform, settings: Settings) -> None:
    """A token read from a file keeps its line end; no request can present one (a header's value is read without
    the whitespace around it), so the API it closed answered every request 401."""
    guarded = settings.model_copy(update={"api_token": SecretStr(TOKEN + "\n")})
    async with serve_api(create_app(platform, guarded), "127.0.0.1", 0) as url:
        assert (await post(url, {"command": "list_listeners"}, f"Bearer {TOKEN}")).status_code == 200
        assert (await post(url, {"command": "list_listeners"}, None)).status_code == 401
