"""API keys: created with scopes through every door, the secret answered once and only its digest kept, listed
without secrets, refused once revoked or expired (as a wrong token is), and the bootstrap token still admin."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from orchestrator.client import Client
from orchestrator.config import Settings
from orchestrator.core.errors import CommandError
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform
from tests.access.conftest import TOKEN, Api

CLI = str(Path(sys.executable).parent / "orchestrator")


async def cli(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        CLI, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode()


async def test_a_key_is_created_used_listed_and_revoked_through_the_python_client(api: Api) -> None:
    created = (await api.admin.create_api_key("reader", ["read:**"], requests_per_second=50))["key"]
    secret = created["secret"]
    assert created["name"] == "reader" and created["scopes"] == ["read:**"] and created["state"] == "active"
    assert created["requests_per_second"] == 50
    assert secret.startswith("ork_")

    async with api.as_key(secret) as reader:
        assert (await reader.list_listeners())["status"] == "success"
        with pytest.raises(CommandError) as denied:
            await reader.open_session(alias="not-mine")
        assert denied.value.code == "access_denied"

    listed = (await api.admin.list_api_keys())["keys"]
    assert [k["name"] for k in listed] == ["reader"]
    assert secret not in json.dumps(listed) and "secret" not in listed[0] and "hash" not in listed[0]

    revoked = (await api.admin.revoke_api_key("reader"))["key"]
    assert revoked["state"] == "revoked" and revoked["revoked_at"]
    await asyncio.sleep(1)
    refused = await api.post({"command": "list_listeners"}, secret)
    assert (refused.status_code, refused.json()["error"]) == (401, "unauthorized")
    assert secret not in refused.text


async def test_only_a_digest_of_the_secret_is_kept(api: Api) -> None:
    secret = await api.key("kept", ["admin"])
    async with api.platform.store.pool.acquire() as conn:
        rows = [dict(r) for r in await conn.fetch("SELECT * FROM orchestrator.api_keys")]
    dumped = repr(rows)
    # `ork_<id>_<random>`: the random part may itself hold `_`, so it is what follows the second one.
    prefix, _, random_part = secret.split("_", 2)
    assert (prefix, len(random_part)) == ("ork", 43), secret
    assert secret not in dumped and random_part not in dumped
    assert bytes(rows[0]["hash"]) == hashlib.sha256(secret.encode()).digest()


async def test_a_key_works_as_a_bearer_token_over_http_and_a_wrong_one_is_refused_as_before(api: Api) -> None:
    secret = await api.key("worker", ["write:**", "read:**"])
    ok = await api.post({"command": "open_session", "alias": "w"}, secret)
    assert ok.status_code == 200 and ok.json()["session"]["alias"] == "w"

    forged = secret[:-4] + ("AAAA" if not secret.endswith("AAAA") else "BBBB")
    for presented in (forged, "ork_000000000000_" + "x" * 43, "plainly-wrong"):
        wrong = await api.post({"command": "list_listeners"}, presented)
        assert (wrong.status_code, wrong.json()["error"]) == (401, "unauthorized")
    missing = await api.post({"command": "list_listeners"}, None)
    assert missing.status_code == 401


async def test_an_expired_key_is_refused_like_a_wrong_one(api: Api) -> None:
    soon = (datetime.now(UTC) + timedelta(seconds=1.5)).isoformat()
    secret = await api.key("brief", ["read:**"], expires_at=soon)
    assert (await api.post({"command": "list_listeners"}, secret)).status_code == 200
    await asyncio.sleep(2)
    late = await api.post({"command": "list_listeners"}, secret)
    assert (late.status_code, late.json()["error"]) == (401, "unauthorized")
    [listed] = (await api.admin.list_api_keys())["keys"]
    assert listed["state"] == "expired"


async def test_the_bootstrap_token_stays_an_admin_key(api: Api) -> None:
    reply = await api.post({"command": "create_api_key", "name": "made-by-bootstrap", "scopes": ["listeners"]}, TOKEN)
    assert reply.status_code == 200 and reply.json()["key"]["secret"]
    assert (await api.post({"command": "list_api_keys"}, TOKEN)).status_code == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "bad name", "scopes": ["admin"]}, "name"),
        ({"name": "bootstrap", "scopes": ["admin"]}, "name"),
        ({"name": "local", "scopes": ["admin"]}, "name"),
        ({"name": "Anonymous", "scopes": ["admin"]}, "name"),  # the open API's actor, in another case
        ({"name": "k", "scopes": []}, "scopes"),
        ({"name": "k", "scopes": ["root"]}, "scopes.0"),
        ({"name": "k", "scopes": ["admin", "write:a//b"]}, "scopes.1"),
        ({"name": "k", "scopes": ["emit:Not.A.Glob!"]}, "scopes.0"),
        ({"name": "k", "scopes": ["write:acme/**:"]}, "scopes.0"),
        ({"name": "k", "scopes": ["emit:chat.*:"]}, "scopes.0"),
        ({"name": "k", "scopes": ["read:**"], "requests_per_second": 0}, "requests_per_second"),
        ({"name": "k", "scopes": ["read:**"], "expires_at": "tomorrow"}, "expires_at"),
        ({"name": "k", "scopes": ["read:**"], "expires_at": "2030-01-01T00:00:00"}, "expires_at"),
        ({"name": "k", "scopes": ["read:**"], "expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
    ],
)
async def test_a_bad_key_is_refused_naming_the_field_and_nothing_is_made(
    api: Api, body: dict[str, object], field: str
) -> None:
    reply = await api.platform.command({"command": "create_api_key", **body})
    assert reply["status"] == "error" and reply["error"] == "invalid_request", reply
    assert reply["message"].startswith(field), reply
    assert (await api.platform.command({"command": "list_api_keys"}))["keys"] == []


async def test_a_name_is_never_reused_not_even_after_revoking(api: Api) -> None:
    await api.key("once", ["read:**"])
    await api.admin.revoke_api_key("once")
    again = await api.platform.command({"command": "create_api_key", "name": "once", "scopes": ["read:**"]})
    assert again["error"] == "invalid_request" and again["message"].startswith("name")
    missing = await api.platform.command({"command": "revoke_api_key", "name": "never-made"})
    assert missing["error"] == "not_found"


async def test_an_open_api_closes_once_a_key_exists(platform: Platform, settings: Settings) -> None:
    """No token and no key: open, as the embedded default. The first key closes it to requests without one."""
    async with (
        serve_api(create_app(platform, settings), "127.0.0.1", 0) as url,
        httpx.AsyncClient(base_url=url) as http,
    ):
        assert (await http.post("/v1/commands", json={"command": "list_listeners"})).status_code == 200
        made = await http.post("/v1/commands", json={"command": "create_api_key", "name": "a", "scopes": ["admin"]})
        secret = made.json()["key"]["secret"]
        await asyncio.sleep(1)
        assert (await http.post("/v1/commands", json={"command": "list_listeners"})).status_code == 401
        headers = {"Authorization": f"Bearer {secret}"}
        reply = await http.post("/v1/commands", json={"command": "list_listeners"}, headers=headers)
        assert reply.status_code == 200
        [warning] = made.json()["warnings"]
        assert "the API is no longer open" in warning and "admin key" in warning, warning


async def test_the_request_after_the_first_key_is_made_needs_a_key(platform: Platform, settings: Settings) -> None:
    """Closed at once by the door that made it, not once its cache of "no key yet" lapses."""
    async with (
        serve_api(create_app(platform, settings), "127.0.0.1", 0) as url,
        httpx.AsyncClient(base_url=url) as http,
    ):
        assert (await http.post("/v1/commands", json={"command": "list_listeners"})).status_code == 200  # open
        body = {"command": "create_api_key", "name": "first", "scopes": ["admin"]}
        assert (await http.post("/v1/commands", json=body)).status_code == 200
        refused = await http.post("/v1/commands", json={"command": "list_listeners"})

    assert refused.status_code == 401, refused.text


async def test_a_first_key_that_cannot_make_keys_says_what_closed_and_how_back_in(
    platform: Platform, settings: Settings
) -> None:
    async with (
        serve_api(create_app(platform, settings), "127.0.0.1", 0) as url,
        httpx.AsyncClient(base_url=url) as http,
    ):
        body = {"command": "create_api_key", "name": "reader", "scopes": ["read:**"]}
        made = (await http.post("/v1/commands", json=body)).json()
        [warning] = made["warnings"]
        assert "name: 'reader' is the first key" in warning and "--token" in warning, warning
        assert "orchestrator keys create NAME --scope admin --local" in warning, warning
        # The way back it names works: an admin key made in-process against the database.
        admin = await platform.command({"command": "create_api_key", "name": "back-in", "scopes": ["admin"]})
        assert "warnings" not in admin, "only the first key closes the API"
        headers = {"Authorization": f"Bearer {admin['key']['secret']}"}
        await asyncio.sleep(1)
        assert (await http.post("/v1/commands", json={"command": "list_api_keys"}, headers=headers)).status_code == 200


async def test_the_keys_command_line_creates_lists_and_revokes(api: Api) -> None:
    door = ["--url", api.url, "--token", TOKEN]
    code, out = await cli("keys", "create", "cli-key", "--scope", "read:t/**", "--scope", "listeners", *door)
    assert code == 0, out
    created = json.loads(out)["key"]
    assert created["scopes"] == ["read:t/**", "listeners"] and created["secret"].startswith("ork_")

    code, out = await cli("keys", "list", *door)
    assert code == 0 and "cli-key" in out and "active" in out and created["secret"] not in out

    code, out = await cli("call", "--url", api.url, "--token", created["secret"], '{"command": "list_listeners"}')
    assert code == 0, out

    code, out = await cli("keys", "revoke", "cli-key", *door)
    assert code == 0 and json.loads(out)["key"]["state"] == "revoked"
    code, out = await cli("keys", "list", "--json", *door)
    assert [k["state"] for k in json.loads(out)["keys"]] == ["revoked"]

    code, out = await cli("keys", "create", "bad", "--scope", "nonsense", *door)
    assert code == 1 and json.loads(out)["error"] == "invalid_request"


async def test_the_key_commands_answer_alike_through_call_http_and_the_client(api: Api) -> None:
    body = {"command": "list_api_keys"}
    await api.key("seen", ["read:**"])
    through_client = await api.admin.command(body)
    code, out = await cli("call", "--url", api.url, "--token", TOKEN, json.dumps(body))
    assert code == 0 and json.loads(out) == through_client
    assert (await api.post(body, TOKEN)).json() == through_client
    async with Client.local(api.platform) as local:
        assert await local.command(body) == through_client


async def test_an_open_apis_callers_act_as_anonymous(platform: Platform, settings: Settings) -> None:
    async with (
        serve_api(create_app(platform, settings), "127.0.0.1", 0) as url,
        Client.http(url) as client,
    ):
        sid = (await client.open_session(alias="open"))["session"]["id"]
        written = await client.write_object(sid, "a/b", {"type": "t"})
        [event] = (await client.list_session_events(sid))["events"]
        me = (await client.whoami())["key"]
    assert event["id"] == written["event_id"] and event["actor"] == {"key": "anonymous"}
    assert event["cause"]["request"]["key"] == "anonymous"
    assert me == {"name": "anonymous", "scopes": ["admin"], "requests_per_second": None}


async def test_a_key_asks_who_it_is_and_what_its_scopes_may_call(api: Api) -> None:
    widget = await api.key("widget", ["emit:chat.*:acme/**"], requests_per_second=20)
    async with api.as_key(widget) as client:
        me = await client.whoami()
    assert me["key"] == {"name": "widget", "scopes": ["emit:chat.*:acme/**"], "requests_per_second": 20}
    # What it may call somewhere; the rest is refused everywhere.
    assert me["commands"] == ["emit_event", "emit_events", "get_event_type", "list_event_types", "whoami"]
    assert (await api.admin.whoami())["key"] == {"name": "bootstrap", "scopes": ["admin"], "requests_per_second": None}


async def test_a_stream_a_key_opened_ends_within_a_second_of_the_keys_revocation(api: Api) -> None:
    sid = (await api.admin.open_session(alias="watched"))["session"]["id"]
    secret = await api.key("watcher", ["listen:**"])
    headers = {"Authorization": f"Bearer {secret}"}
    async with (
        httpx.AsyncClient(base_url=api.url, timeout=httpx.Timeout(10, read=None)) as http,
        http.stream("GET", f"/v1/sessions/{sid}/stream", headers=headers) as response,
    ):
        assert response.status_code == 200
        lines = (line async for line in response.aiter_lines() if line)
        assert await anext(lines) == ": stream open"
        assert (await anext(lines)).startswith("id: "), "the position it opened at"
        await api.admin.command({"command": "write_object", "session_id": sid, "alias": "a/1", "value": {"type": "t"}})
        assert (await asyncio.wait_for(anext(lines), 5)).startswith("id:")  # it streams while the key works
        await api.admin.revoke_api_key("watcher")
        revoked_at = asyncio.get_running_loop().time()

        async def rest() -> list[str]:
            return [line async for line in lines]

        tail = await asyncio.wait_for(rest(), 5)
        ended_after = asyncio.get_running_loop().time() - revoked_at
    assert "event: closed" in tail and any("revoked" in line for line in tail), tail
    assert ended_after < 1.5, f"the stream went on {ended_after:.2f} s after its key was revoked"


async def test_a_refusal_of_one_write_among_many_names_the_one_at_fault(api: Api) -> None:
    """A key may write `notes/*` in its sessions and emit `chat.*`: the second object of a `write_objects` and the
    second event type of an `emit_events` are refused by their own fields, and nothing is written."""
    sid = (await api.admin.open_session(alias="t1/s"))["session"]["id"]
    for name in ("chat.sent", "audit.logged"):
        await api.admin.save_event_type(name, {"type": "object"})
    secret = await api.key("writer", ["write:t1/**:notes/*", "emit:chat.*", "read:t1/**"])
    objects = [{"alias": "notes/1", "value": {"type": "n"}}, {"alias": "other/1", "value": {"type": "n"}}]
    refused = (await api.post({"command": "write_objects", "session_id": sid, "objects": objects}, secret)).json()
    assert (refused["error"], refused["message"].split(":")[0]) == ("access_denied", "objects.1.alias"), refused
    events = [{"type": name, "data": {}} for name in ("chat.sent", "chat.sent", "audit.logged")]
    refused = (await api.post({"command": "emit_events", "session_id": sid, "events": events}, secret)).json()
    assert (refused["error"], refused["message"].split(":")[0]) == ("access_denied", "events.2.type"), refused
    assert (await api.admin.list_session_events(sid))["events"] == []


async def test_a_token_from_a_file_with_its_line_end_is_sent_and_one_no_header_can_carry_is_never_shown(
    api: Api,
) -> None:
    """`--token "$(cat key)"` drops the line end, a `.env` file or a mounted secret does not: the token is sent
    without the whitespace around it (the API reads a header so too). One with a control character inside is bad
    usage naming where it came from; the send's own error printed the secret in its traceback."""
    secret = await api.key("filed", ["read:**"])
    call = ("call", "--url", api.url, '{"command": "whoami"}')
    code, out = await cli(*call, "--token", secret + "\n")
    assert code == 0 and json.loads(out)["key"]["name"] == "filed", out
    async with Client.http(api.url, token=f" {secret}\r\n") as client:
        assert (await client.whoami())["key"]["name"] == "filed"

    broken = secret[:20] + "\n" + secret[20:]
    code, out = await cli(*call, "--token", broken)
    assert code == 2 and "--token: holds a character no HTTP header can carry" in out, out
    assert secret[:20] not in out and secret[20:] not in out
    for subcommand in (("status", "--session", "ses_1"), ("keys", "list")):
        code, out = await cli(*subcommand, "--url", api.url, "--token", broken)
        assert code == 2 and "the token is not shown" in out and secret[20:] not in out, out
    with pytest.raises(ValueError, match="the token is not shown") as raised:
        Client.http(api.url, token=broken)
    assert secret[20:] not in str(raised.value)
