"""Every command's example body with one field made bad at a time, through the HTTP door: a 4xx naming the field.

Each case starts from a valid body, a command's own example (docs/commands.md, the registry's `example`) or one of
`EXTRA` (the fields the examples leave out), on a world staged as that page says (the door an operator's, so a key
a case makes does not close it), and changes one thing: a field given a value of another JSON type, an empty or 100 KB
string, a NUL or a lone surrogate, an integer past 64 bits or a number past a double, a negative, JSON nested a
thousand deep, a list of 100,000 items, text that looks like SQL or a glob, an alias that climbs out, RTL text,
a date out of range; a field left out; a field the body does not know; a listener's `where` of an odd shape.
Whatever it is, the door answers within its deadline with JSON: 2xx (the body was still valid), or a 4xx whose
`error` is a code and whose `message` starts with a field of the body; never a 5xx. A refusal changes nothing.
The cases are drawn with a fixed seed, so a run fails the same way again.
"""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
import pytest
from pydantic import SecretStr
from temporalio.testing import WorkflowEnvironment

from examples.desk.tables import TABLE
from orchestrator.commands import COMMANDS
from orchestrator.config import Settings
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform
from tests.store.helpers import STATE_TABLES

SESSION = "ses_..."
TOKEN = "the-operators-token"
SEED = 20261207


@dataclass(frozen=True)
class Raw:
    """JSON text put in the body as it is: what `json.dumps` will not write (`1e309`, `NaN`)."""

    text: str


# name -> value; one of them replaces one field at a time.
ODD: dict[str, Any] = {
    "string": "x",
    "int": 7,
    "float": 1.5,
    "true": True,
    "false": False,
    "null": None,
    "empty_list": [],
    "empty_object": {},
    "list": ["x"],
    "object": {"a": 1},
    "empty": "",
    "long": "x" * 100_000,
    "nul": "a\u0000b",
    "surrogate": "\ud800",
    "big": 2**63,
    "small": -(2**63) - 1,
    "huge": 2**64,
    "negative": -1,
    "zero": 0,
    "1e309": Raw("1e309"),
    "-1e309": Raw("-1e309"),
    "nan": Raw("NaN"),
    "infinity": Raw("Infinity"),
    "deep": Raw('{"a": ' * 1000 + '"x"' + "}" * 1000),
    "many": list(range(100_000)),
    "sql": "'; DROP TABLE orchestrator.events; --",
    "globs": "**",
    "double_slash": "a//b",
    "climb": "../x",
    "rtl": "\u202etxt.exe",
    "hebrew": "שלום/עולם",
    "emoji": "🙂",
    "date_far": "9999-12-31T23:59:59Z",
    "date_past_far": "10000-01-01T00:00:00Z",
    "date_year_zero": "0000-01-01T00:00:00Z",
    "date_bad": "2026-13-45T25:61:61Z",
    "date_offset": "2026-01-01T00:00:00+25:00",
    "date_naive": "2026-01-01T00:00:00",
    "tiny": 1e-320,
    "fraction": 0.000001,
}


