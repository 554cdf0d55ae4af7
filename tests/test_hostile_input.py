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
from decimal import Decimal
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from temporalio.testing import WorkflowEnvironment

from orchestrator.commands.registry import COMMANDS
from orchestrator.config import Settings
from orchestrator.core.declaration import parse_declaration
from orchestrator.core.limits import Limits
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
    "get_session": ({"session_id": SESSION}, ("session_id",)),
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
        # `alias` and `invocation_target_type` are filled in from the target when left out.
        ("session_id", "repeat", "target"),
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
    "whoami": ({}, ()),
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
    # A lone surrogate (`\ud800` in JSON text): a string no UTF-8, and so no PostgreSQL text, can spell.
    (
        {"command": "write_object", "session_id": SESSION, "alias": "a/b", "value": {"type": "t", "x": "\ud800"}},
        "value.x",
    ),
    ({"command": "write_object", "session_id": SESSION, "alias": "a/b", "value": {"type": "t", "\udfff": 1}}, "value"),
    (
        {
            "command": "post_thread_item",
            "session_id": SESSION,
            "alias": "c/1",
            "item": {"type": "text", "message": "\udc00"},
        },
        "item.message",
    ),
    ({"command": "save_event_type", "name": "hostile.type", "schema": {"description": "\ud800"}}, "schema.description"),
    ({"command": "start_execution", "session_id": SESSION, "workflow": "w", "input": {"x": ["\ud800"]}}, "input.x.0"),
    (
        {"command": "emit_event", "session_id": SESSION, "type": "ticket.hostile", "data": {"n": 1, "s": "\ud800"}},
        "data.s",
    ),
]


async def refused_naming(door: tuple[httpx.AsyncClient, Platform, str], body: dict[str, Any], field: str) -> None:
    """`body` is refused as bad input naming `field`, and changed nothing."""
    response = await refused_and_nothing_changed(door, body)
    reply = response.json()
    assert (response.status_code, reply["error"]) == (400, "invalid_request"), reply
    assert reply["message"].startswith(f"{field}:") or f" {field}:" in reply["message"], reply


@pytest.mark.parametrize(("body", "field"), UNSTORABLE, ids=[f"{b['command']}-{f}" for b, f in UNSTORABLE])
async def test_a_value_of_the_right_type_that_nothing_can_store_is_refused_naming_its_field(
    door: tuple[httpx.AsyncClient, Platform, str], body: dict[str, Any], field: str
) -> None:
    await refused_naming(door, body, field)


# Names and places with a line end after them: a pattern anchored with `$` lets one through (it matches before a
# final newline), and the name would be a second thing beside the one it spells.
LINE_ENDED: list[tuple[dict[str, Any], str]] = [
    ({"command": "write_object", "session_id": SESSION, "alias": "tickets/42\n", "value": {"type": "t"}}, "alias"),
    ({"command": "save_event_type", "name": "ticket.escalated\n", "schema": {"type": "object"}}, "name"),
    (
        {
            "command": "save_listener",
            "listener": {**LISTENER, "filter": {"where": [{"path": "data.kind\n", "op": "exists"}]}},
        },
        "listener.filter.where.0.path",
    ),
    (
        {"command": "save_listener", "listener": {**LISTENER, "filter": {"aliases": ["tickets/*\n"]}}},
        "listener.filter.aliases.0",
    ),
    ({"command": "create_api_key", "name": "ops\n", "scopes": ["read:**"]}, "name"),
]


@pytest.mark.parametrize(("body", "field"), LINE_ENDED, ids=[f"{b['command']}-{f}" for b, f in LINE_ENDED])
async def test_a_name_with_a_line_end_after_it_is_refused_naming_its_field(
    door: tuple[httpx.AsyncClient, Platform, str], body: dict[str, Any], field: str
) -> None:
    await refused_naming(door, body, field)


async def test_an_if_rev_past_any_rev_is_refused_naming_it(door: tuple[httpx.AsyncClient, Platform, str]) -> None:
    """Revs are integers: a larger `if_rev` could never match, and failed in the database (500)."""
    body = {"command": "write_object", "session_id": SESSION, "alias": "a/b", "value": {"type": "t"}, "if_rev": 2**31}
    await refused_naming(door, body, "if_rev")


# Numbers a double cannot hold, as JSON text: Python's `json` decodes them to infinity (`json.dumps` would write
# `Infinity`, which is not JSON, so they are spliced into the text in place of HUGE).
HUGE = "$HUGE"
HUGE_TEXTS = ("1e400", "-1E+999", "1" + "0" * 400 + ".5", "12345678901234567890e300", "1" + "0" * 300 + "e10")


def _with_huge(body: dict[str, Any], text: str) -> bytes:
    return json.dumps(body).replace(json.dumps(HUGE), text).encode()


