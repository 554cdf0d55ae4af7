"""Small helpers the store contract tests share: run a command and insist on its outcome."""

from __future__ import annotations

from typing import Any

from orchestrator.platform import Platform


async def ok(platform: Platform, command: str, **args: Any) -> dict[str, Any]:
    reply = await platform.command({"command": command, **args})
    assert reply["status"] == "success", reply
    return reply


async def refused(platform: Platform, code: str, field: str | None, command: str, **args: Any) -> dict[str, Any]:
    reply = await platform.command({"command": command, **args})
    assert reply["status"] == "error", reply
    assert reply["error"] == code, reply
    if field is not None:
        assert field in reply["message"], reply
    return reply


async def all_events(platform: Platform, session_id: str) -> list[dict[str, Any]]:
    reply = await ok(platform, "list_session_events", session_id=session_id, limit=1000)
    return list(reply["events"])