def _odd_where() -> dict[str, list[Any]]:
    """`where` lists of odd shapes: groups nested, empty, of wrong types; ops given what they cannot take."""
    cond = {"path": "item.role", "op": "eq", "value": "request"}
    nested: Any = cond
    for _ in range(60):
        nested = {"not": {"any": [nested]}}
    return {
        "where_empty_any": [{"any": []}],
        "where_empty_all": [{"all": []}],
        "where_not_list": [{"not": [cond]}],
        "where_not_null": [{"not": None}],
        "where_nested": [nested],
        "where_all_any_not": [{"all": [{"any": [{"not": cond}, cond]}, {"not": {"all": [cond]}}]}],
        "where_group_and_cond": [{"any": [cond], "path": "alias", "op": "exists"}],
        "where_two_groups": [{"any": [cond], "not": cond}],
        "where_in_huge": [{"path": "alias", "op": "in", "value": [f"a{i}" for i in range(100_000)]}],
        "where_in_scalar": [{"path": "alias", "op": "in", "value": "a"}],
        "where_in_mixed": [{"path": "alias", "op": "in", "value": [1, "a", None, [1], {"a": 1}]}],
        "where_gt_string": [{"path": "depth", "op": "gt", "value": "x"}],
        "where_gt_list": [{"path": "depth", "op": "gt", "value": [1]}],
        "where_gt_big": [{"path": "depth", "op": "gt", "value": 2**70}],
        "where_eq_object": [{"path": "data.a", "op": "eq", "value": {"a": {"b": [1]}}}],
        "where_exists_value": [{"path": "alias", "op": "exists", "value": 1}],
        "where_prefix_number": [{"path": "alias", "op": "prefix", "value": 1}],
        "where_prefix_nul": [{"path": "alias", "op": "prefix", "value": "a\u0000"}],
        "where_contains_pattern": [{"path": "alias", "op": "contains", "value": "%_\\" * 1000}],
        "where_like": [{"path": "alias", "op": "like", "value": "(a+)+$"}],
        "where_regex": [{"path": "alias", "op": "regex", "value": "(a+)+$"}],
        "where_unknown_op": [{"path": "alias", "op": "DROP", "value": 1}],
        "where_path_sql": [{"path": "data.'; DROP TABLE x; --", "op": "exists"}],
        "where_path_deep": [{"path": ".".join(["a"] * 5000), "op": "exists"}],
        "where_path_empty_seg": [{"path": "data..a", "op": "exists"}],
        "where_path_index": [{"path": "data.a.-1", "op": "exists"}],
        "where_path_nul": [{"path": "data.a\u0000", "op": "exists"}],
        "where_many": [cond] * 10_000,
        "where_created_at_bad": [{"path": "created_at", "op": "gt", "value": "10000-01-01T00:00:00Z"}],
        "where_created_at_num": [{"path": "created_at", "op": "gt", "value": 2**63}],
    }