OUT_OF_RANGE: list[tuple[dict[str, Any], str]] = [
    ({"command": "write_object", "session_id": SESSION, "alias": "a/b", "value": {"type": "t", "x": HUGE}}, "value.x"),
    ({"command": "emit_event", "session_id": SESSION, "type": "ticket.hostile", "data": {"n": HUGE}}, "data.n"),
    (
        {
            "command": "post_thread_item",
            "session_id": SESSION,
            "alias": "c/1",
            "item": {"type": "json", "message": [HUGE]},
        },
        "item.message.0",
    ),
    (
        {
            "command": "write_objects",
            "session_id": SESSION,
            "objects": [{"alias": "a/b", "value": {"type": "t", "y": HUGE}}],
        },
        "objects.0.value.y",
    ),
    (
        {
            "command": "save_listener",
            "listener": {**LISTENER, "filter": {"where": [{"path": "depth", "op": "gt", "value": HUGE}]}},
        },
        "listener.filter.where.0.value",
    ),
    ({"command": "list_session_events", "session_id": SESSION, "after": HUGE}, "after"),
]


@pytest.mark.parametrize("text", HUGE_TEXTS)
@pytest.mark.parametrize(("body", "field"), OUT_OF_RANGE, ids=[f"{b['command']}-{f}" for b, f in OUT_OF_RANGE])
async def test_a_number_beyond_a_double_is_refused_naming_its_field(
    door: tuple[httpx.AsyncClient, Platform, str], body: dict[str, Any], field: str, text: str
) -> None:
    http, platform, session = door
    raw = _with_huge(json.loads(json.dumps(body).replace(json.dumps(SESSION)[1:-1], session)), text)
    before = await snapshot(platform, session)
    response = await http.post("/v1/commands", content=raw)
    _check(response)
    reply = response.json()
    assert (response.status_code, reply["error"]) == (400, "invalid_request"), reply
    assert reply["message"].startswith(f"{field}:"), reply
    assert await snapshot(platform, session) == before


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32-le"])
async def test_a_body_in_utf_16_or_32_holding_a_nul_or_a_huge_number_is_refused_naming_its_field(
    door: tuple[httpx.AsyncClient, Platform, str], encoding: str
) -> None:
    """JSON in UTF-16 or UTF-32 is read as it is; what it holds is checked as in UTF-8 (it answered 500)."""
    http, platform, session = door
    before = await snapshot(platform, session)
    for value, says in [("a\u0000b", "a NUL"), ("1e400", "a number beyond")]:
        text = f'{{"command": "write_object", "session_id": "{session}", "alias": "a/b", "value": {{"type": "t",'
        text += f' "x": {value if value[0].isdigit() else json.dumps(value)}}}}}'
        response = await http.post("/v1/commands", content=text.encode(encoding))
        _check(response)
        reply = response.json()
        assert (response.status_code, reply["error"]) == (400, "invalid_request"), reply
        assert reply["message"].startswith("value.x:") and says in reply["message"], reply
    assert await snapshot(platform, session) == before


# Bodies of the right shape with values generated: valid ones, and ones a field's own rules refuse (a number out
# of range, a glob that is not one, a `where` of any shape). Whatever they are, the door answers 2xx, or a 4xx
# whose message names a field; never a 5xx.
_numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=False, allow_infinity=False), st.just(HUGE)
)
_values = st.one_of(st.none(), st.booleans(), _numbers, st.text(max_size=12), st.lists(_numbers, max_size=3))
_paths = st.sampled_from(["alias", "type", "depth", "data.n", "item.role", "source.client", "nope", "data.a.b", ""])
_ops = st.sampled_from(
    ["eq", "neq", "in", "not_in", "exists", "gt", "gte", "lt", "lte", "prefix", "contains", "like", ""]
)
_condition = st.fixed_dictionaries({"path": _paths, "op": _ops}, optional={"value": _values})
_where_item = st.recursive(
    _condition,
    lambda inner: st.one_of(
        st.fixed_dictionaries({"any": st.lists(inner, min_size=0, max_size=3)}),
        st.fixed_dictionaries({"not": inner}),
    ),
    max_leaves=8,
)


@st.composite
def listener_bodies(draw: st.DrawFn) -> dict[str, Any]:
    body = {
        "name": "shaped",
        "filter": {
            "types": draw(st.sampled_from([["object.written"], ["object.**", "ticket.hostile"], ["ticket.*"]])),
            "where": draw(st.lists(_where_item, max_size=4)),
        },
        "action": {"type": "object", "alias": "out/x", "value": {"type": "x"}},
    }
    if draw(st.booleans()):
        body["batch"] = {"window_seconds": draw(_numbers), "max_events": draw(_numbers)}
    if draw(st.booleans()):
        body["concurrency"] = {"mode": "keyed", "key": draw(_paths), "max_parallel": draw(_numbers)}
    if draw(st.booleans()):
        fitting = st.one_of(st.sampled_from([1, 2, 60, 0.5]), _numbers)
        throttle = {"per_seconds": draw(fitting), "runs": draw(fitting)}
        body["throttle"] = {**throttle, "key": draw(_paths)} if draw(st.booleans()) else throttle
    return body


# A key made opens no more doors to the rest (the API is open only while no key exists), and a session deleted
# leaves the rest nothing to act on: both are tested on their own.
SHAPED = sorted(set(VALID) - {"create_api_key", "delete_session"})


