"""Keys per tenant and a send-only key, over HTTP: a tenant's key cannot read, write, stream or explain another
tenant's session (it does not exist, for that key), an `emit:` key emits and does nothing else, and an event
type's `allow` says which scopes may emit it from outside."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from orchestrator.client import Client
from orchestrator.commands.registry import COMMANDS
from orchestrator.core.access import need_of
from tests.access.conftest import Api
from tests.test_hostile_input import LISTENER, SESSION, VALID
from tests.test_streams import opened, write

TENANT = ["read:{t}/**", "write:{t}/**", "listen:{t}/**"]


def scopes(tenant: str) -> list[str]:
    return [s.format(t=tenant) for s in TENANT]


async def events_of(api: Api, session_id: str) -> list[dict[str, Any]]:
    return list((await api.platform.command({"command": "list_session_events", "session_id": session_id}))["events"])


@pytest.fixture
async def tenants(api: Api) -> tuple[str, str, str, str]:
    """Two tenants' sessions with an object, a thread item and an event each, and a key per tenant."""
    sessions = []
    for tenant in ("acme", "globex"):
        sid = (await api.admin.open_session(alias=f"{tenant}/support"))["session"]["id"]
        await api.admin.write_object(sid, "tickets/1", {"type": "ticket"})
        await api.admin.post_thread_item(sid, "chats/1", {"type": "text", "message": "hi"})
        sessions.append(sid)
    return sessions[0], sessions[1], await api.key("acme", scopes("acme")), await api.key("globex", scopes("globex"))


async def test_a_tenants_key_cannot_read_write_stream_or_explain_another_tenants_session(
    api: Api, tenants: tuple[str, str, str, str]
) -> None:
    acme_session, globex_session, acme, _ = tenants
    theirs_before = await events_of(api, globex_session)
    first = theirs_before[0]["id"]
    attempts: list[dict[str, Any]] = [
        {"command": "read_object", "alias": "tickets/1"},
        {"command": "list_objects"},
        {"command": "list_thread_items", "alias": "chats/1"},
        {"command": "list_session_events"},
        {"command": "explain_event", "event_id": first},
        {"command": "list_session_listeners"},
        {"command": "list_executions"},
        {"command": "read_graph"},
        {"command": "write_object", "alias": "tickets/1", "value": {"type": "stolen"}},
        {"command": "delete_object", "alias": "tickets/1"},
        {"command": "post_thread_item", "alias": "chats/1", "item": {"type": "text", "message": "x"}},
        {"command": "update_graph", "patch": {"nodes": {"n": {"type": "x"}}}},
        {"command": "close_session"},
    ]
    for attempt in attempts:
        reply = await api.post({**attempt, "session_id": globex_session}, acme)
        assert (reply.status_code, reply.json()["error"]) == (404, "not_found"), (attempt, reply.text)
        assert "globex" not in reply.text
        # The same as for a session that does not exist at all: nothing to tell the two apart.
        missing = await api.post({**attempt, "session_id": "ses_00000000000000000000"}, acme)
        assert missing.json() == {
            **reply.json(),
            "message": reply.json()["message"].replace(globex_session, "ses_00000000000000000000"),
        }

    async with httpx.AsyncClient(base_url=api.url) as http:
        headers = {"Authorization": f"Bearer {acme}"}
        stream = await http.get(f"/v1/sessions/{globex_session}/stream", headers=headers)
        assert (stream.status_code, stream.json()["error"]) == (404, "not_found")
        ticket = await http.post("/v1/stream-tickets", json={"session_id": globex_session}, headers=headers)
        assert (ticket.status_code, ticket.json()["error"]) == (404, "not_found")

    assert await events_of(api, globex_session) == theirs_before
    obj = await api.platform.command({"command": "read_object", "session_id": globex_session, "alias": "tickets/1"})
    assert obj["object"]["value"] == {"type": "ticket"}

    # Its own tenant's session: everything works, and the list of sessions holds its own only.
    async with api.as_key(acme) as client:
        await client.write_object(acme_session, "tickets/2", {"type": "ticket"})
        assert (await client.read_object(acme_session, "tickets/2"))["object"]["rev"] == 1
        listed = (await client.command({"command": "list_sessions"}))["sessions"]
        assert [s["alias"] for s in listed] == ["acme/support"]
        with pytest.raises(Exception) as denied:
            await client.open_session(alias="globex/new")
        assert getattr(denied.value, "code", None) == "access_denied"
        assert (await client.open_session(alias="acme/new"))["session"]["alias"] == "acme/new"
    async with opened(api.url, acme_session, headers={"Authorization": f"Bearer {acme}"}) as next_message:
        new = await write(api.platform, acme_session, "tickets/3")
        assert [e["id"] for e in (await next_message())["data"]["events"]] == [new]


