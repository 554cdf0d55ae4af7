"""`orchestrator mcp` through the MCP SDK's own client: the CLI launched as a subprocess over stdio (and once over
streamable HTTP) against a platform this test serves over HTTP with a bootstrap token, its engine running.

An admin key lists every command as a tool, saves a listener, writes, and has the event explained; a read-only
key lists no tool that writes, and a write it tries anyway is the platform's refusal, flagged as an error.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp
import pytest
from mcp.client.stdio import StdioServerParameters
from pydantic import SecretStr
from temporalio.testing import WorkflowEnvironment

from orchestrator.commands import COMMANDS
from orchestrator.commands.reference import SHARED_MEANINGS, command_schema
from orchestrator.config import Settings
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.mcp_server.tools import LEADS, READ_DOC, SEARCH_DOCS
from orchestrator.platform import Platform
from tests.engine.harness import eventually, recorder_listener, running_engine

CLI = str(Path(sys.executable).parent / "orchestrator")
TOKEN = "mcp-bootstrap-t0ken"
DOCS_TOOLS = {SEARCH_DOCS, READ_DOC}
MCP_DOC = (Path(__file__).parent.parent / "docs" / "mcp.md").read_text()


def _listed_in_the_docs(lead: str) -> set[str]:
    """The tools docs/mcp.md's transcript lists after `<- {lead}:`, over its lines."""
    at = MCP_DOC.index(f"<- {lead}: ") + len(f"<- {lead}: ")
    listed = MCP_DOC[at : MCP_DOC.index("\n->", at)]
    return {name.strip() for name in listed.replace("\n", " ").split(",")}


@pytest.fixture
async def served(platform: Platform, settings: Settings, temporal_env: WorkflowEnvironment) -> AsyncIterator[str]:
    """The platform's HTTP API (with the bootstrap token) and its engine: the router, lanes and runs."""
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping}
    )
    async with running_engine(platform, temporal_env.client):
        guarded = settings.model_copy(update={"api_token": SecretStr(TOKEN)})
        async with serve_api(create_app(platform, guarded), "127.0.0.1", 0) as url:
            yield url


def stdio(url: str, key: str) -> mcp.Client:
    """The SDK's client, launching `orchestrator mcp` over stdio as the key `key`."""
    return mcp.Client(
        StdioServerParameters(command=CLI, args=["mcp", "--url", url], env={"ORCHESTRATOR_API_TOKEN": key}),
        read_timeout_seconds=60,
    )


async def call(client: mcp.Client, tool: str, **arguments: Any) -> tuple[bool, Any]:
    """Whether the tool answered an error, and its text (decoded when it is JSON)."""
    result = await client.call_tool(tool, arguments)
    [content] = result.content
    assert isinstance(content, mcp.types.TextContent)
    try:
        return result.is_error, json.loads(content.text)
    except ValueError:
        return result.is_error, content.text


