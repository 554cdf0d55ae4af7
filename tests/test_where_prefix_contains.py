"""`prefix` and `contains` through the surfaces a user touches: a listener's `where` saved and simulated over HTTP,
a `cancel_on` and a stream's filter; a value of the wrong kind is refused at save, naming the field. (Waits are
`tests/engine/test_waits.py`'s; the SQL routing is held to Python's by `tests/store/test_routing_sql.py`.)"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from orchestrator.client import Client
from orchestrator.config import Settings
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform
from tests.test_streams import opened, query

# Requests, but not a chat's slash commands, that speak of a refund (a substring; `%` and `_` are plain text).
REFUNDS: dict[str, Any] = {
    "types": ["thread.item_posted"],
    "where": [
        {"path": "item.message", "op": "contains", "value": "refund"},
        {"not": {"path": "item.message", "op": "prefix", "value": "/"}},
        {
            "any": [
                {"path": "alias", "op": "prefix", "value": "chats/"},
                {"path": "item.message", "op": "contains", "value": "50%"},
            ]
        },
    ],
}
MESSAGES = [
    ("chats/1", "a refund, please", True),
    ("chats/2", "/refund 42", False),
    ("chats/3", "Refund?", False),  # text is compared as it is: no case folding
    ("mail/1", "a refund of 50%", True),
    ("mail/2", "a refund of 5000", False),
    ("mail/3", "a refund of 50_", False),
]


@pytest.fixture
async def url(platform: Platform, settings: Settings) -> AsyncIterator[str]:
    async with serve_api(create_app(platform, settings), "127.0.0.1", 0) as served:
        yield served


def listener(flt: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"name": "refunds", "filter": flt, "action": {"type": "workflow", "workflow": "w"}, **more}


async def test_a_listener_with_prefix_and_contains_saves_and_simulates_taking_what_its_where_names(url: str) -> None:
    async with Client.http(url) as door:
        sid = (await door.open_session())["session"]["id"]
        wanted = []
        for alias, message, taken in MESSAGES:
            item = {"type": "text", "role": "user", "message": message}
            posted = await door.command(
                {"command": "post_thread_item", "session_id": sid, "alias": alias, "item": item}
            )
            if taken:
                wanted.append(posted["event_id"])
        saved = await door.command({"command": "save_listener", "listener": listener(REFUNDS)})
        assert saved["status"] == "success", saved
        stored = await door.command({"command": "get_listener", "name": "refunds"})
        assert stored["listener"]["body"]["filter"] == REFUNDS, "stored as written"
        tried = await door.command({"command": "simulate_listener", "session_id": sid, "listener": listener(REFUNDS)})
        assert tried["status"] == "success", tried
        assert sorted(i for batch in tried["batches"] for i in batch["event_ids"]) == wanted


async def test_a_stream_filters_by_prefix_and_contains(url: str, platform: Platform) -> None:
    sid = (await platform.command({"command": "open_session"}))["session"]["id"]
    async with opened(url, sid, filter=REFUNDS) as next_message:
        wanted = []
        for alias, message, taken in MESSAGES:
            item = {"type": "text", "role": "user", "message": message}
            posted = await platform.command(
                {"command": "post_thread_item", "session_id": sid, "alias": alias, "item": item}
            )
            if taken:
                wanted.append(posted["event_id"])
        got: list[int] = []
        while len(got) < len(wanted):
            got += [e["id"] for e in (await next_message())["data"]["events"]]
    assert got == wanted


async def test_cancel_on_takes_prefix_and_contains(url: str) -> None:
    cancel_on = [
        {"types": ["object.deleted"], "where": [{"path": "alias", "op": "prefix", "value": "docs/"}]},
        {"types": ["thread.item_posted"], "where": [{"path": "item.message", "op": "contains", "value": "stop"}]},
    ]
    body = {**listener({"types": ["object.written"]}), "cancel_on": cancel_on}
    async with Client.http(url) as door:
        saved = await door.command({"command": "save_listener", "listener": body})
        assert saved["status"] == "success", saved
        stored = (await door.command({"command": "get_listener", "name": "refunds"}))["listener"]["body"]
        assert [{k: entry[k] for k in ("types", "where")} for entry in stored["cancel_on"]] == cancel_on


@pytest.mark.parametrize(
    ("condition", "field", "says"),
    [
        ({"path": "alias", "op": "prefix", "value": 7}, "listener.filter.where.0.value", "op prefix needs a string"),
        (
            {"path": "alias", "op": "prefix", "value": ["a"]},
            "listener.filter.where.0.value",
            "op prefix needs a string",
        ),
        ({"path": "alias", "op": "prefix"}, "listener.filter.where.0.value", "op prefix needs a value"),
        ({"path": "alias", "op": "contains"}, "listener.filter.where.0.value", "op contains needs a value"),
        ({"path": "alias", "op": "contains", "value": None}, "listener.filter.where.0.value", "null never matches"),
        ({"path": "item.nickname", "op": "contains", "value": "a"}, "listener.filter.where.0.path", "never resolves"),
        ({"path": "alias", "op": "starts_with", "value": "a"}, "listener.filter.where.0.op", "must be one of"),
    ],
)
async def test_a_value_of_the_wrong_kind_is_refused_at_save_naming_the_field(
    url: str, condition: dict[str, Any], field: str, says: str
) -> None:
    async with Client.http(url) as door:
        reply = await door.command({"command": "save_listener", "listener": listener({"where": [condition]})})
        assert (reply["status"], reply["error"]) == ("error", "invalid_request"), reply
        assert reply["message"].startswith(f"{field}: ") and says in reply["message"], reply
        in_cancel_on = {**listener({}), "cancel_on": [{"types": ["object.deleted"], "where": [condition]}]}
        reply = await door.command({"command": "save_listener", "listener": in_cancel_on})
        assert reply["status"] == "error", reply
        assert reply["message"].startswith(field.replace("filter", "cancel_on.0")), reply


async def test_a_streams_prefix_of_another_kind_is_refused_before_it_starts(url: str, platform: Platform) -> None:
    sid = (await platform.command({"command": "open_session"}))["session"]["id"]
    flt = {"where": [{"path": "alias", "op": "prefix", "value": 1}]}
    async with httpx.AsyncClient(base_url=url) as http:
        response = await http.get(f"/v1/sessions/{sid}/stream?{query(filter=flt)}")
    assert response.status_code == 400, response.text
    assert json.loads(response.text)["message"].startswith("filter.where.0.value: op prefix needs a string"), (
        response.text
    )
