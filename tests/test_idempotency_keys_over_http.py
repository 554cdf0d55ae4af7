"""A request's `idempotency_key` through the HTTP door, where the single and the bulk form of a write meet: one key
is one write whichever form sends it and however the two race; a bulk request is a retry only when its key
replays every item it gives; a refusal names the request's own `idempotency_key`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from orchestrator.config import Settings
from orchestrator.core.errors import KEY_REUSED
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform

PAIRS = 20
VALUE = {"type": "t"}
ITEM = {"type": "text", "role": "user", "message": "hi"}


@pytest.fixture
async def http(platform: Platform, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with (
        serve_api(create_app(platform, settings), "127.0.0.1", 0) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as client,
    ):
        yield client


async def _call(http: httpx.AsyncClient, command: str, **args: Any) -> tuple[int, dict[str, Any]]:
    response = await http.post("/v1/commands", json={"command": command, **args})
    return response.status_code, response.json()


async def _ok(http: httpx.AsyncClient, command: str, **args: Any) -> dict[str, Any]:
    status, reply = await _call(http, command, **args)
    assert status == 200, reply
    return reply


async def _events(http: httpx.AsyncClient, session_id: str) -> list[dict[str, Any]]:
    return list((await _ok(http, "list_session_events", session_id=session_id, limit=1000))["events"])


def _refused_for_the_key(status: int, reply: dict[str, Any]) -> bool:
    return status == 400 and reply["error"] == "invalid_request" and reply["message"] == KEY_REUSED


async def test_the_two_forms_of_a_write_sent_at_once_with_one_key_write_once(http: httpx.AsyncClient) -> None:
    """Each form checked the other's key in a read before its transaction: sent together, both read nothing and
    both wrote (an object at rev 2, a thread with the item twice)."""
    sid = (await _ok(http, "open_session"))["session"]["id"]
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for n in range(PAIRS):
        key, alias = f"obj-{n}", f"race/o{n}"
        single = {"command": "write_object", "alias": alias, "value": VALUE, "idempotency_key": key}
        bulk = {"command": "write_objects", "objects": [{"alias": alias, "value": VALUE}], "idempotency_key": key}
        pairs.append((single, bulk))
    for n in range(PAIRS):
        key, alias = f"item-{n}", f"race/t{n}"
        single = {"command": "post_thread_item", "alias": alias, "item": ITEM, "idempotency_key": key}
        bulk = {"command": "post_thread_items", "alias": alias, "items": [ITEM], "idempotency_key": key}
        pairs.append((single, bulk))
    for single, bulk in pairs:
        # Either may be first: the other is refused for the key, and nothing of it is written.
        replies = await asyncio.gather(*(_call(http, session_id=sid, **body) for body in (bulk, single)))
        assert sorted(status for status, _ in replies) == [200, 400], replies
        assert any(_refused_for_the_key(*reply) for reply in replies), replies
    written: dict[str, int] = {}
    for event in await _events(http, sid):
        written[event["alias"]] = written.get(event["alias"], 0) + 1
    assert written == {single["alias"]: 1 for single, _ in pairs}, "one write per key"
    for n in range(PAIRS):
        read = await _ok(http, "read_object", session_id=sid, alias=f"race/o{n}")
        assert read["object"]["rev"] == 1


async def test_a_bulk_request_whose_key_replays_some_of_its_items_is_refused_and_writes_nothing(
    http: httpx.AsyncClient,
) -> None:
    """A bulk retry with one item more wrote that item: a key replaying part of a request names another request.
    All of its items replayed is a retry, none a new write."""
    sid = (await _ok(http, "open_session"))["session"]["id"]
    objects = [{"alias": f"b/{x}", "value": VALUE} for x in "cd"]
    items = [{**ITEM, "id": f"i{x}"} for x in "cd"]
    first_objects = await _ok(http, "write_objects", session_id=sid, objects=objects, idempotency_key="X")
    first_items = await _ok(http, "post_thread_items", session_id=sid, alias="b/t", items=items, idempotency_key="Y")
    before = await _events(http, sid)

    more_objects = [*objects, {"alias": "b/e", "value": VALUE}]
    status, reply = await _call(http, "write_objects", session_id=sid, objects=more_objects, idempotency_key="X")
    assert _refused_for_the_key(status, reply), reply
    more_items = [*items, {**ITEM, "id": "ie"}]
    status, reply = await _call(
        http, "post_thread_items", session_id=sid, alias="b/t", items=more_items, idempotency_key="Y"
    )
    assert _refused_for_the_key(status, reply), reply
    assert await _events(http, sid) == before, "nothing of a refused request is written"
    status, reply = await _call(http, "read_object", session_id=sid, alias="b/e")
    assert status == 404, reply

    again = await _ok(http, "write_objects", session_id=sid, objects=objects, idempotency_key="X")
    assert again["event_ids"] == first_objects["event_ids"], "a retry answers the first request's result"
    again = await _ok(http, "post_thread_items", session_id=sid, alias="b/t", items=items, idempotency_key="Y")
    assert again["event_ids"] == first_items["event_ids"]
    assert await _events(http, sid) == before


async def test_a_reused_key_in_a_bulk_write_is_refused_naming_the_requests_idempotency_key(
    http: httpx.AsyncClient,
) -> None:
    """The key is the request's, not an item's: the message named `objects.0.idempotency_key` and
    `items.0.idempotency_key`, fields that do not exist."""
    sid = (await _ok(http, "open_session"))["session"]["id"]
    objects = [{"alias": f"r/{x}", "value": VALUE} for x in "cd"]
    await _ok(http, "write_objects", session_id=sid, objects=objects, idempotency_key="X")
    status, reply = await _call(http, "write_objects", session_id=sid, objects=objects[::-1], idempotency_key="X")
    assert _refused_for_the_key(status, reply), reply
    await _ok(http, "post_thread_items", session_id=sid, alias="r/t", items=[ITEM], idempotency_key="Y")
    status, reply = await _call(
        http, "post_thread_items", session_id=sid, alias="r/u", items=[ITEM], idempotency_key="Y"
    )
    assert _refused_for_the_key(status, reply), reply
