"""Commands on sessions: open, close, reopen."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from orchestrator.commands.fields import Alias, SessionId
from orchestrator.commands.registry import Request, command

if TYPE_CHECKING:
    from orchestrator.platform import Platform


class OpenSession(Request):
    command: Literal["open_session"]
    alias: Alias | None = None


class SessionRef(Request):
    command: Literal["close_session", "reopen_session"]
    session_id: SessionId


@command("open_session", OpenSession)
async def open_session(platform: Platform, req: OpenSession) -> dict[str, Any]:
    """Open a session; an alias already in use answers that session (opening is idempotent by alias)."""
    return {"session": await platform.store.open_session(req.alias)}


@command("close_session", SessionRef)
async def close_session(platform: Platform, req: SessionRef) -> dict[str, Any]:
    return {"session": await platform.store.set_session_status(req.session_id, "closed")}


@command("reopen_session", SessionRef)
async def reopen_session(platform: Platform, req: SessionRef) -> dict[str, Any]:
    return {"session": await platform.store.set_session_status(req.session_id, "open")}
