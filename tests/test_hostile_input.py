"""Hostile input through the HTTP door, generated: never a 5xx, always a code and a message, nothing changed.

Every command gets bodies made from a valid one by a mutation that surely makes it invalid (an unknown
field, a required field left out, a required field of the wrong JSON type), with the rest of its fields
replaced at random by JSON that is hostile in other ways (huge or odd unicode strings, deep nesting, wrong
types); raw bodies that are not JSON at all go too. Before and after each one the test takes a snapshot of
everything a command could change; it must not move.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.commands.registry import COMMANDS
from orchestrator.config import Settings
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform
from tests.store.helpers import STATE_TABLES

SESSION = "$SESSION"
LISTENER = {
    "name": "hostile",
    "filter": {"types": ["object.written"]},
    "action": {"type": "object", "alias": "out/x", "value": {"type": "x"}},
}
# A valid body of every command (SESSION stands for an open session's id), and which fields it requires.
VALID: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "open_session": ({"alias": "s", "retention": {"event_seconds": 60.0, "closed_session_seconds": 60.0}}, ()),
    "delete_session": ({"session_id": SESSION}, ("session_id",)),
    "list_sessions": ({"status": "open", "limit": 10}, ()),
    "close_session": ({"session_id": SESSION}, ("session_id",)),
    "reopen_session": ({"session_id": SESSION}, ("session_id",)),
    "write_object": ({"session_id": SESSION, "alias": "a/b", "value": {"type": "t"}}, ("session_id", "alias", "value")),
    "read_object": ({"session_id": SESSION, "alias": "a/b"}, ("session_id", "alias")),
    "delete_object": ({"session_id": SESSION, "alias": "a/b"}, ("session_id", "alias")),
    "list_objects": ({"session_id": SESSION, "prefix": "a"}, ("session_id",)),
    "post_thread_item": (
        {"session_id": SESSION, "alias": "c/1", "item": {"type": "text", "message": "hi"}},
        ("session_id", "alias", "item"),
    ),
    "list_thread_items": ({"session_id": SESSION, "alias": "c/1"}, ("session_id", "alias")),
    "list_session_listeners": ({"session_id": SESSION}, ("session_id",)),
    "list_executions": ({"session_id": SESSION}, ("session_id",)),
    "start_execution": ({"session_id": SESSION, "workflow": "w", "input": {}}, ("session_id", "workflow")),
    "stop_execution": ({"session_id": SESSION, "execution_id": "exe:x.0"}, ("session_id", "execution_id")),
    "save_listener": ({"listener": LISTENER}, ("listener",)),
    "get_listener": ({"name": "hostile"}, ("name",)),
    "delete_listener": ({"name": "hostile"}, ("name",)),
    "delete_event_type": ({"name": "hostile.type"}, ("name",)),
    "capture_table": (
        {"table": "hostile_table", "type_prefix": "hostile", "session_column": "session", "exclude": ["secret"]},
        ("table", "type_prefix", "session_column"),
    ),
    "uncapture_table": ({"table": "hostile_table"}, ("table",)),
    "list_captures": ({}, ()),
    "list_listeners": ({}, ()),
    "pause_listener": ({"name": "hostile", "session_id": SESSION}, ("name",)),
    "resume_listener": ({"name": "hostile", "session_id": SESSION}, ("name",)),
    "switch_listener": (
        {"session_id": SESSION, "name": "hostile", "enabled": False},
        ("session_id", "name", "enabled"),
    ),
    "list_session_events": ({"session_id": SESSION, "after": 0}, ("session_id",)),
    "create_schedule": (
        {
            "session_id": SESSION,
            "alias": "clock",
            "repeat": {"type": "interval", "every_seconds": 900},
            "invocation_target_type": "object",
            "target": {"alias": "ops/clock", "value": {"type": "tick"}},
        },
        ("session_id", "alias", "repeat", "invocation_target_type", "target"),
    ),
    "update_schedule": ({"session_id": SESSION, "alias": "clock", "enabled": False}, ("session_id", "alias")),
    "get_schedule": ({"session_id": SESSION, "alias": "clock"}, ("session_id", "alias")),
    "list_schedules": ({"session_id": SESSION}, ("session_id",)),
    "delete_schedule": ({"session_id": SESSION, "alias": "clock"}, ("session_id", "alias")),
    "list_schedule_runs": ({"session_id": SESSION, "alias": "clock"}, ("session_id", "alias")),
    "explain_event": ({"session_id": SESSION, "event_id": 1}, ("session_id", "event_id")),
    "replay_batch": ({"session_id": SESSION, "listener": "hostile", "batch": 1}, ("session_id", "listener", "batch")),
    "redeliver": (
        {"session_id": SESSION, "listener": "hostile", "after": 0, "through": 5},
        ("session_id", "listener", "after", "through"),
    ),
    "save_event_type": (
        {"name": "ticket.hostile", "schema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        ("name", "schema"),
    ),
    "get_event_type": ({"name": "ticket.hostile"}, ("name",)),
    "list_event_types": ({}, ()),
    "emit_event": ({"session_id": SESSION, "type": "ticket.hostile", "data": {"n": 1}}, ("session_id", "type", "data")),
    "emit_events": (
        {"session_id": SESSION, "events": [{"type": "ticket.hostile", "data": {"n": 1}}]},
        ("session_id", "events"),
    ),
    "write_objects": (
        {"session_id": SESSION, "objects": [{"alias": "a/b", "value": {"type": "t"}}]},
        ("session_id", "objects"),
    ),
    "post_thread_items": (
        {"session_id": SESSION, "alias": "c/1", "items": [{"type": "text", "message": "hi"}]},
        ("session_id", "alias", "items"),
    ),
    "update_graph": (
        {"session_id": SESSION, "patch": {"nodes": {"n1": {"type": "mission"}}}},
        ("session_id", "patch"),
    ),
    "read_graph": ({"session_id": SESSION}, ("session_id",)),
    "simulate_listener": (
        {"session_id": SESSION, "listener": LISTENER, "after": 0, "run_seconds": 1.0},
        ("session_id", "listener"),
    ),
    "create_api_key": ({"name": "hostile-key", "scopes": ["read:**"], "requests_per_second": 5}, ("name", "scopes")),
    "list_api_keys": ({}, ()),
    "revoke_api_key": ({"name": "hostile-key"}, ("name",)),
}

_odd_text = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(categories=["Cc", "Cf", "Co", "Zs", "Mn"]), max_size=20),
    st.sampled_from(["", "..", "a/../b", "\x00", "\u202e", "\ud7ff", "🙂" * 50, "a" * 5000, "{{ batch.events }}"]),
)
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=False), _odd_text
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_odd_text, inner, max_size=4)),
    max_leaves=12,
)


def _deep(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"a": [value]}
    return value


_hostile = st.one_of(_json, st.integers(10, 200).map(_deep), st.just("x" * 300_000))


def _kind(value: Any) -> str:
    return "null" if value is None else "bool" if isinstance(value, bool) else type(value).__name__


@st.composite
def bodies(draw: st.DrawFn, commands: list[str]) -> dict[str, Any]:
    name = draw(st.sampled_from(commands))
    valid, required = VALID[name]
    body: dict[str, Any] = {"command": name, **valid}
    for field in list(valid):
        if draw(st.booleans()):
            body[field] = draw(_hostile)
    mutations = ["unknown"] + (["missing", "wrong_type"] if required else [])
    mutation = draw(st.sampled_from(mutations))
    if mutation == "unknown":
        body[draw(_odd_text.filter(lambda key: key not in body))] = draw(_json)
    elif mutation == "missing":
        body.pop(draw(st.sampled_from(required)))
    else:
        field = draw(st.sampled_from(required))
        expected = _kind(valid[field])
        body[field] = draw(_json.filter(lambda value: _kind(value) != expected))
    return body


@pytest.fixture
async def door(platform: Platform, settings: Settings) -> AsyncIterator[tuple[httpx.AsyncClient, Platform, str]]:
    session = (await platform.command({"command": "open_session", "alias": "held"}))["session"]["id"]
    await platform.command({"command": "write_object", "session_id": session, "alias": "a/b", "value": {"type": "t"}})
    await platform.command({"command": "save_listener", "listener": LISTENER})
    async with (
        serve_api(create_app(platform, settings), "127.0.0.1", 0) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as http,
    ):
        yield http, platform, session


async def snapshot(platform: Platform, session: str) -> dict[str, Any]:
    async with platform.store.transaction() as conn:
        counts = {table: await conn.fetchval(f"SELECT count(*) FROM orchestrator.{table}") for table in STATE_TABLES}
        objects = await conn.fetch("SELECT alias, value, rev FROM orchestrator.objects WHERE session_id = $1", session)
        status = await conn.fetchval("SELECT status FROM orchestrator.sessions WHERE id = $1", session)
        retention = await conn.fetch(
            "SELECT session_id, event_seconds, closed_session_seconds FROM orchestrator.session_retention"
        )
    kept = sorted(map(tuple, retention))
    return {**counts, "objects": sorted(map(tuple, objects)), "status": status, "retention": kept}


def _check(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text
    reply = response.json()
    assert reply["status"] == "error", reply
    assert isinstance(reply["error"], str) and reply["error"]
    assert isinstance(reply["message"], str) and reply["message"]


async def refused_and_nothing_changed(
    door: tuple[httpx.AsyncClient, Platform, str], body: dict[str, Any]
) -> httpx.Response:
    """Send `body` (SESSION standing for the door's session) and insist it was refused and changed nothing."""
    http, platform, session = door
    body = json.loads(json.dumps(body).replace(json.dumps(SESSION)[1:-1], session))
    before = await snapshot(platform, session)
    response = await http.post("/v1/commands", content=json.dumps(body).encode())
    _check(response)
    assert await snapshot(platform, session) == before, f"{body!r} changed something"
    return response


def test_every_command_has_a_valid_body_to_start_from() -> None:
    assert set(VALID) == set(COMMANDS)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies(sorted(VALID)))
