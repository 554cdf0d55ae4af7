"""Commands on sessions: open (with a retention of its own), close (at once, or once drained), reopen, list,
delete (the session and everything of it, its Temporal side included: `orchestrator.lanes.retention`)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from orchestrator.commands.access import current_principal
from orchestrator.commands.fields import Alias, Limit, SessionId
from orchestrator.commands.registry import Request, command
from orchestrator.commands.replies import Reply, Shape
from orchestrator.core.retention import SessionRetention
from orchestrator.lanes.retention import Retention

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext


class OpenSession(Request):
    command: Literal["open_session"]
    alias: Alias | None = Field(
        default=None, description="the session's alias: one in use answers that session, open or closed"
    )
    retention: SessionRetention | None = Field(
        default=None,
        description="the session's own retention, where it differs from the deployment's (ORCHESTRATOR_RETENTION__*)",
    )


class DeleteSession(Request):
    command: Literal["delete_session"]
    session_id: SessionId


class SessionRef(Request):
    command: Literal["reopen_session"]
    session_id: SessionId


class GetSession(Request):
    command: Literal["get_session"]
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


class SessionView(Shape):
    """A session."""

    id: str
    alias: str | None
    status: Literal["open", "closed"]
    draining: bool | None = Field(default=None, description="true while it closes once its pending work ends")
    drains_through: int | None = Field(default=None, description="while it drains: the last event id it waits for")


class SessionReply(Reply):
    session: SessionView


class OpenSessionReply(SessionReply):
    retention: SessionRetention | None = Field(default=None, description="with `retention`: the session's own")


class DeletedSession(Shape):
    id: str
    status: Literal["deleted"]


class DeleteSessionReply(Reply):
    session: DeletedSession
    complete: bool = Field(description="false: the workers finish it")
    rows_deleted: int


class ListedSession(Shape):
    """A session, and where its stream stands."""

    id: str
    alias: str | None
    status: Literal["open", "closed"]
    created_at: datetime
    closed_at: datetime | None
    last_event_id: int
    draining: bool


class ListSessionsReply(Reply):
    sessions: list[ListedSession] = Field(description="the newest first")


class GetSessionReply(Reply):
    session: ListedSession = Field(description="as `list_sessions` tells each")


@command(
    "open_session",
    OpenSession,
    reply=OpenSessionReply,
    example={"command": "open_session", "alias": "support/7", "retention": {"event_seconds": 2592000}},
)
async def open_session(platform: CommandContext, req: OpenSession) -> dict[str, Any]:
    """Open a session; an alias already in use answers that session (opening is idempotent by alias). A
    `retention` given is the session's own from then on (also for a session opened before)."""
    session = await platform.store.open_session(req.alias)
    if req.retention is None:
        return {"session": session}
    own = await platform.store.set_session_retention(session["id"], req.retention)
    return {"session": session, "retention": own}


@command(
    "delete_session",
    DeleteSession,
    reply=DeleteSessionReply,
    errors=("not_found",),
    example={"command": "delete_session", "session_id": "ses_..."},
)
async def delete_session(platform: CommandContext, req: DeleteSession) -> dict[str, Any]:
    """Delete a session and everything of it: not_found from the start; its workflows ended, the captures of
    tables into it alone ended (in the transaction that marks it), and its rows deleted before the answer, unless
    that takes longer than a few seconds (`complete` false: the workers finish it) or this door has no Temporal."""
    done, rows = await Retention(platform.store, platform.temporal, platform.settings).delete(req.session_id)
    return {"session": {"id": req.session_id, "status": "deleted"}, "complete": done, "rows_deleted": rows}


@command(
    "close_session",
    CloseSession,
    reply=SessionReply,
    errors=("not_found",),
    example={"command": "close_session", "session_id": "ses_...", "drain": True},
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
    reply=ListSessionsReply,
    example={"command": "list_sessions", "status": "open", "limit": 20},
)
async def list_sessions(platform: CommandContext, req: ListSessions) -> dict[str, Any]:
    """The newest sessions first (a dashboard's list), with where each one's stream stands: those the caller's
    key reads."""
    grant = current_principal().grant
    aliases = None if grant.admin else grant.read_globs()
    return {"sessions": await platform.store.list_sessions(req.status, req.limit, aliases)}


@command(
    "get_session",
    GetSession,
    reply=GetSessionReply,
    errors=("not_found",),
    example={"command": "get_session", "session_id": "ses_..."},
)
async def get_session(platform: CommandContext, req: GetSession) -> dict[str, Any]:
    """One session by its id, as `list_sessions` tells each (which holds only the newest): its alias, status and
    where its stream stands."""
    return {"session": await platform.store.describe_session(req.session_id)}


@command(
    "reopen_session",
    SessionRef,
    reply=SessionReply,
    errors=("not_found",),
    example={"command": "reopen_session", "session_id": "ses_..."},
)
async def reopen_session(platform: CommandContext, req: SessionRef) -> dict[str, Any]:
    """Open a closed session again: it takes writes again, and its listeners fire on what comes next."""
    return {"session": await platform.store.set_session_status(req.session_id, "open")}