async def test_an_emit_only_key_emits_and_cannot_write_objects_or_read(api: Api) -> None:
    await api.admin.save_event_type("chat.sent", {"type": "object", "properties": {"text": {"type": "string"}}})
    await api.admin.save_event_type("billing.paid", {"type": "object"})
    sid = (await api.admin.open_session(alias="acme/widget"))["session"]["id"]
    widget = await api.key("widget", ["emit:chat.*"])
    before = await events_of(api, sid)

    refused = [
        {"command": "write_object", "alias": "tickets/1", "value": {"type": "t"}},
        {"command": "write_objects", "objects": [{"alias": "tickets/1", "value": {"type": "t"}}]},
        {"command": "post_thread_item", "alias": "chats/1", "item": {"type": "text", "message": "x"}},
        {"command": "update_graph", "patch": {"nodes": {"n": {"type": "x"}}}},
        {"command": "emit_event", "type": "billing.paid", "data": {}},
        {"command": "emit_events", "events": [{"type": "chat.sent", "data": {}}, {"type": "billing.paid", "data": {}}]},
    ]
    for attempt in refused:
        reply = await api.post({**attempt, "session_id": sid}, widget)
        assert (reply.status_code, reply.json()["error"]) == (403, "access_denied"), (attempt, reply.text)
    # Reading, it finds no session, as for one that does not exist: outside its read scopes (none) a
    # session is not found, though its emit: scope reaches every session.
    for attempt in ({"command": "read_object", "alias": "tickets/1"}, {"command": "list_session_events"}):
        reply = await api.post({**attempt, "session_id": sid}, widget)
        assert (reply.status_code, reply.json()["error"]) == (404, "not_found"), (attempt, reply.text)
        missing = await api.post({**attempt, "session_id": "ses_nosuchsession"}, widget)
        assert missing.json() == reply.json() | {"message": missing.json()["message"]}, (reply.text, missing.text)
    assert await events_of(api, sid) == before, "a refused command wrote nothing"
    for command in ({"command": "save_listener", "listener": {}}, {"command": "list_api_keys"}):
        assert (await api.post(command, widget)).json()["error"] == "access_denied"

    sent = await api.post(
        {"command": "emit_event", "session_id": sid, "type": "chat.sent", "data": {"text": "hi"}}, widget
    )
    assert sent.status_code == 200, sent.text
    [event] = [e for e in await events_of(api, sid) if e["id"] == sent.json()["event_id"]]
    assert event["type"] == "chat.sent" and event["actor"] == {"key": "widget"}


async def test_a_send_only_key_narrowed_to_a_tenant_finds_no_other_session(api: Api) -> None:
    await api.admin.save_event_type("chat.sent", {"type": "object"})
    mine = (await api.admin.open_session(alias="acme/widget"))["session"]["id"]
    theirs = (await api.admin.open_session(alias="globex/widget"))["session"]["id"]
    widget = await api.key("acme-widget", ["emit:chat.*:acme/**"])
    body = {"command": "emit_event", "type": "chat.sent", "data": {}}
    assert (await api.post({**body, "session_id": mine}, widget)).status_code == 200
    other = await api.post({**body, "session_id": theirs}, widget)
    assert (other.status_code, other.json()["error"]) == (404, "not_found")


async def test_an_event_types_allow_names_the_scopes_that_may_emit_it(api: Api) -> None:
    await api.admin.save_event_type("payment.captured", {"type": "object"}, allow=["emit:payment.*"])
    sid = (await api.admin.open_session(alias="shop/1"))["session"]["id"]
    body = {"command": "emit_event", "session_id": sid, "type": "payment.captured", "data": {}}
    for name, held in (("any-emit", ["emit:**"]), ("writer", ["write:**", "read:**"])):
        reply = await api.post(body, await api.key(name, held))
        assert (reply.status_code, reply.json()["error"]) == (403, "access_denied"), name
    payments = await api.key("payments", ["emit:payment.*"])
    assert (await api.post(body, payments)).status_code == 200
    bad = await api.platform.command({"command": "save_event_type", "name": "x.y", "schema": {}, "allow": ["read:**"]})
    assert bad["error"] == "invalid_request" and bad["message"].startswith("allow.0"), bad


