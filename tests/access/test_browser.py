"""Browsers without long-lived secrets, over HTTP: signing in with a key answers an HttpOnly SameSite cookie,
whose commands need the session's CSRF token; a stream opens with a single-use ticket for one session; the
access log never carries a secret; every response forbids inline script."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from importlib import resources

import httpx
import pytest
from pydantic import SecretStr

from orchestrator.config import Settings
from orchestrator.core.key_secrets import csrf_of
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform
from tests.access.conftest import TOKEN, Api
from tests.engine.harness import eventually
from tests.test_streams import write

LIST = {"command": "list_listeners"}


async def sign_in(http: httpx.AsyncClient, secret: str) -> str:
    """Sign the client in with a key; answers the browser session's CSRF token."""
    reply = await http.post("/dashboard/sign-in", json={"key": secret})
    assert reply.status_code == 200, reply.text
    return str(reply.json()["csrf"])


async def test_signing_in_answers_an_httponly_samesite_cookie_and_commands_need_its_csrf_token(api: Api) -> None:
    secret = await api.key("viewer", ["read:**", "listen:**"])
    async with httpx.AsyncClient(base_url=api.url) as http:
        signed = await http.post("/dashboard/sign-in", json={"key": secret})
        csrf = signed.json()["csrf"]
        cookie = http.cookies["orchestrator_session"]
        [set_cookie] = [v for k, v in signed.headers.multi_items() if k == "set-cookie"]
        assert "HttpOnly" in set_cookie and "SameSite=strict" in set_cookie and "Max-Age=3600" in set_cookie
        assert secret not in set_cookie and secret not in signed.text and cookie not in (secret, csrf)
        assert csrf == csrf_of(cookie)

        assert (
            await http.post("/v1/commands", json=LIST, headers={"x-csrf-token": http_csrf(http)})
        ).status_code == 200
        for headers in ({}, {"x-csrf-token": "forged"}):
            refused = await http.post("/v1/commands", json=LIST, headers=headers)
            assert (refused.status_code, refused.json()["error"]) == (403, "unauthorized"), headers
        config = (await http.get("/dashboard/config")).json()
        assert config["signed_in"] == "viewer" and config["token_required"] and config["csrf"] == http_csrf(http)
        assert secret not in str(config)

        # A form another site's page could post is not JSON: refused before anything is read.
        form = await http.post("/dashboard/sign-in", data={"key": secret})
        assert form.status_code == 400
        wrong = await http.post("/dashboard/sign-in", json={"key": "ork_000000000000_" + "x" * 43})
        assert (wrong.status_code, wrong.json()["error"]) == (401, "unauthorized")

        out = await http.post("/dashboard/sign-out", json={}, headers={"x-csrf-token": http_csrf(http)})
        assert out.status_code == 200 and "orchestrator_session" not in http.cookies
        await asyncio.sleep(0.6)
        assert (await http.post("/v1/commands", json=LIST)).status_code == 401


def http_csrf(http: httpx.AsyncClient) -> str:
    return csrf_of(http.cookies["orchestrator_session"])


async def test_a_revoked_keys_browser_session_ends(api: Api) -> None:
    secret = await api.key("leaving", ["read:**"])
    async with httpx.AsyncClient(base_url=api.url) as http:
        csrf = await sign_in(http, secret)
        assert (await http.post("/v1/commands", json=LIST, headers={"x-csrf-token": csrf})).status_code == 200
        await api.admin.revoke_api_key("leaving")
        await asyncio.sleep(0.6)
        ended = await http.post("/v1/commands", json=LIST, headers={"x-csrf-token": csrf})
        assert (ended.status_code, ended.json()["error"]) == (401, "unauthorized")


async def test_a_stream_ticket_opens_one_stream_of_one_session_once(api: Api) -> None:
    secret = await api.key("listener", ["listen:**"])
    sid = (await api.admin.open_session(alias="watched"))["session"]["id"]
    other = (await api.admin.open_session(alias="other"))["session"]["id"]
    async with httpx.AsyncClient(base_url=api.url) as http:
        csrf = await sign_in(http, secret)
        # The session's cookie does not open a stream: the refusal says what does.
        cookie_only = await http.get(f"/v1/sessions/{sid}/stream")
        assert cookie_only.status_code == 401
        assert "a browser's single-use `ticket` (POST /v1/stream-tickets" in cookie_only.json()["message"]

        async def ticket(session_id: str) -> str:
            reply = await http.post(
                "/v1/stream-tickets", json={"session_id": session_id}, headers={"x-csrf-token": csrf}
            )
            assert reply.status_code == 200, reply.text
            assert reply.json()["expires_in"] == 30
            return str(reply.json()["ticket"])

        first = await ticket(sid)
        async with httpx.AsyncClient(base_url=api.url, timeout=10) as bare:
            async with bare.stream("GET", f"/v1/sessions/{sid}/stream?ticket={first}") as response:
                assert response.status_code == 200
                lines = response.aiter_lines()
                new = await write(api.platform, sid, "t/1")
                async for line in lines:
                    if line.startswith("data: "):
                        assert str(new) in line
                        break
            again = await bare.get(f"/v1/sessions/{sid}/stream?ticket={first}")
            assert (again.status_code, again.json()["error"]) == (401, "unauthorized"), "a ticket opens one stream"
            elsewhere = await bare.get(f"/v1/sessions/{other}/stream?ticket={await ticket(sid)}")
            assert elsewhere.status_code == 401, "a ticket is for the session it was asked for"
            no_cookie = await bare.post("/v1/stream-tickets", json={"session_id": sid})
            assert no_cookie.status_code == 401