def _paths(value: Any, at: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """Every field of a body and of what it holds, outermost first (a list's items by index)."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        if at == () and key == "command":
            continue
        yield (*at, key)
        yield from _paths(inner, (*at, key))


def _set(body: Any, path: tuple[str | int, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(body, dict):
        return {**body, str(head): _set(body.get(str(head)), rest, value)}
    copy = list(body)
    copy[int(head)] = _set(copy[int(head)], rest, value)
    return copy


def _drop(body: Any, path: tuple[str | int, ...]) -> Any:
    head, rest = path[0], path[1:]
    if rest:
        copy = dict(body) if isinstance(body, dict) else list(body)
        copy[head] = _drop(body[head], rest)  # type: ignore[index]
        return copy
    if isinstance(body, dict):
        return {k: v for k, v in body.items() if k != head}
    return [v for i, v in enumerate(body) if i != head]


def _get(body: Any, path: tuple[str | int, ...]) -> Any:
    for key in path:
        body = body[key]
    return body


@dataclass(frozen=True)
class Case:
    command: str
    field: str  # the field changed, dotted as the platform names fields
    kind: str  # what it was given
    body: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.command}-{self.field}-{self.kind}"


def _dotted(path: tuple[str | int, ...]) -> str:
    return ".".join(str(part) for part in path)


FULL_LISTENER: dict[str, Any] = {
    "name": "full",
    "filter": {
        "types": ["object.written"],
        "aliases": ["tickets/**"],
        "where": [
            {"path": "alias", "op": "prefix", "value": "tickets/"},
            {
                "any": [
                    {"path": "source.client", "op": "in", "value": ["web", "cli"]},
                    {"not": {"path": "depth", "op": "gt", "value": 3}},
                ]
            },
            {"path": "created_at", "op": "gte", "value": "2026-01-01T00:00:00Z"},
        ],
    },
    "concurrency": {"mode": "keyed", "key": "alias", "key_segments": 2, "max_parallel": 4},
    "batch": {
        "window_seconds": 2,
        "max_events": 50,
        "distinct_by": "alias",
        "debounce_seconds": 1,
        "max_wait_seconds": 10,
    },
    "action": {
        "type": "thread_item",
        "alias": "log/{{ event.alias }}",
        "item": {"type": "text", "message": "{{ event.alias }} changed"},
    },
    "receipt": {"alias": "receipts/full"},
    "idle": {"after_seconds": 60},
    "owns": ["log/**"],
    "priority": 2,
    "description": "all of it",
    "throttle": {"per_seconds": 60, "runs": 10, "key": "alias"},
}
WORKFLOW_LISTENER: dict[str, Any] = {
    "name": "wf",
    "filter": {"types": ["thread.item_posted"], "aliases": ["chats/*"]},
    "concurrency": {"mode": "keyed", "key": "alias"},
    "retry": {"attempts": 3, "delay_seconds": 5},
    "action": {
        "type": "workflow",
        "workflow": "responder",
        "input": {"thread": "{{ event.alias }}"},
        "task_queue": "q1",
    },
    "cancel_on": [
        {
            "types": ["thread.item_posted"],
            "where": [{"path": "item.role", "op": "eq", "value": "cancel"}],
            "key": "alias",
            "grace_seconds": 5,
        }
    ],
}
# Bodies beside the examples, with the fields the examples leave out.
EXTRA: list[dict[str, Any]] = [
    {"command": "save_listener", "listener": FULL_LISTENER},
    {"command": "save_listener", "listener": WORKFLOW_LISTENER},
    {"command": "simulate_listener", "session_id": SESSION, "listener": FULL_LISTENER, "after": 0, "before": 100},
    {"command": "create_schedule", "session_id": SESSION, "alias": "ops/once", "replace": True, "enabled": False,
     "repeat": {"type": "one_time", "invocation_time": "2030-01-01T00:00:00", "timezone": "UTC"},
     "target": {"workflow": "responder", "input": {"a": 1}}, "origin": {"blob": "x"}},
    {"command": "create_schedule", "session_id": SESSION, "alias": "ops/flat", "repeat": "recurring_cron",
     "cron_expression": "0 9 * * *", "timezone": "Europe/Paris", "start_date": "2029-01-01T00:00:00",
     "end_date": "2031-01-01T00:00:00", "replace": True,
     "invocation_target": {"target": {"session": SESSION}, "alias": "ops/flat", "value": {"type": "tick"}}},
    {"command": "update_schedule", "session_id": SESSION, "alias": "ops/clock", "enabled": True,
     "start_date": "2029-01-01T00:00:00", "end_date": "2031-01-01T00:00:00", "invocation_target_type": "object",
     "target": {"alias": "ops/clock", "value": {"type": "tick"}}},
    {"command": "list_executions", "session_id": SESSION, "status": "running", "newest_first": True, "limit": 5},
    {"command": "list_session_events", "session_id": SESSION, "after": 0, "before": 50, "limit": 10},
    {"command": "list_thread_items", "session_id": SESSION, "alias": "chats/7", "after": "itm_x", "limit": 5},
    {"command": "stop_execution", "session_id": SESSION, "execution_id": "exe:ses_...:respond:chats/7:2.0",
     "mode": "cancel", "reason": "why", "grace_seconds": 5},
    {"command": "write_object", "session_id": SESSION, "alias": "tickets/42/meta", "value": {"type": "ticket"},
     "idempotency_key": "k1"},
    {"command": "update_graph", "session_id": SESSION, "patch": {"nodes": {"m/1": {"type": "mission", "label": "x"}},
     "edges": {"remove": [{"from": "m/1", "to": "m/2", "type": "holds"}]}}, "client": "web", "idempotency_key": "g1"},
    {"command": "save_event_type", "name": "ticket.noted", "schema": {"type": "object"}, "allow": ["write:**"]},
    {"command": "start_execution", "session_id": SESSION, "workflow": "responder", "input": [1, "a"],
     "task_queue": "q1"},
    {"command": "redeliver", "session_id": SESSION, "listener": "respond", "after": 0, "through": 2, "client": "c"},
]  # fmt: skip


def all_cases() -> list[Case]:
    cases = []
    wheres = _odd_where()
    bases = [spec.example or {"command": name} for name, spec in sorted(COMMANDS.items())]
    for valid in bases + EXTRA:
        name = valid["command"]
        if any(valid is extra for extra in EXTRA):
            cases.append(Case(name, "", "as_is", valid))
        for path in [(), *_paths(valid)]:
            here = _get(valid, path) if path else valid
            if path:
                for kind, odd in ODD.items():
                    if odd != here or type(odd) is not type(here):
                        cases.append(Case(name, _dotted(path), kind, _set(valid, path, odd)))
                cases.append(Case(name, _dotted(path), "missing", _drop(valid, path)))
            if isinstance(here, dict):
                unknown = (*path, "surplus_field")
                cases.append(Case(name, _dotted(unknown), "unknown", _set(valid, unknown, 1)))
            if path and path[-1] == "filter" and isinstance(here, dict):
                for kind, where in wheres.items():
                    cases.append(Case(name, _dotted((*path, "where")), kind, _set(valid, (*path, "where"), where)))
    return cases


def chosen_cases(count: int) -> list[Case]:
    """`count` cases drawn with a fixed seed: one of each command first, then the rest at random."""
    cases = all_cases()
    rng = random.Random(SEED)
    by_command: dict[str, list[Case]] = {}
    for case in cases:
        by_command.setdefault(case.command, []).append(case)
    first = [rng.choice(found) for _, found in sorted(by_command.items())]
    rest = [case for case in cases if case not in first]
    return first + rng.sample(rest, min(len(rest), max(0, count - len(first))))


def encode(body: dict[str, Any], session: str) -> bytes:
    raws: list[str] = []

    def placeholder(value: Any) -> Any:
        if isinstance(value, Raw):
            raws.append(value.text)
            return f"$RAW{len(raws) - 1}$"
        if isinstance(value, dict):
            return {k: placeholder(v) for k, v in value.items()}
        if isinstance(value, list):
            return [placeholder(v) for v in value]
        if value == SESSION:
            return session
        if isinstance(value, str) and SESSION in value:
            return value.replace(SESSION, session)
        return value

    text = json.dumps(placeholder(body))
    for i, raw in enumerate(raws):
        text = text.replace(f'"$RAW{i}$"', raw)
    return text.encode()


RESPOND = COMMANDS["simulate_listener"].example["listener"]  # type: ignore[index]
ESCALATED = {"type": "object", "properties": {"priority": {"type": "integer"}}, "required": ["priority"]}
CLOCK = {"command": "create_schedule", "session_id": SESSION, "alias": "ops/clock", "replace": True,
         "repeat": {"type": "interval", "every_seconds": 900}, "invocation_target_type": "object",
         "target": {"alias": "ops/clock", "value": {"type": "tick"}}}  # fmt: skip


class World:
    """The door, and the world docs/commands.md stages for its examples (kept so after a command undoes it)."""

    def __init__(self, http: httpx.AsyncClient, platform: Platform, app_db: str) -> None:
        self.http, self.platform, self.app_db = http, platform, app_db
        self.session = ""

    async def call(self, body: dict[str, Any]) -> dict[str, Any]:
        reply: dict[str, Any] = (await self.http.post("/v1/commands", content=encode(body, self.session))).json()
        return reply

    async def stage(self) -> None:
        """Put back what a command may have taken away: idempotent, so cheap when nothing was."""
        got = await self.call({"command": "get_session", "session_id": SESSION}) if self.session else {}
        if got.get("status") != "success":
            opened = await self.call({"command": "open_session", "alias": "support"})
            self.session = opened["session"]["id"]
            await self.call({"command": "write_object", "session_id": SESSION, "alias": "tickets/42/meta",
                             "value": {"type": "ticket", "state": "open"}})  # fmt: skip
            await self.call({"command": "post_thread_item", "session_id": SESSION, "alias": "chats/7",
                             "item": {"type": "text", "role": "request", "message": "Hi"}})  # fmt: skip
        elif got["session"]["status"] != "open":
            await self.call({"command": "reopen_session", "session_id": SESSION})
        await self.call({"command": "save_event_type", "name": "ticket.escalated", "schema": ESCALATED})
        if (await self.call({"command": "get_listener", "name": "respond"}))["status"] != "success":
            await self.call({"command": "save_listener", "listener": RESPOND})
        await self.call({"command": "resume_listener", "name": "respond"})
        await self.call({"command": "switch_listener", "session_id": SESSION, "name": "respond", "enabled": True})
        await self.call(CLOCK)

    async def snapshot(self) -> dict[str, Any]:
        async with self.platform.store.transaction() as conn:
            counts = {t: await conn.fetchval(f"SELECT count(*) FROM orchestrator.{t}") for t in STATE_TABLES}
            objects = await conn.fetch("SELECT session_id, alias, rev FROM orchestrator.objects ORDER BY 1, 2")
            sessions = await conn.fetch("SELECT id, status FROM orchestrator.sessions ORDER BY 1")
        return {**counts, "objects": [tuple(r) for r in objects], "sessions": [tuple(r) for r in sessions]}


@pytest.fixture
async def world(
    platform: Platform, settings: Settings, fresh_db: str, dev_env: WorkflowEnvironment
) -> AsyncIterator[World]:
    conn = await asyncpg.connect(fresh_db)
    await conn.execute(TABLE)
    await conn.close()
    platform.temporal = dev_env.client
    closed = settings.model_copy(update={"api_token": SecretStr(TOKEN)})
    async with (
        serve_api(create_app(platform, closed), "127.0.0.1", 0) as url,
        httpx.AsyncClient(base_url=url, timeout=60, headers={"authorization": f"Bearer {TOKEN}"}) as http,
    ):
        world = World(http, platform, fresh_db)
        await world.stage()
        yield world


CASES = 500


def trouble(case: Case, status: int, text: str) -> str | None:
    """What is wrong with the door's answer to `case`, or None. A case that held the door past its deadline (10 s,
    25 s for the long commands) is answered 503 `unavailable`; one that held its event loop, not at all (the
    client's timeout): both are wrong here, with no clock read in the test."""
    try:
        reply = json.loads(text)
    except ValueError:
        return f"{status}, not JSON: {text[:200]!r}"
    if status >= 500 or reply.get("error") == "internal_error":
        return f"{status} {reply}"
    if status < 300:
        return None if reply.get("status") == "success" else f"{status} {reply}"
    if not (isinstance(reply.get("error"), str) and isinstance(reply.get("message"), str)):
        return f"{status} without an error and a message: {reply}"
    named = reply["message"].split(":", 1)[0]
    if ":" not in reply["message"] or not named or " " in named:
        return f"{status} names no field: {reply['message'][:300]!r}"
    return None


@pytest.mark.devserver
@pytest.mark.timeout(180)
async def test_every_command_with_one_field_made_bad_answers_2xx_or_a_4xx_naming_a_field_and_a_refusal_changes_nothing(
    world: World,
) -> None:
    found: list[str] = []
    for case in chosen_cases(CASES):
        before = await world.snapshot()
        try:
            response = await world.http.post("/v1/commands", content=encode(case.body, world.session))
            status, text = response.status_code, response.text
        except httpx.HTTPError as err:
            status, text = 0, repr(err)
        wrong = trouble(case, status, text)
        if 400 <= status < 500:
            after = await world.snapshot()
            if after != before:
                moved = {k: (before[k], after[k]) for k in after if after[k] != before[k]}
                wrong = f"{wrong or status}; a refusal changed {moved}"
        else:
            await world.stage()
        if wrong:
            found.append(f"{case.id}: {wrong}")
    assert not found, "\n".join(found)
