"""A `where` is bounded by what it costs per event, and a mismatch says a large value in a few hundred characters.

A filter is checked against every event a listener could take, and `simulate_listener` and `explain_event` check
it in the API's process: an `in` of 100,000 values held `simulate_listener` 24 s on a stream of 330 events
(Python compared each event with every value, and wrote the whole list into each mismatch's message). Through the
HTTP door, such a body is refused naming the field and nothing is saved; a large `eq` value, which stays allowed, is
simulated within the door's deadline with short messages. A listener saved before the bound (a stored body is read
as it was saved) still routes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from orchestrator.config import Settings
from orchestrator.core.declaration import MAX_WHERE_VALUES, ListenerDeclaration
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform
from tests.lane_worlds.postgres import PgWorld
from tests.lane_worlds.world import lane_address, route_round


def _listener(where: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": "wide",
        "filter": {"types": ["object.written"], "where": where},
        "action": {"type": "object", "alias": "out/x", "value": {"type": "x"}},
    }


@pytest.fixture
async def door(platform: Platform, settings: Settings) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    session = (await platform.command({"command": "open_session"}))["session"]["id"]
    objects = [{"alias": f"t/{n}", "value": {"type": "t", "n": n}} for n in range(1000)]
    for _ in range(2):
        written = await platform.command({"command": "write_objects", "session_id": session, "objects": objects})
        assert written["status"] == "success", written
    async with (
        serve_api(create_app(platform, settings), "127.0.0.1", 0) as url,
        httpx.AsyncClient(base_url=url, timeout=60) as http,
    ):
        yield http, session


async def _answer(http: httpx.AsyncClient, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The door's status and answer, within its deadline (25 s for `simulate_listener`): a simulation that held the
    event loop past it is answered 503 `unavailable`, which no test here takes for an answer."""
    response = await http.post("/v1/commands", json=body)
    return response.status_code, response.json()


WIDE: list[tuple[list[dict[str, Any]], str]] = [
    ([{"path": "alias", "op": "in", "value": [f"x/{n}" for n in range(100_000)]}], "listener.filter.where.0.value"),
    (
        [{"path": "data.rev", "op": "not_in", "value": list(range(MAX_WHERE_VALUES + 1))}],
        "listener.filter.where.0.value",
    ),
    # Spread over conditions and groups, each one within the bound.
    (
        [{"any": [{"path": "data.rev", "op": "not_in", "value": list(range(500))}] * 4}],
        "listener.filter.where",
    ),
]


@pytest.mark.parametrize("command", ["save_listener", "simulate_listener"])
@pytest.mark.parametrize(("where", "field"), WIDE, ids=["in-100000", "not_in-past-the-bound", "spread"])
async def test_a_where_past_its_bound_is_refused_naming_the_field_at_once(
    door: tuple[httpx.AsyncClient, str], command: str, where: list[dict[str, Any]], field: str
) -> None:
    http, session = door
    body = {"command": command, "listener": _listener(where)}
    if command == "simulate_listener":
        body["session_id"] = session

    status, reply = await _answer(http, body)

    assert (status, reply["error"]) == (400, "invalid_request"), reply
    assert reply["message"].startswith(f"{field}: "), reply["message"][:300]
    assert str(MAX_WHERE_VALUES) in reply["message"], reply["message"][:300]
    listed = (await http.post("/v1/commands", json={"command": "list_listeners"})).json()
    assert listed["listeners"] == [], "nothing of a refused body is saved"


async def test_a_where_at_its_bound_is_simulated_in_seconds(door: tuple[httpx.AsyncClient, str]) -> None:
    http, session = door
    where = [{"path": "alias", "op": "in", "value": [f"x/{n}" for n in range(1, MAX_WHERE_VALUES)]}]
    body = {"command": "simulate_listener", "session_id": session, "listener": _listener(where)}

    status, reply = await _answer(http, body)

    assert status == 200, reply
    assert (reply["events"], reply["matched"]) == (2000, 0)


async def test_a_large_eq_value_is_simulated_in_a_moment_and_its_mismatches_say_it_briefly(
    door: tuple[httpx.AsyncClient, str],
) -> None:
    http, session = door
    where = [{"path": "alias", "op": "eq", "value": list(range(100_000))}]
    body = {"command": "simulate_listener", "session_id": session, "listener": _listener(where)}

    status, reply = await _answer(http, body)

    assert status == 200, reply
    assert (reply["events"], reply["matched"]) == (2000, 0)
    message = reply["unmatched_events"][0]["message"]
    assert message.startswith("filter.where.0: alias eq [0, 1, 2, "), message[:300]
    assert len(message) < 400, message[:600]


async def test_a_listener_stored_before_the_bound_is_read_as_saved_and_routes(platform: Platform) -> None:
    """The bound is on input: a body saved by a release before it (here the store's own save, as that release's
    command stored it) is read back, compiled and routed as it was saved, not refused on every read."""
    world = PgWorld(platform)
    wide = [f"x/{n}" for n in range(2 * MAX_WHERE_VALUES)]
    body = _listener([{"path": "alias", "op": "in", "value": [*wide, "a/1"]}])
    with pytest.raises(ValidationError):
        ListenerDeclaration.model_validate(body, context={"limits": platform.settings.limits})
    stored = ListenerDeclaration.model_validate(body).model_dump(mode="json", exclude_unset=True)
    await platform.store.save_listener(body["name"], stored, 0.0)
    session = await world.open_session()
    await world.write(session, "a/1")
    await world.write(session, "b/1")

    routed, queued = await route_round(world, session, platform.settings.limits.listener_parallel_runs)

    assert queued == {("wide", "_"): [routed.read - 1]}, queued
    snap = await world.lanes.snapshot(lane_address(session, "wide", "_"))
    assert snap is not None and snap.listener is not None and snap.pending == 1