async def test_an_admin_key_lists_every_command_saves_a_listener_writes_and_has_the_event_explained(
    served: str,
) -> None:
    async with stdio(served, TOKEN) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == set(COMMANDS) | DOCS_TOOLS
        assert f"<- {len(tools)} tools: capture_table" in MCP_DOC, "docs/mcp.md's transcript counts them"

        write = tools["write_object"]
        assert "command" not in write.input_schema["properties"]
        assert set(write.input_schema["required"]) == {"session_id", "alias", "value"}
        assert write.input_schema["properties"]["alias"] == command_schema("write_object")["properties"]["alias"]
        assert write.input_schema["properties"]["session_id"]["description"] == SHARED_MEANINGS["session_id"]
        assert write.annotations is not None and write.annotations.read_only_hint is False
        explain = tools["explain_event"]
        assert explain.description is not None and explain.description.startswith(LEADS["explain_event"])
        reply = explain.description.split("Reply: ", 1)[1]
        assert reply.startswith("`event` {") and "`routed`" in reply and "`listeners`" in reply, reply
        assert explain.annotations is not None and explain.annotations.read_only_hint is True

        failed, saved = await call(client, "save_listener", listener=recorder_listener(batch={"window_seconds": 0.2}))
        assert (failed, saved["listener"]["name"]) == (False, "orchestrate")
        _, opened = await call(client, "open_session", alias="mcp")
        sid = opened["session"]["id"]
        failed, written = await call(client, "write_object", session_id=sid, alias="missions/1", value={"type": "m"})
        assert not failed and written["status"] == "success"

        explained: dict[str, Any] = {}

        async def batch_known() -> bool:
            nonlocal explained
            _, explained = await call(client, "explain_event", session_id=sid, event_id=written["event_id"])
            fate = next(item for item in explained["listeners"] if item["listener"] == "orchestrate")
            batches = fate.get("batches") or []
            return bool(batches) and batches[0].get("outcome") is not None

        await eventually(batch_known, within=60, what="the event explained with its batch's outcome")
        [fate] = explained["listeners"]
        assert fate["matched"] is True and fate["batches"][0]["outcome"]["status"] == "success"

        _, lanes = await call(client, "list_session_listeners", session_id=sid)
        assert [listener["name"] for listener in lanes["listeners"]] == ["orchestrate"]

        # An error reply is the command's JSON too, flagged as an error.
        failed, missing = await call(client, "read_object", session_id=sid, alias="missions/none")
        assert failed and missing["error"] == "not_found"
        failed, refused = await call(client, "write_object", session_id=sid, alias="missions/2")
        assert failed and refused["error"] == "invalid_request" and refused["message"].startswith("value")
        # An argument named `command` is a field no command has: refused as any unknown one (it was dropped).
        failed, named = await call(client, "read_object", session_id=sid, alias="missions/1", command="delete_session")
        assert failed and named["error"] == "invalid_request" and named["message"] == "command: is not known", named

        failed, found = await call(client, SEARCH_DOCS, query="why a lane waits")
        assert not failed and found["sections"][0]["page"] == "listeners.md"
        assert found["sections"][0]["heading"] == "Why a lane waits"
        failed, section = await call(client, READ_DOC, page="listeners.md", heading="Why a lane waits")
        assert not failed and section.startswith("### Why a lane waits")
        # The docs tools' refusals, and a tool of no name, in the commands' error shape.
        failed, nope = await call(client, READ_DOC, page="nope.md")
        assert failed and nope["error"] == "not_found" and nope["message"].startswith("page: no page 'nope.md'")
        for arguments, field in (({}, "query"), ({"query": " "}, "query"), ({"query": "lane", "limit": 0}, "limit")):
            failed, bad = await call(client, SEARCH_DOCS, **arguments)
            assert failed and bad["error"] == "invalid_request" and bad["message"].startswith(f"{field}:"), bad
        failed, unknown = await call(client, "no_such_tool")
        assert failed and unknown == {
            "status": "error",
            "error": "not_found",
            "message": "name: no tool 'no_such_tool'",
        }


async def test_a_key_without_write_scopes_sees_no_tool_that_writes_and_a_write_is_refused(
    served: str, platform: Platform
) -> None:
    created = await platform.command({"command": "create_api_key", "name": "reader", "scopes": ["read:**"]})
    admin_sid = (await platform.command({"command": "open_session", "alias": "read"}))["session"]["id"]

    async with stdio(served, created["key"]["secret"]) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        _, me = await call(client, "whoami")

    commands = set(tools) - DOCS_TOOLS
    assert commands == set(me["commands"])
    assert _listed_in_the_docs(f"{len(tools)} tools") == set(tools), "docs/mcp.md's transcript for a read:** key"
    assert {"read_object", "list_session_events", "explain_event", "simulate_listener", "whoami"} <= commands
    for name in ("write_object", "post_thread_item", "save_listener", "open_session", "emit_event", "create_api_key"):
        assert name not in tools, name
    assert all(tool.annotations is not None and tool.annotations.read_only_hint for tool in tools.values())

    # What it was not offered, asked for all the same, is the platform's refusal.
    async with stdio(served, created["key"]["secret"]) as client:
        failed, refused = await call(client, "write_object", session_id=admin_sid, alias="a", value={"type": "t"})
    assert failed and refused["error"] in ("access_denied", "not_found")


async def test_a_key_the_platform_refuses_lists_no_tools_and_says_why(served: str) -> None:
    async with stdio(served, "ork_not_a_key") as client:
        with pytest.raises(mcp.MCPError) as refused:
            await client.list_tools()
    assert "whoami" in refused.value.message and "bearer token is not valid" in refused.value.message


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_over_streamable_http_when_asked(served: str) -> None:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        CLI,
        "mcp",
        "--url",
        served,
        "--token",
        TOKEN,
        "--http",
        str(port),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:

        async def listening() -> bool:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                return False
            writer.close()
            return True

        await eventually(listening, within=30, what="orchestrator mcp --http listening")
        async with mcp.Client(f"http://127.0.0.1:{port}/mcp") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            _, me = await call(client, "whoami")
        assert names == set(COMMANDS) | DOCS_TOOLS
        assert me["key"]["name"] == "bootstrap"
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 30)
