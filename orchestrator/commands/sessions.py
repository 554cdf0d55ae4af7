"""Commands on sessions: open, close (at once, or once drained), reopen, list."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from orchestrator.commands.fields import Alias, Limit, SessionId
from orchestrator.commands.registry import Request, command

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext


class OpenSession(Request):
    command: Literal["open_session"]
    alias: Alias | None = Field(
        default=None, description="the session's alias: one in use answers that session, open or closed"
    )


class SessionRef(Request):
    command: Literal["reopen_session"]
    session_id: SessionId


class ListSessions(Request):
    command: Literal["list_sessions"]
    status: Literal["open", "closed"] | None = Field(default=None, description="only the sessions with this status")
    limit: Limit = Field(default=100, description="the most sessions answered")


class CloseSession(Request):
    command: Literal["close_session"]
    session_id: SessionId
    # Close once what is pending now has fired and its runs have ended, instead of at once (which skips
    # pending batches as `session_not_open`): replies that arrive around a resolution still reach a run.
    drain: bool = Field(default=False, description="close once what is pending now has fired and its runs have ended")


@command("open_session", OpenSession, reply="`session` {id, alias, status}")
async def open_session(platform: CommandContext, req: OpenSession) -> dict[str, Any]:
    """Open a session; an alias already in use answers that session (opening is idempotent by alias)."""
    return {"session": await platform.store.open_session(req.alias)}


@command(
    "close_session",
    CloseSession,
    reply="`session` {id, alias, status}; while a drain waits, also `draining: true` and `drains_through`"
    " (the last event id it waits for)",
    errors=("not_found",),
)
async def close_session(platform: CommandContext, req: CloseSession) -> dict[str, Any]:
    """Close a session: at once (pending batches are then skipped as `session_not_open`), or with `drain:
    true` once what is pending now has fired and its runs have ended."""
    if req.drain:
        return {"session": await platform.store.drain_session(req.session_id)}
    return {"session": await platform.store.set_session_status(req.session_id, "closed")}


@command(
    "list_sessions",
    ListSessions,
    reply="`sessions` [{id, alias, status, created_at, closed_at, last_event_id, draining}]",
)
async def list_sessions(platform: CommandContext, req: ListSessions) -> dict[str, Any]:
    """The newest sessions first (a dashboard's list), with where each one's stream stands."""
    return {"sessions": await platform.store.list_sessions(req.status, req.limit)}


@command("reopen_session", SessionRef, reply="`session` {id, alias, status}", errors=("not_found",))
async def reopen_session(platform: CommandContext, req: SessionRef) -> dict[str, Any]:
    """Open a closed session again: it takes writes again, and its listeners fire on what comes next."""
    return {"session": await platform.store.set_session_status(req.session_id, "open")}