async def test_a_head_of_a_stream_leaves_its_ticket_good_for_the_stream(api: Api) -> None:
    secret = await api.key("head-listener", ["listen:**"])
    sid = (await api.admin.open_session(alias="headed"))["session"]["id"]
    async with httpx.AsyncClient(base_url=api.url, timeout=10) as http:
        reply = await http.post(
            "/v1/stream-tickets", json={"session_id": sid}, headers={"Authorization": f"Bearer {secret}"}
        )
        ticket = reply.json()["ticket"]
        head = await http.head(f"/v1/sessions/{sid}/stream?ticket={ticket}")
        assert head.status_code == 200
        async with http.stream("GET", f"/v1/sessions/{sid}/stream?ticket={ticket}") as response:
            assert response.status_code == 200, "a HEAD opens no stream, so it spends no ticket"


async def test_a_stream_opening_past_its_deadline_leaves_its_ticket_good_and_says_so(
    platform: Platform, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream's opening uses its ticket up as its last step: one cut at its deadline before then answers that the
    ticket was not used, and a retry with it opens the stream; one cut as it used it says the ticket may be used
    up. Of two openings at once with one ticket, one opens."""
    quick = settings.model_copy(update={"api_token": SecretStr(TOKEN), "command_deadline_seconds": 1.0})
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        serve_api(create_app(platform, quick), "127.0.0.1", 0) as url,
        httpx.AsyncClient(base_url=url, headers=headers, timeout=10) as http,
        httpx.AsyncClient(base_url=url, timeout=10) as bare,
    ):
        sid = (await http.post("/v1/commands", json={"command": "open_session"})).json()["session"]["id"]

        async def ticket() -> str:
            reply = await http.post("/v1/stream-tickets", json={"session_id": sid})
            assert reply.status_code == 200, reply.text
            return str(reply.json()["ticket"])

        async def opened(ticket: str) -> int:
            async with bare.stream("GET", f"/v1/sessions/{sid}/stream?ticket={ticket}") as response:
                if response.status_code == 200:
                    assert await anext(response.aiter_lines()) == ": stream open"
                return response.status_code

        def slowly(method: str) -> None:
            """The store's `method` answers after the opening's deadline (a database slow to answer)."""
            answer = getattr(platform.store, method)

            async def slow(*args: object) -> object:
                await asyncio.sleep(5)
                return await answer(*args)

            monkeypatch.setattr(platform.store, method, slow)

        first = await ticket()
        slowly("session_end")  # the opening's last read before it uses the ticket up
        late = await bare.get(f"/v1/sessions/{sid}/stream?ticket={first}")
        assert late.status_code == 503, late.text
        said = late.json()["message"]
        assert said.endswith("nothing was changed and the ticket was not used; try again with it"), said
        monkeypatch.undo()
        assert await opened(first) == 200, "the ticket was still good"
        assert await opened(first) == 401, "and then used up"

        spent = await ticket()
        slowly("spend_ticket")
        late = await bare.get(f"/v1/sessions/{sid}/stream?ticket={spent}")
        assert late.status_code == 503, late.text
        said = late.json()["message"]
        assert said.endswith(
            "the ticket may have been used up; try again with it, and if it is refused, with a new one"
            " (POST /v1/stream-tickets)"
        ), said
        monkeypatch.undo()

        shared = await ticket()
        assert sorted(await asyncio.gather(opened(shared), opened(shared))) == [200, 401]


async def test_a_sign_out_past_its_deadline_says_the_session_may_have_ended(
    platform: Platform, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    quick = settings.model_copy(update={"api_token": SecretStr(TOKEN), "command_deadline_seconds": 1.0})
    app = create_app(platform, quick)
    async with serve_api(app, "127.0.0.1", 0) as url, httpx.AsyncClient(base_url=url, timeout=10) as http:
        csrf = {"x-csrf-token": await sign_in(http, TOKEN)}
        drop_pass = platform.store.drop_pass

        async def slow(digest: bytes) -> None:  # a database slow to answer as the session is ended
            await asyncio.sleep(5)
            await drop_pass(digest)

        monkeypatch.setattr(platform.store, "drop_pass", slow)
        late = await http.post("/dashboard/sign-out", headers=csrf)
        assert late.status_code == 503, late.text
        said = late.json()["message"]
        assert said.endswith("the browser session may have ended; try again (once it has, the answer is unauthorized)")
        monkeypatch.undo()

        async def all_ended() -> bool:
            return app.state.deadlines.unfinished == 0

        # Cut before its statement was sent: the session goes on.
        await eventually(all_ended, within=10, what="the late sign-out was cut")
        out = await http.post("/dashboard/sign-out", headers=csrf)
        assert out.status_code == 200, out.text
        assert (await http.post("/dashboard/sign-out", headers=csrf)).status_code == 200, "no cookie: nothing to end"


async def test_the_access_log_never_carries_a_secret(api: Api, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="orchestrator.access")
    secret = await api.key("logged", ["read:**", "listen:**", "write:**"])
    sid = (await api.admin.open_session(alias="logged"))["session"]["id"]
    async with httpx.AsyncClient(base_url=api.url) as http:
        csrf = await sign_in(http, secret)
        cookie = http.cookies["orchestrator_session"]
        await http.post("/v1/commands", json=LIST, headers={"x-csrf-token": csrf})
        ticket = (
            await http.post("/v1/stream-tickets", json={"session_id": sid}, headers={"x-csrf-token": csrf})
        ).json()["ticket"]
        for query in (f"ticket={ticket}", f"access_token={secret}", f"access_token={TOKEN}&after=0"):
            async with http.stream("GET", f"/v1/sessions/{sid}/stream?{query}") as response:
                assert response.status_code == 200
                async for line in response.aiter_lines():
                    if line == ": stream open":
                        break
        await api.post(LIST, secret)
        await api.post(LIST, "ork_badbadbadbad_" + "y" * 43)
    lines = [r.getMessage() for r in caplog.records if r.name == "orchestrator.access"]
    assert len(lines) >= 8, lines
    logged = "\n".join(lines)
    for kept_out in (secret, TOKEN, cookie, csrf, ticket, "y" * 43):
        assert kept_out not in logged
    assert "ticket=***" in logged and "access_token=***" in logged and "after=0" in logged
    assert "key=logged" in logged and '"POST /v1/commands" 200' in logged


async def test_every_response_forbids_inline_script_and_the_page_has_none(api: Api) -> None:
    async with httpx.AsyncClient(base_url=api.url) as http:
        for path in ("/", "/dashboard/dashboard.js", "/dashboard/config", "/healthz"):
            policy = (await http.get(path)).headers["content-security-policy"]
            assert "script-src 'self'" in policy and "unsafe-inline" not in policy, path
            assert "frame-ancestors 'none'" in policy
        page = (await http.get("/")).text
    shipped = resources.files("orchestrator").joinpath("dashboard/index.html").read_text(encoding="utf-8")
    assert page == shipped
    assert page.count("<script") == page.count("<script src=") == 1
    assert not re.search(r"\son[a-z]+\s*=", page), "no inline event handlers either"


@pytest.mark.parametrize(
    ("session_id", "message"),
    [
        ("\x00", "session_id: a NUL character (\\u0000) cannot be stored"),
        ("ses_\ud800", "session_id: a lone surrogate (\\ud800 to \\udfff) cannot be stored"),
        (None, "session_id: must be a string"),
    ],
)
async def test_a_session_id_no_session_can_have_is_refused_a_ticket_and_a_stream(
    api: Api, session_id: str | None, message: str
) -> None:
    """As /v1/commands refuses it, for a key that needs the session's alias to decide."""
    secret = await api.key("listener", ["listen:**"])
    refusal = {"status": "error", "error": "invalid_request", "message": message}
    async with httpx.AsyncClient(base_url=api.url) as http:
        csrf = await sign_in(http, secret)
        body = json.dumps({"session_id": session_id}).encode()  # an escaped surrogate, as a browser sends it
        headers = {"x-csrf-token": csrf, "content-type": "application/json"}
        ticket = await http.post("/v1/stream-tickets", content=body, headers=headers)
        assert (ticket.status_code, ticket.json()) == (400, refusal), ticket.text
        if session_id == "\x00":
            stream = await http.get(f"/v1/sessions/%00/stream?access_token={secret}")
            assert (stream.status_code, stream.json()) == (400, refusal), stream.text


async def test_a_ticket_request_with_a_field_it_does_not_know_is_refused_as_a_command_is(api: Api) -> None:
    """A field the body does not know is refused, naming it, as `/v1/commands` refuses one, and no ticket is made;
    the document forbids it too."""
    secret = await api.key("listener", ["listen:**"])
    sid = (await api.admin.open_session(alias="asked"))["session"]["id"]
    async with httpx.AsyncClient(base_url=api.url) as http:
        csrf = await sign_in(http, secret)
        headers = {"x-csrf-token": csrf}
        command = await http.post("/v1/commands", json={**LIST, "x": 1}, headers=headers)
        ticket = await http.post("/v1/stream-tickets", json={"session_id": sid, "x": 1}, headers=headers)
        refusal = {"status": "error", "error": "invalid_request", "message": "x: is not known"}
        assert (command.status_code, command.json()) == (400, refusal), command.text
        assert (ticket.status_code, ticket.json()) == (400, refusal), ticket.text
        assert "ticket" not in ticket.json()
        document = (await http.get("/v1/openapi.json")).json()
    body = document["paths"]["/v1/stream-tickets"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["additionalProperties"] is False, body


async def passes_of(api: Api, key_name: str) -> int:
    async with api.platform.store.transaction() as conn:
        return int(await conn.fetchval("SELECT count(*) FROM orchestrator.key_passes WHERE key_name = $1", key_name))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        # An escaped lone surrogate, as a browser's JSON.stringify sends one: it answered 500.
        (b'{"key": "ork_000000000000_\\ud800"}', "key: a lone surrogate (\\ud800 to \\udfff) cannot be stored"),
        (b'{"key": "\\udfff"}', "key: a lone surrogate (\\ud800 to \\udfff) cannot be stored"),
        (b'{"key": "a\\u0000"}', "key: a NUL character (\\u0000) cannot be stored"),
    ],
)
async def test_a_sign_in_with_a_key_no_key_can_be_is_refused_naming_it(api: Api, body: bytes, message: str) -> None:
    async with httpx.AsyncClient(base_url=api.url) as http:
        reply = await http.post("/dashboard/sign-in", content=body, headers={"content-type": "application/json"})
    refusal = {"status": "error", "error": "invalid_request", "message": message}
    assert (reply.status_code, reply.json()) == (400, refusal)
    assert "orchestrator_session" not in reply.cookies


