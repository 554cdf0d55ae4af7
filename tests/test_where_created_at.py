"""`created_at` orderings through the HTTP door: a value in another zone is compared as the instant it names, and a
value that names no instant is refused at save and in a stream's filter, naming the field. (The SQL routing is
held to Python's by `tests/store/test_routing_sql.py`.)"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import httpx
import pytest

from orchestrator.client import Client
from orchestrator.config import Settings
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform
from tests.test_streams import query


@pytest.fixture
async def url(platform: Platform, settings: Settings) -> AsyncIterator[str]:
    async with serve_api(create_app(platform, settings), "127.0.0.1", 0) as served:
        yield served


def _listener(name: str, op: str, value: Any) -> dict[str, Any]:
    where = [{"path": "created_at", "op": op, "value": value}]
    return {"name": name, "filter": {"types": ["object.written"], "where": where}, "action": {"type": "workflow",
            "workflow": "w"}}  # fmt: skip


def _in_zone(at: datetime, hours: int) -> str:
    return at.astimezone(timezone(timedelta(hours=hours))).isoformat()


async def test_a_listener_compares_the_commit_time_with_an_instant_written_in_any_zone(url: str) -> None:
    now = datetime.now(UTC)
    # As text each of the first two would read the other way: the local hour of -12:00 is eleven hours before UTC's
    # an hour from now, and that of +12:00 eleven hours after an hour ago.
    listeners = {
        "before_an_hour_on": ("lt", _in_zone(now + timedelta(hours=1), -12), True),
        "after_an_hour_ago": ("gt", _in_zone(now - timedelta(hours=1), 12), True),
        "after_an_hour_on": ("gte", (now + timedelta(hours=1)).isoformat().replace("+00:00", "Z"), False),
    }
    async with Client.http(url) as door:
        for name, (op, value, _) in listeners.items():
            saved = await door.command({"command": "save_listener", "listener": _listener(name, op, value)})
            assert saved["status"] == "success", saved
        sid = (await door.open_session())["session"]["id"]
        written = await door.write_object(sid, "tickets/1", {"type": "ticket"})
        explained = await door.explain_event(sid, written["event_id"])
    matched = {found["listener"]: found["matched"] for found in explained["listeners"]}
    assert matched == {name: taken for name, (_, _, taken) in listeners.items()}, explained


@pytest.mark.parametrize("value", ["2026-12-06", "2026-12-06T14:00:00", "2026-13-01T00:00:00Z", "now", 1765029600])
async def test_an_ordering_of_created_at_with_no_instant_is_refused_naming_the_value(url: str, value: Any) -> None:
    async with Client.http(url) as door:
        reply = await door.command({"command": "save_listener", "listener": _listener("early", "gt", value)})
        assert (reply["status"], reply["error"]) == ("error", "invalid_request"), reply
        assert reply["message"].startswith("listener.filter.where.0.value: created_at compares with an instant"), reply
        assert (await door.command({"command": "get_listener", "name": "early"}))["error"] == "not_found"
        sid = (await door.open_session())["session"]["id"]
    flt = {"where": [{"path": "created_at", "op": "lte", "value": value}]}
    async with httpx.AsyncClient(base_url=url) as http:
        response = await http.get(f"/v1/sessions/{sid}/stream?{query(filter=flt)}")
    assert response.status_code == 400, response.text
    assert json.loads(response.text)["message"].startswith("filter.where.0.value: created_at compares"), response.text
