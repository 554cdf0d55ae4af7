"""The reference through the doors: `GET /v1/schema`, `orchestrator call --help`, and an unknown command's
answer naming the valid ones."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from orchestrator.client import Client
from orchestrator.commands import COMMANDS
from orchestrator.commands.reference import command_schema, listener_schema
from orchestrator.config import Settings
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform

CLI = str(Path(sys.executable).parent / "orchestrator")


@pytest.fixture
async def guarded_api(platform: Platform, settings: Settings) -> AsyncIterator[str]:
    guarded = settings.model_copy(update={"api_token": SecretStr("schema-token")})
    async with serve_api(create_app(platform, guarded), "127.0.0.1", 0) as url:
        yield url


async def test_the_schemas_are_served_without_a_token(guarded_api: str) -> None:
    async with httpx.AsyncClient(base_url=guarded_api) as http:
        index = (await http.get("/v1/schema")).json()
        one = await http.get("/v1/schema/write_object")
        listener = await http.get("/v1/schema/listener")
        missing = await http.get("/v1/schema/wirte_object")
        commands = await http.post("/v1/commands", json={"command": "list_listeners"})

    assert set(index["commands"]) == set(COMMANDS)
    assert index["listener"] == listener.json() == listener_schema()
    assert one.status_code == 200 and one.json() == command_schema("write_object")
    assert missing.status_code == 404
    assert missing.json()["error"] == "not_found"
    assert "did you mean 'write_object'" in missing.json()["message"]
    assert commands.status_code == 401  # the commands still need the token


async def test_an_unknown_command_lists_the_valid_ones(platform: Platform) -> None:
    client = Client.local(platform)

    nope = await client.command({"command": "nope"})
    near = await client.command({"command": "opne_session"})

    assert nope["error"] == "invalid_request"
    assert nope["message"].startswith("command: unknown command 'nope'. The commands are: ")
    listed = nope["message"].split("The commands are: ", 1)[1].split(", ")
    assert listed == sorted(COMMANDS)
    assert near["message"].startswith("command: unknown command 'opne_session'; did you mean 'open_session'")


async def _cli(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        CLI, "call", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_call_help_prints_a_commands_arguments() -> None:
    code, out, _ = await _cli("--help", "write_object")
    assert code == 0
    assert out.startswith("write_object: Replace the value at `alias`")
    for argument in ("session_id", "alias", "value", "if_rev", "client", "idempotency_key", "explain"):
        assert f"\n  {argument} " in out, argument
    assert "reply:  `object` {alias, rev}, `event_id`" in out
    assert "errors: invalid_request, not_found, session_not_open, rev_conflict, limit_exceeded" in out

    # The command named where the JSON goes is asked about too.
    code, again, _ = await _cli("write_object", "--help")
    assert (code, again) == (0, out)


def test_a_reader_that_stops_reading_ends_the_command_quietly() -> None:
    # `orchestrator call --help | head -0`: the pipe's reader is gone before the first line is written.
    with subprocess.Popen([CLI, "call", "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        err = proc.stderr.read()
        assert proc.wait(timeout=60) == 141
    assert b"Traceback" not in err and b"BrokenPipeError" not in err, err.decode()


async def test_call_help_alone_lists_every_command_and_an_unknown_one_is_a_usage_error() -> None:
    code, out, _ = await _cli("--help")
    assert code == 0
    assert "usage: orchestrator call" in out
    listed = [line.split()[0] for line in out.split("commands:\n", 1)[1].splitlines() if line.strip()]
    assert listed == sorted(COMMANDS)

    code, out, err = await _cli("--help", "nope")
    assert (code, out) == (2, "")
    assert f"unknown command 'nope'. The commands are: {', '.join(sorted(COMMANDS)[:2])}" in err
