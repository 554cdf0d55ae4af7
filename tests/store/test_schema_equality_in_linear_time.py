"""A type's `uniqueItems` and `enum` are decided in time linear in the data: jsonschema compares each item with every
one before it when the items do not sort (objects, lists, kinds mixed), and each value with every choice of an
enum; an emitted array of 20,000 objects under `uniqueItems`, or of 20,000 numbers under an enum of 5,000, held the
API's event loop for minutes, the door's deadline and every other request waiting behind it. Through the HTTP door,
such an emit is answered (not `unavailable` at the door's deadline, nor never); equal items (as JSON values: 1 and
1.0 alike, true and 1 not) and a value outside the enum are refused naming the field, and nothing is emitted."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from orchestrator.config import Settings
from orchestrator.core.linear_equality import unique
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform

pytestmark = pytest.mark.timeout(120)

SCHEMA = {"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": True}}}
CHOICES = 5_000
ENUM = {"type": "object", "properties": {"xs": {"type": "array", "items": {"enum": list(range(CHOICES))}}}}
MANY = 20_000


@pytest.fixture
async def door(platform: Platform, settings: Settings) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    session = (await platform.command({"command": "open_session"}))["session"]["id"]
    for name, schema in (("qa.set", SCHEMA), ("qa.enum", ENUM)):
        saved = await platform.command({"command": "save_event_type", "name": name, "schema": schema})
        assert saved["status"] == "success", saved
    async with (
        serve_api(create_app(platform, settings), "127.0.0.1", 0) as url,
        httpx.AsyncClient(base_url=url, timeout=60) as http,
    ):
        yield http, session


async def _emit(http: httpx.AsyncClient, session: str, xs: list[Any], type_: str = "qa.set") -> dict[str, Any]:
    """The door's answer, within its deadline (10 s, `command_deadline_seconds`): a decision that held the event loop
    past it is answered `unavailable`, which no test here takes for an answer."""
    body = {"command": "emit_event", "session_id": session, "type": type_, "data": {"xs": xs}}
    return dict((await http.post("/v1/commands", json=body)).json())


@pytest.mark.parametrize(
    "xs",
    [
        [{"n": n} for n in range(MANY)],
        [[n] if n % 2 else [str(n)] for n in range(MANY)],
        [{"n": n} if n % 2 else n for n in range(MANY)],
    ],
    ids=["objects", "lists", "mixed"],
)
async def test_an_array_of_unique_items_that_do_not_sort_is_emitted_in_seconds(
    door: tuple[httpx.AsyncClient, str], xs: list[Any]
) -> None:
    http, session = door
    reply = await _emit(http, session, xs)
    assert reply["status"] == "success", reply


async def test_an_array_with_two_equal_items_is_refused_naming_the_field_and_nothing_is_emitted(
    door: tuple[httpx.AsyncClient, str],
) -> None:
    http, session = door
    reply = await _emit(http, session, [*({"n": n} for n in range(MANY)), {"n": 7.0}])
    assert (reply["error"], reply["message"][:8]) == ("invalid_request", "data.xs:"), reply["message"][:300]
    listed = (await http.post("/v1/commands", json={"command": "list_session_events", "session_id": session})).json()
    assert listed["events"] == []


@pytest.mark.parametrize(
    ("xs", "refused"),
    [
        ([n % CHOICES for n in range(MANY)], None),
        ([*(n % CHOICES for n in range(MANY - 1)), -1], "data.xs.19999: -1 is not one of [0, 1, 2"),
        ([-1] * MANY, "data.xs.0: -1 is not one of [0, 1, 2"),
    ],
    ids=["all-in", "the-last-out", "all-out"],
)
async def test_an_array_under_an_enum_of_thousands_is_decided_in_seconds(
    door: tuple[httpx.AsyncClient, str], xs: list[Any], refused: str | None
) -> None:
    http, session = door
    reply = await _emit(http, session, xs, "qa.enum")
    if refused is None:
        assert reply["status"] == "success", reply
    else:
        assert (reply["error"], reply["message"][: len(refused)]) == ("invalid_request", refused), reply["message"][
            :300
        ]


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        ([1, 1.0], False),
        ([True, 1], True),
        ([False, 0, None, ""], True),
        ([{"a": 1, "b": [1, 2]}, {"b": [1, 2.0], "a": 1.0}], False),
        ([{"a": 1}, {"a": True}], True),
        ([[1, 2], [2, 1]], True),
        (["1", 1], True),
        ([], True),
    ],
)
def test_items_are_equal_as_json_values_are(items: list[Any], expected: bool) -> None:
    assert unique(items) is expected