@st.composite
def shaped_bodies(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.sampled_from(SHAPED))
    body: dict[str, Any] = {"command": name, **VALID[name][0]}
    if "listener" in body:
        body["listener"] = draw(listener_bodies())
    for field in [f for f in body if f not in ("command", "session_id", "listener")]:
        if draw(st.integers(0, 3)) == 0:
            body[field] = draw(st.one_of(_values, st.dictionaries(st.text(max_size=5), _values, max_size=3)))
    for field in [f for f, v in body.items() if isinstance(v, dict) and f != "listener"]:
        if draw(st.integers(0, 3)) == 0:
            body[field] = {**body[field], draw(st.sampled_from(["n", "x", "type"])): draw(_numbers)}
    return body


@pytest.fixture
async def door_to_temporal(
    door: tuple[httpx.AsyncClient, Platform, str], dev_env: WorkflowEnvironment
) -> tuple[httpx.AsyncClient, Platform, str]:
    """The door with Temporal behind it (its dev server: schedules too), as every deployment has."""
    door[1].temporal = dev_env.client
    return door


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=shaped_bodies(), huge=st.sampled_from(HUGE_TEXTS))
@pytest.mark.devserver
async def test_a_body_of_any_shape_answers_2xx_or_a_4xx_naming_a_field(
    door_to_temporal: tuple[httpx.AsyncClient, Platform, str], body: dict[str, Any], huge: str
) -> None:
    http, _, session = door_to_temporal
    raw = _with_huge(json.loads(json.dumps(body).replace(json.dumps(SESSION)[1:-1], session)), huge)
    response = await http.post("/v1/commands", content=raw)
    assert response.status_code < 500, (raw[:2000], response.text)
    reply = response.json()
    event(f"{response.status_code} {reply.get('error', '')}")
    if response.status_code >= 400:
        assert reply["status"] == "error" and reply["error"] != "internal_error", reply
        assert ":" in reply["message"], reply


def as_decimals(value: Any) -> Any:
    """`value` with every JSON number read as the decimal its text says, told apart from `true` and `false`."""

    def tagged(found: Any) -> Any:
        if isinstance(found, dict):
            return {k: tagged(v) for k, v in found.items()}
        if isinstance(found, list):
            return [tagged(v) for v in found]
        return ("number", found) if isinstance(found, Decimal) else (type(found).__name__, found)

    return tagged(json.loads(json.dumps(value), parse_float=Decimal, parse_int=Decimal))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=listener_bodies())
@example(
    body={
        "name": "shaped",
        "filter": {
            "types": ["object.written"],
            "where": [{"path": "alias", "op": "eq", "value": 2.433951857169229e16}],
        },
        "action": {"type": "object", "alias": "out/x", "value": {"type": "x"}},
    }
)
async def test_an_accepted_listener_is_kept_as_written_and_parses_again_to_itself(
    door: tuple[httpx.AsyncClient, Platform, str], body: dict[str, Any]
) -> None:
    http, _, _ = door
    if HUGE in json.dumps(body):
        return  # the test above's business
    response = await http.post("/v1/commands", json={"command": "save_listener", "listener": body})
    assert response.status_code < 500, response.text
    if response.json()["status"] != "success":
        return
    stored = (await http.post("/v1/commands", json={"command": "get_listener", "name": "shaped"})).json()
    kept = stored["listener"]["body"]
    # As JSON numbers, by value: PostgreSQL keeps a number as the decimal its text says, so a float written as
    # 2.433951857169229e+16 reads back as the integer 24339518571692290 that text denotes (which the float itself
    # only approximates, so Python's int and float differ).
    assert as_decimals(kept["filter"]) == as_decimals(body["filter"]), "the filter is kept as written"
    declaration = parse_declaration(kept, Limits(), {"ticket.hostile": {"type": "object"}})
    assert declaration.model_dump(mode="json", exclude_unset=True) == kept


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"a": [value]}
    return value


# JSON nested past the depth, under one field of the body: the refusal names that field, not the body.
NESTED: list[tuple[dict[str, Any], str]] = [
    (
        {"command": "write_object", "session_id": SESSION, "alias": "a/b", "value": {"type": "t", "x": _nested(60)}},
        "value",
    ),
    ({"command": "save_listener", "listener": {**LISTENER, "description": _nested(60)}}, "listener"),
    (
        {
            "command": "post_thread_items",
            "session_id": SESSION,
            "alias": "c/1",
            "items": [{"type": "json", "message": _nested(60)}],
        },
        "items",
    ),
    ({"command": "list_objects", "session_id": SESSION, "surplus": _nested(60)}, "surplus"),
]


@pytest.mark.parametrize(("body", "field"), NESTED, ids=[f"{b['command']}-{f}" for b, f in NESTED])
async def test_json_nested_past_the_depth_is_refused_naming_the_field_it_is_under(
    door: tuple[httpx.AsyncClient, Platform, str], body: dict[str, Any], field: str
) -> None:
    response = await refused_and_nothing_changed(door, body)
    assert response.json()["message"] == f"{field}: JSON nested deeper than 100 levels"
