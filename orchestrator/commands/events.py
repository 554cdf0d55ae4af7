"""Reading a session's stream: `list_session_events`, and where the stream now starts once retention trimmed it.

A read from before what retention reached answers from the oldest event kept and says where the whole stream
now starts (`first_id`): the oldest event the session still holds, which lies below what retention reached when
a lane still waits on it, so no reply holds an event before its own `first_id`. Explain, replay and redeliver
on deleted history answer `past_retention` (`refuse_trimmed`) rather than a partial answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, Field

from orchestrator.commands.fields import EventId, Limit, Position, SessionId
from orchestrator.commands.registry import Request, command
from orchestrator.commands.replies import EventEnvelope, Reply
from orchestrator.core.declaration import unknown_types
from orchestrator.core.errors import CommandError
from orchestrator.core.globs import validate_glob

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext


def _type_glob(value: str) -> str:
    return validate_glob(value, "type")


class ListSessionEvents(Request):
    command: Literal["list_session_events"]
    session_id: SessionId
    after: Position | None = Field(default=None, description="only the events after this id")
    before: EventId | None = Field(default=None, description="only the events before this id")
    limit: Limit = Field(default=100, description="the most events answered")
    types: Annotated[list[Annotated[str, AfterValidator(_type_glob)]], Field(min_length=1)] | None = Field(
        default=None, description="only the events whose type matches one of these globs (`object.*`)"
    )


# What every read of the stream says when retention deleted events after its `after` (`where_it_starts`).
FIRST_ID = "when retention deleted events after `after`: where the stream now starts, its oldest event"


class ListSessionEventsReply(Reply):
    events: list[EventEnvelope] = Field(description="by id")
    last_id: int = Field(description="where to continue: the last id answered, or `after` if none")
    first_id: int | None = Field(default=None, description=FIRST_ID)
    warnings: list[str] | None = Field(
        default=None,
        description="with no events: each of `types` that matches no event type, the platform's nor one declared"
        " now (a typo?), with the closest known name",
    )


@command(
    "list_session_events",
    ListSessionEvents,
    reply=ListSessionEventsReply,
    errors=("not_found",),
    example={
        "command": "list_session_events",
        "session_id": "ses_...",
        "after": 0,
        "types": ["object.*", "thread.item_posted"],
        "limit": 100,
    },
)
async def list_session_events(platform: CommandContext, req: ListSessionEvents) -> dict[str, Any]:
    """Page the stream by id. `last_id` is where to continue: the last id answered, or `after` if none."""
    events = await platform.store.list_events(
        req.session_id, after=req.after, before=req.before, limit=req.limit, types=req.types
    )
    last_id = events[-1].id if events else (req.after or 0)
    reply: dict[str, Any] = {
        "events": [e.envelope() for e in events],
        "last_id": last_id,
        **await where_it_starts(platform, req.session_id, req.after or 0),
    }
    if not events and req.types:
        # Not refused: events of a type deleted since are still in the stream, and read so.
        unknown = unknown_types(req.types, await platform.store.event_schemas())
        if unknown:
            reply["warnings"] = [problem.removeprefix("filter.") for problem in unknown]
    return reply


async def where_it_starts(platform: CommandContext, session_id: str, after: int) -> dict[str, int]:
    """`{"first_id": N}` for a read from `after` when retention deleted events after it (the stream now starts at
    N, the oldest event the session holds), else nothing: every read of the stream says it the same way."""
    trimmed, first = await platform.store.stream_start(session_id)
    return {"first_id": first} if after < trimmed else {}


async def refuse_trimmed(platform: CommandContext, session_id: str, event_id: int, field: str) -> None:
    """Raise `past_retention` when retention deleted the session's events up to `event_id` or past it."""
    trimmed, first = await platform.store.stream_start(session_id)
    if event_id <= trimmed:
        raise past_retention(field, session_id, trimmed, first)


def past_retention(field: str, session_id: str, trimmed: int, first: int) -> CommandError:
    """The refusal of a read of what retention deleted, naming `field`: how far it reached, and where the session's
    stream now starts (its oldest event, below that reach when a lane still waits on it)."""
    kept = " but those a lane still waits on" if first <= trimmed else ""
    return CommandError(
        "past_retention",
        f"{field}: retention deleted the events of session {session_id!r} up to {trimmed}{kept};"
        f" its stream now starts at {first}",
    )
