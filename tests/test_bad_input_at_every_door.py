"""Bad input a client builds, at every door: a reply naming the field, never an exception and never a 500.

What JSON has no form for (a set, a date, NaN) is refused by the Python client before it sends, as the API
refuses it; a lone surrogate goes escaped and the API refuses it by name; the CLI prints the refusal. A path
the API does not serve, or a method a path does not take, is answered in the commands' envelope. A setting the
environment spells wrong stops a command line naming its variable.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from orchestrator.client import Client
from orchestrator.config import Settings
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform

CLI = str(Path(sys.executable).parent / "orchestrator")


@pytest.fixture
async def door(platform: Platform, settings: Settings) -> AsyncIterator[tuple[str, str]]:
    session = (await platform.command({"command": "open_session"}))["session"]["id"]
    async with serve_api(create_app(platform, settings), "127.0.0.1", 0) as url:
        yield url, session


def _write(session: str, extra: Any) -> dict[str, Any]:
    return {"command": "write_object", "session_id": session, "alias": "a/b", "value": {"type": "t", "x": extra}}


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ({1, 2}, "value.x: a set is no JSON value"),
        (datetime(2026, 1, 1, tzinfo=UTC), "value.x: a datetime is no JSON value"),
        (b"raw", "value.x: a bytes is no JSON value"),
        (math.nan, "value.x: a number beyond a double's range (or NaN) cannot be stored"),
        ([math.inf], "value.x.0: a number beyond a double's range (or NaN) cannot be stored"),
        ("\ud800", "value.x: a lone surrogate (\\ud800 to \\udfff) cannot be stored"),
        ({("a",): 1}, "value.x: a key must be a string in JSON; this one is ('a',)"),
        ({math.nan: 1}, "value.x: a key must be a string in JSON; this one is nan"),
    ],
)
async def test_the_python_client_answers_a_refusal_naming_the_field_and_nothing_is_written(
    door: tuple[str, str], platform: Platform, extra: Any, said: str
) -> None:
    url, session = door
    async with Client.http(url) as http:
        reply = await http.command(_write(session, extra))
    local = await Client.local(platform).command(_write(session, extra))

    assert reply == {"status": "error", "error": "invalid_request", "message": said}
    assert local == reply
    listed = await platform.command({"command": "list_objects", "session_id": session})
    assert listed["objects"] == []


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
async def test_a_bulk_emit_holding_nan_or_an_infinity_is_refused_and_never_stored_as_null(
    platform: Platform, bad: float
) -> None:
    """The store encodes a bulk write's checked rows with msgspec, which writes NaN as null: the command's checks
    are what keeps such a value from becoming a null nobody wrote."""
    session = (await platform.command({"command": "open_session"}))["session"]["id"]
    assert (await platform.command({"command": "save_event_type", "name": "t.n", "schema": {}}))["status"] == "success"
    events = [{"type": "t.n", "data": {"n": 1}}, {"type": "t.n", "data": {"n": bad}}]

    reply = await Client.local(platform).command({"command": "emit_events", "session_id": session, "events": events})

    assert reply == {
        "status": "error",
        "error": "invalid_request",
        "message": "events.1.data.n: a number beyond a double's range (or NaN) cannot be stored",
    }
    listed = await platform.command({"command": "list_session_events", "session_id": session, "types": ["t.n"]})
    assert listed["events"] == []


async def test_a_surrogate_sent_as_raw_bytes_is_refused_naming_its_field(
    door: tuple[str, str], platform: Platform
) -> None:
    url, session = door
    # `ED A0 80`: `\ud800` as UTF-8 would spell it, which UTF-8 forbids and Python's JSON reader takes.
    raw = (
        b'{"command": "write_object", "session_id": "%s", "alias": "a/b", "value": {"type": "t", "x": "\xed\xa0\x80"}}'
    )
    async with httpx.AsyncClient(base_url=url) as http:
        response = await http.post("/v1/commands", content=raw % session.encode())

    assert response.status_code == 400, response.text
    assert response.json()["message"].startswith("value.x: a lone surrogate"), response.text
    assert (await platform.command({"command": "list_objects", "session_id": session}))["objects"] == []


async def test_a_run_s_input_past_the_payload_limit_is_refused_naming_it(platform: Platform) -> None:
    session = (await platform.command({"command": "open_session"}))["session"]["id"]
    body = {"command": "start_execution", "session_id": session, "workflow": "w", "input": {"x": "é" * 140_000}}

    reply = await platform.command(body)

    # Weighed as stored, in UTF-8: 280,008 bytes (its escapes would weigh 840,008).
    assert reply == {
        "status": "error",
        "error": "limit_exceeded",
        "message": "input: 280008 bytes is over the payload limit of 262144",
    }
    assert (await platform.command({"command": "list_executions", "session_id": session}))["executions"] == []


async def test_the_cli_prints_the_refusal_of_a_lone_surrogate(door: tuple[str, str]) -> None:
    url, session = door
    env = {k: v for k, v in os.environ.items() if not k.lower().startswith("orchestrator_")}
    env["ORCHESTRATOR_HTTP_PORT"] = url.rsplit(":", 1)[1]
    body = json.dumps(_write(session, "\ud800"))  # the escape `\ud800` in the JSON text given to the CLI
    process = await asyncio.create_subprocess_exec(
        CLI, "call", body, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)

    assert process.returncode == 1, err
    assert json.loads(out)["message"].startswith("value.x: a lone surrogate"), out
    assert b"Traceback" not in err


@pytest.mark.parametrize(
    ("method", "path", "status", "code", "allow"),
    [
        ("GET", "/v1/commands", 405, "invalid_request", "POST"),
        ("PUT", "/v1/commands", 405, "invalid_request", "POST"),
        ("GET", "/v1/nothing-here", 404, "not_found", None),
        ("POST", "/v1/openapi.json", 405, "invalid_request", "GET, HEAD"),
    ],
)
async def test_a_path_or_a_method_the_api_does_not_serve_is_answered_in_the_envelope(
    door: tuple[str, str], method: str, path: str, status: int, code: str, allow: str | None
) -> None:
    url, _ = door
    async with httpx.AsyncClient(base_url=url) as http:
        response = await http.request(method, path)

    assert response.status_code == status
    assert response.headers["content-type"].startswith("application/json")
    reply = response.json()
    assert reply["status"] == "error" and reply["error"] == code, reply
    assert reply["message"].startswith("method:" if status == 405 else "path:"), reply
    allowed = response.headers.get("allow")
    assert (allowed and set(allowed.split(", "))) == (allow and set(allow.split(", ")))


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"command": "post_thread_item", "alias": "b/t", "item": {"type": "text", "message": {"obj": 1}}}, "item"),
        (
            {
                "command": "post_thread_items",
                "alias": "b/t",
                "items": [{"type": "text", "message": "fine"}, {"type": "text", "message": [1]}],
            },
            "items.1",
        ),
    ],
)
async def test_a_text_items_message_that_is_no_text_is_refused_naming_its_field_and_nothing_is_posted(
    door: tuple[str, str], body: dict[str, Any], said: str
) -> None:
    url, session = door
    async with httpx.AsyncClient(base_url=url) as http:
        response = await http.post("/v1/commands", json={**body, "session_id": session})
        listed = await http.post(
            "/v1/commands", json={"command": "list_thread_items", "session_id": session, "alias": "b/t"}
        )

    reply = response.json()
    assert response.status_code == 400 and reply["error"] == "invalid_request", reply
    assert reply["message"].startswith(f"{said}.message: must be a string"), reply
    assert listed.json()["items"] == [], "nothing of a refused request is posted"


async def test_a_listener_on_an_objects_value_is_refused_at_save_as_its_events_carry_its_rev_alone(
    door: tuple[str, str],
) -> None:
    url, _ = door
    listener = {
        "name": "on_status",
        "filter": {"types": ["object.written"], "where": [{"path": "data.status", "op": "eq", "value": "done"}]},
        "action": {"type": "workflow", "workflow": "w"},
    }
    async with httpx.AsyncClient(base_url=url) as http:
        response = await http.post("/v1/commands", json={"command": "save_listener", "listener": listener})
        found = await http.post("/v1/commands", json={"command": "get_listener", "name": "on_status"})

    reply = response.json()
    assert response.status_code == 400 and reply["error"] == "invalid_request", reply
    assert reply["message"] == (
        "listener.filter.where.0.path: path 'data.status' never resolves: the data of object.written holds data.rev"
    ), reply
    assert found.json()["error"] == "not_found", "nothing of a refused save is kept"


def test_a_setting_spelled_wrong_stops_the_command_naming_its_variable() -> None:
    env = {k: v for k, v in os.environ.items() if not k.lower().startswith("orchestrator_")}
    env.update(ORCHESTRATOR_LIMITS__MAX_EVENTS_PER_BATCH="2000", ORCHESTRATOR_RUN_CHECK_SECONDS="soon")
    done = subprocess.run(
        [CLI, "call", "--local", '{"command": "list_listeners"}'], capture_output=True, text=True, env=env, timeout=60
    )

    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "ORCHESTRATOR_LIMITS__MAX_EVENTS_PER_BATCH: Input should be less than or equal to 1000" in done.stderr
    assert "ORCHESTRATOR_RUN_CHECK_SECONDS:" in done.stderr and "'soon'" in done.stderr


@pytest.mark.parametrize("number", ["1e15", "1000000000000000.0"])
@pytest.mark.parametrize(
    ("request_", "said"),
    [
        (
            {"command": "write_object", "alias": "a/b", "value": {"type": "t", "x": "NUMBERS"}},
            "value: 323018 bytes is over the payload limit of 262144",
        ),
        (
            {"command": "post_thread_item", "alias": "b/t", "item": {"type": "json", "message": {"x": "NUMBERS"}}},
            "item.message: 323007 bytes is over the payload limit of 262144",
        ),
    ],
)
async def test_a_payload_past_the_limit_is_refused_however_its_numbers_are_spelled(
    door: tuple[str, str], platform: Platform, request_: dict[str, Any], said: str, number: str
) -> None:
    """`1e15` is 4 bytes of a body and 18 as stored (`1000000000000000.0`): 17,000 of them, an 85 KB body, were
    let by unweighed (a value was taken to weigh at most 3 times its text) and stored at 323 KB."""
    url, session = door
    body = json.dumps({**request_, "session_id": session}).replace('"NUMBERS"', "[" + ",".join([number] * 17_000) + "]")
    async with httpx.AsyncClient(base_url=url) as http:
        response = await http.post("/v1/commands", content=body.encode())

    assert response.status_code == 422, response.text
    assert response.json()["message"] == said, response.text
    assert (await platform.command({"command": "list_session_events", "session_id": session}))["events"] == []