async def test_a_sign_in_with_a_field_it_does_not_know_is_refused_as_a_ticket_request_is(api: Api) -> None:
    secret = await api.key("viewer", ["read:**"])
    async with httpx.AsyncClient(base_url=api.url) as http:
        reply = await http.post("/dashboard/sign-in", json={"key": secret, "remember": True})
    refusal = {"status": "error", "error": "invalid_request", "message": "remember: is not known"}
    assert (reply.status_code, reply.json()) == (400, refusal), reply.text
    assert "orchestrator_session" not in reply.cookies and await passes_of(api, "viewer") == 0


async def test_a_sign_in_is_a_request_of_its_key_and_counts_against_its_rate(api: Api) -> None:
    """Each sign-in keeps a browser session for an hour: a key whose secret is in a page (a widget's) must not
    make them faster than its rate lets it make any request."""
    secret = await api.key("widget", ["read:**"], requests_per_second=0.01)
    async with httpx.AsyncClient(base_url=api.url) as http:
        replies = [await http.post("/dashboard/sign-in", json={"key": secret}) for _ in range(5)]
    served = [r for r in replies if r.status_code == 200]
    refused = [r for r in replies if r.status_code == 429]
    # A bucket of one request, refilled in 100 s.
    assert (len(served), len(refused)) == (1, 4), [r.text for r in replies]
    for reply in refused:
        assert reply.json()["error"] == "rate_limited" and int(reply.headers["retry-after"]) >= 1
        assert "orchestrator_session" not in reply.cookies
    assert await passes_of(api, "widget") == 1


@pytest.mark.parametrize("route", ["/dashboard/sign-in", "/v1/stream-tickets"])
async def test_a_small_body_nested_past_the_parsers_depth_is_refused_naming_it(api: Api, route: str) -> None:
    """Two thousand brackets fit the 4 KiB a sign-in or a ticket request may hold, and are past the JSON parser's
    depth: it answered 500."""
    body = b'{"key": ' + b"[" * 2000 + b"]" * 2000 + b"}"
    headers = {"content-type": "application/json", "authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=api.url) as http:
        reply = await http.post(route, content=body, headers=headers)
    refusal = {"status": "error", "error": "invalid_request", "message": "body: JSON nested deeper than 100 levels"}
    assert (reply.status_code, reply.json()) == (400, refusal), reply.text