async def test_a_hostile_body_is_refused_with_a_code_and_a_message_and_changes_nothing(
    door: tuple[httpx.AsyncClient, Platform, str], body: dict[str, Any]
) -> None:
    await refused_and_nothing_changed(door, body)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(500, 200_000), command=st.sampled_from(sorted(VALID)))
async def test_json_nested_past_any_parser_s_depth_is_refused_and_changes_nothing(
    door: tuple[httpx.AsyncClient, Platform, str], depth: int, command: str
) -> None:
    http, platform, session = door
    raw = f'{{"command": "{command}", "session_id": "{session}", "value": {"[" * depth}{"]" * depth}}}'.encode()
    before = await snapshot(platform, session)
    _check(await http.post("/v1/commands", content=raw))
    assert await snapshot(platform, session) == before


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.one_of(st.binary(max_size=200), _odd_text.map(str.encode), st.just(b'{"command": "open_session"')))
async def test_a_body_that_is_not_json_is_refused_and_changes_nothing(
    door: tuple[httpx.AsyncClient, Platform, str], raw: bytes
) -> None:
    http, platform, session = door
    try:
        json.loads(raw)
    except ValueError:
        pass
    else:
        return  # JSON after all: the other test's business
    before = await snapshot(platform, session)
    _check(await http.post("/v1/commands", content=raw))
    assert await snapshot(platform, session) == before


