"""`orchestrator mcp`: the platform's commands as MCP tools, by the key's scopes, and its docs to search."""

from orchestrator.mcp_server.server import McpDoor

__all__ = ["McpDoor"]
