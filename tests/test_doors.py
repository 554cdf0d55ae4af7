"""The three doors (Python client, HTTP, command line) answer the same JSON for the same command."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator.client import Client
from orchestrator.config import Settings
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform

Door = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
CLI = str(Path(sys.executable).parent / "orchestrator")


async def cli_call(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        CLI, "call", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def shape(value: Any) -> Any:
    """The structure of a reply with its scalar values replaced by their types (for ids that differ)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(item) for item in value]
    return type(value).__name__


@pytest.fixture
async def doors(platform: Platform, settings: Settings) -> AsyncIterator[dict[str, Door]]:
    async with serve_api(create_app(platform, settings), "127.0.0.1", 0) as url:
        local = Client.local(platform)
        http = Client.http(url)

        async def cli(body: dict[str, Any]) -> dict[str, Any]:
            code, out, err = await cli_call("--url", url, json.dumps(body))
            reply: dict[str, Any] = json.loads(out)
            assert code == (0 if reply["status"] == "success" else 1), err
            return reply

        yield {"local": local.command, "http": http.command, "cli": cli}
        await http.aclose()


async def through_all(doors: dict[str, Door], body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: await door(body) for name, door in doors.items()}


def assert_identical(replies: dict[str, dict[str, Any]]) -> dict[str, Any]:
    first = replies["local"]
    for name, reply in replies.items():
        assert reply == first, f"{name} answered differently from the Python client"
    return first


async def test_the_three_doors_answer_the_same_json(doors: dict[str, Door]) -> None:
    # Opening by alias is idempotent, so every door answers the same session.
    opened = assert_identical(await through_all(doors, {"command": "open_session", "alias": "doors"}))
    assert opened["status"] == "success"
    session_id = opened["session"]["id"]

    write = {
        "command": "write_object",
        "session_id": session_id,
        "alias": "doors/one",
        "value": {"type": "t"},
    }
    writes = await through_all(doors, write)
    assert shape(writes["http"]) == shape(writes["cli"]) == shape(writes["local"])
    assert [writes[name]["object"]["rev"] for name in ("local", "http", "cli")] == [1, 2, 3]

    read = {"command": "read_object", "session_id": session_id, "alias": "doors/one"}
    assert assert_identical(await through_all(doors, read))["status"] == "success"

    missing_value = {"command": "write_object", "session_id": session_id, "alias": "doors/one"}
    refused = assert_identical(await through_all(doors, missing_value))
    assert refused["status"] == "error"
    assert refused["error"] == "invalid_request"
    assert "value" in refused["message"]

    events = {"command": "list_session_events", "session_id": session_id}
    listed = assert_identical(await through_all(doors, events))
    # Three writes, and the refused ones changed nothing.
    assert [event["type"] for event in listed["events"]] == ["object.written"] * 3


async def test_the_command_line_exit_codes(doors: dict[str, Door], platform: Platform) -> None:
    code, out, _ = await cli_call("--url", "http://127.0.0.1:1", '{"command": "list_listeners"}')
    assert (code, out) == (3, "")

    code, out, _ = await cli_call("--url", "http://127.0.0.1:1", "{not json")
    reply = json.loads(out)
    assert code == 2
    assert (reply["status"], reply["error"]) == ("error", "invalid_request")
    assert reply["message"].startswith("command:")