async def test_a_listeners_key_manages_declarations_but_writes_no_session(api: Api) -> None:
    ops = await api.key("ops", ["listeners", "read:**"])
    sid = (await api.admin.open_session(alias="acme/ops"))["session"]["id"]
    listener = {
        "name": "watch",
        "filter": {"types": ["object.written"]},
        "action": {"type": "object", "alias": "out/x", "value": {"type": "x"}},
    }
    async with Client.http(api.url, token=ops) as client:
        assert (await client.save_listener(listener))["listener"]["name"] == "watch"
        await client.command({"command": "pause_listener", "name": "watch", "session_id": sid})
        assert (await client.switch_listener(sid, "watch", enabled=False))["enabled"] is False
        reply = await client.command(
            {"command": "write_object", "session_id": sid, "alias": "a", "value": {"type": "t"}}
        )
        assert reply["error"] == "access_denied"


async def test_a_write_only_key_cannot_read_the_explanation_of_its_write(api: Api) -> None:
    """`explain` on a write answers what `explain_event` would, a read of the session: a key that writes and does
    not read is refused (`access_denied`, nothing written), and writes without it as before."""
    sid = (await api.admin.open_session(alias="acme/support"))["session"]["id"]
    writer = await api.key("writer", ["write:acme/**:tickets/**"])
    before = await events_of(api, sid)

    for attempt in (
        {"command": "write_object", "alias": "tickets/77", "value": {"type": "ticket"}, "explain": True},
        {
            "command": "post_thread_item",
            "alias": "tickets/77",
            "item": {"type": "text", "message": "x"},
            "explain": True,
        },
    ):
        reply = await api.post({**attempt, "session_id": sid}, writer)
        assert (reply.status_code, reply.json()["error"]) == (403, "access_denied"), (attempt, reply.text)
        assert reply.json()["message"].startswith("explain"), reply.text
    assert await events_of(api, sid) == before, "a refused write wrote nothing"

    plain = await api.post(
        {"command": "write_object", "session_id": sid, "alias": "tickets/77", "value": {"type": "ticket"}}, writer
    )
    assert plain.status_code == 200 and "explain" not in plain.json(), plain.text


# A key that reaches the session some other way than reading it, and one that reaches only another tenant's.
SEE_NOT_READ = {
    "listens": ["listen:acme/**"],
    "writes-some-aliases": ["write:acme/**:tickets/**"],
    "emits-here": ["emit:chat.*:acme/**"],
    "other-tenant": ["read:globex/**", "write:globex/**", "listen:globex/**", "listeners"],
}


@pytest.mark.parametrize("held", sorted(SEE_NOT_READ))
async def test_every_read_of_a_session_a_key_does_not_read_answers_as_for_no_session(api: Api, held: str) -> None:
    """Every command that reads a session (the indirect ones too: explain_event, simulate_listener, the schedules'
    reads, get_session), and every command at all on a session the key does not see, answers `not_found` exactly
    as for an id no session has: nothing tells the session apart from none."""
    await api.admin.save_listener(LISTENER)
    await api.admin.save_event_type("chat.sent", {"type": "object"})
    sid = (await api.admin.open_session(alias="acme/support"))["session"]["id"]
    await api.admin.write_object(sid, "a/b", {"type": "t"})
    key = await api.key(held, SEE_NOT_READ[held])
    sees = held != "other-tenant"
    missing = "ses_00000000000000000000"
    before = await events_of(api, sid)
    for name in sorted(COMMANDS):
        body = {"command": name, **VALID[name][0]}
        if body.get("session_id") != SESSION or (sees and need_of(name) != "read"):
            continue
        here = await api.post(json.loads(json.dumps(body).replace(SESSION, sid)), key)
        nowhere = await api.post(json.loads(json.dumps(body).replace(SESSION, missing)), key)
        assert (here.status_code, here.json()["error"]) == (404, "not_found"), (name, here.text)
        assert here.text.replace(sid, missing) == nowhere.text, name
    assert await events_of(api, sid) == before