BIG = 2**63  # one past PostgreSQL's bigint
# Values each command's schema takes as their type, but that no id, rev or PostgreSQL text can hold; with the
# field the refusal must name.
UNSTORABLE: list[tuple[dict[str, Any], str]] = [
    ({"command": "list_session_events", "session_id": SESSION, "after": BIG}, "after"),
    ({"command": "list_session_events", "session_id": SESSION, "before": 2**64}, "before"),
    ({"command": "explain_event", "session_id": SESSION, "event_id": BIG}, "event_id"),
    ({"command": "explain_event", "session_id": SESSION, "event_id": 0}, "event_id"),
    ({"command": "explain_event", "session_id": SESSION, "event_id": -1}, "event_id"),
    (
        {"command": "write_object", "session_id": SESSION, "alias": "a/b", "value": {"type": "t"}, "if_rev": BIG},
        "if_rev",
    ),
    ({"command": "update_graph", "session_id": SESSION, "patch": {"nodes": {}}, "if_rev": BIG}, "if_rev"),
    ({"command": "replay_batch", "session_id": SESSION, "listener": "hostile", "batch": BIG}, "batch"),
    ({"command": "redeliver", "session_id": SESSION, "listener": "hostile", "after": 0, "through": BIG}, "through"),
    ({"command": "simulate_listener", "session_id": SESSION, "listener": LISTENER, "before": 2**64}, "before"),
    ({"command": "write_object", "session_id": SESSION + "\x00", "alias": "a/b", "value": {"type": "t"}}, "session_id"),
    (
        {"command": "write_object", "session_id": SESSION, "alias": "a/b", "value": {"type": "t", "s": "a\x00"}},
        "value.s",
    ),
    ({"command": "write_object", "session_id": SESSION, "alias": "a/b", "value": {"type": "t", "\x00": 1}}, "value"),
    (
        {"command": "write_object", "session_id": SESSION, "alias": "a/b", "value": {"type": "t"}, "client": "c\x00"},
        "client",
    ),
    (
        {
            "command": "post_thread_item",
            "session_id": SESSION,
            "alias": "c/1",
            "item": {"type": "text", "message": "\x00"},
        },
        "item.message",
    ),
    (
        {"command": "write_objects", "session_id": SESSION, "objects": [{"alias": "a/b", "value": {"type": "t\x00"}}]},
        "objects.0.value.type",
    ),
]


@pytest.mark.parametrize(("body", "field"), UNSTORABLE, ids=[f"{b['command']}-{f}" for b, f in UNSTORABLE])
async def test_a_value_of_the_right_type_that_nothing_can_store_is_refused_naming_its_field(
    door: tuple[httpx.AsyncClient, Platform, str], body: dict[str, Any], field: str
) -> None:
    response = await refused_and_nothing_changed(door, body)
    reply = response.json()
    assert (response.status_code, reply["error"]) == (400, "invalid_request"), reply
    assert reply["message"].startswith(f"{field}:") or f" {field}:" in reply["message"], reply
