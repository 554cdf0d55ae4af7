"""`orchestrator mcp`: the platform's commands as tools of the Model Context Protocol (its official SDK), over
stdio or streamable HTTP, and the docs to search and read.

Owns the MCP side: listing the tools a key may call (the platform's `whoami` answers which commands; `tools.py`
makes them tools) and calling one (the command's reply, as JSON text, flagged as an error when it is one). It
talks to the platform at a URL with one key, as `orchestrator call` does, so it holds no power of its own: the
platform judges every call, and a tool the key lacks is refused there too. Over HTTP, whoever reaches the port
acts as that key: it listens on loopback unless told otherwise.
"""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import uvicorn
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
)

from orchestrator.client import Client
from orchestrator.commands.registry import COMMANDS
from orchestrator.core.errors import CommandError, ErrorCode
from orchestrator.mcp_server import docs
from orchestrator.mcp_server.tools import READ_DOC, SEARCH_DOCS, tools_for

NAME = "orchestrator"
INSTRUCTIONS = """\
The orchestrator platform: an application declares listeners (which events it cares about, how to batch them,
what to run); the platform keeps sessions (objects, threads, events) in PostgreSQL and runs one action per batch
on Temporal. Each tool but the docs' is one command of the platform, called as this server's key: its arguments
are the command's, its reply the command's JSON. An error reply's message starts with the field at fault.
Begin with search_docs or read_doc (commands.md, listeners.md). When something did not happen, ask
explain_event about the event; list_session_listeners says why each lane waits; simulate_listener tries a
listener body on a session's history before save_listener saves it. whoami says what this key may do."""


def _version() -> str:
    try:
        return importlib.metadata.version("orchestrator")
    except importlib.metadata.PackageNotFoundError:
        return ""


def _text(value: Any, *, error: bool = False) -> CallToolResult:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return CallToolResult(content=[TextContent(text=text)], is_error=error)


def _refused(code: ErrorCode, message: str) -> CallToolResult:
    """A refusal of the server's own (its docs tools', a tool of no name), answered as a command's is."""
    return _text(CommandError(code, message).reply(), error=True)


class McpDoor:
    """The MCP server of one platform (`url`) and one key (`token`)."""

    def __init__(self, url: str, token: str | None, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.url = url
        self.token = token
        self._transport = transport
        self._client: Client | None = None
        self.server: Server[Any] = Server(
            NAME,
            version=_version(),
            instructions=INSTRUCTIONS,
            lifespan=self._lifespan,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
        )

    @asynccontextmanager
    async def _lifespan(self, _server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        async with Client.http(self.url, token=self.token, transport=self._transport) as client:
            self._client = client
            try:
                yield {}
            finally:
                self._client = None

    async def _command(self, body: dict[str, Any]) -> dict[str, Any]:
        """The platform's reply; a platform out of reach answers as an error reply saying so."""
        if self._client is None:
            raise RuntimeError("the MCP server is not running")
        try:
            return await self._client.command(body)
        except httpx.TransportError as err:
            # As the HTTP door says a platform out of reach: `unavailable`, worth a retry.
            message = f"platform: cannot reach it at {self.url}: {err!r}"
            return CommandError("unavailable", message).reply()

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        me = await self._command({"command": "whoami"})
        if me.get("status") != "success":
            raise MCPError(INTERNAL_ERROR, f"the platform at {self.url} answered whoami: {me.get('message')}", me)
        return ListToolsResult(tools=tools_for(me["commands"]))

    async def call_tool(self, ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> CallToolResult:
        arguments = dict(params.arguments or {})
        if params.name == SEARCH_DOCS:
            limit = arguments.get("limit", docs.DEFAULT_RESULTS)
            if not isinstance(arguments.get("query"), str) or not arguments["query"].strip():
                return _refused("invalid_request", "query: required, a string of some words")
            if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= docs.MAX_RESULTS:
                return _refused("invalid_request", f"limit: must be an integer from 1 to {docs.MAX_RESULTS}")
            return _text({"sections": docs.search(arguments["query"], limit)})
        if params.name == READ_DOC:
            page, heading = arguments.get("page"), arguments.get("heading")
            if not isinstance(page, str) or not isinstance(heading, str | None):
                return _refused("invalid_request", "page: required, a page's file name (heading: a string)")
            try:
                return _text(docs.read(page, heading))
            except docs.DocsError as err:
                return _refused("not_found", str(err))
        if params.name not in COMMANDS:
            return _refused("not_found", f"name: no tool {params.name!r}")
        if "command" in arguments:
            # The tool's name is the command: an argument of that name is a field no command has, as the door says.
            return _refused("invalid_request", "command: is not known")
        reply = await self._command({**arguments, "command": params.name})
        return _text(reply, error=reply.get("status") != "success")

    async def run_stdio(self) -> None:
        async with stdio_server() as (read, write):
            await self.server.run(read, write, self.server.create_initialization_options())

    async def run_http(self, host: str, port: int) -> None:
        """Streamable HTTP at `http://host:port/mcp`, until the process is stopped (the app's lifespan opens the
        client once for every MCP session)."""
        app = self.server.streamable_http_app(host=host)
        await uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")).serve()
