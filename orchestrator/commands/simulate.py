"""`simulate_listener`: a listener body, not saved, tried on a session's stored stream.

Owns the command's bounds and its reading of the stream; the replay itself is `orchestrator.lanes.simulation`'s.
The body is validated as `save_listener` validates it, and nothing is written. A simulation reads at most
`SIMULATED_EVENTS` events (after `after`, before `before`), in pages of the router's size; a longer stream
is cut there and the reply says so (`through`, `truncated`).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from orchestrator.commands.events import FIRST_ID, where_it_starts
from orchestrator.commands.fields import EventId, Position, SessionId
from orchestrator.commands.listeners import ListenerBody
from orchestrator.commands.registry import Request, command
from orchestrator.commands.replies import Reply, Shape
from orchestrator.core.declaration import parse_declaration
from orchestrator.core.errors import CommandError
from orchestrator.core.events import Committed
from orchestrator.lanes.simulation import simulate

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext

# The most events one simulation reads: a few seconds of the driver's work at most.
SIMULATED_EVENTS = 10_000
PAGE = 1_000


class SimulateListener(Request):
    command: Literal["simulate_listener"]
    session_id: SessionId
    listener: ListenerBody
    after: Position | None = Field(default=None, description="only the events after this id")
    before: EventId | None = Field(default=None, description="only the events before this id")
    run_seconds: Annotated[float, Field(ge=0, le=3600)] = Field(
        default=0.0,
        description="how long each run takes (a workflow action's run holds its slot that long); 0: it ends at once",
    )


class SimulatedBatch(Shape):
    """A batch the body would have cut, with its outcome as `list_session_listeners` would show it."""

    lane: str
    first_id: int
    last_id: int
    event_ids: list[int]
    count: int = Field(description="its entries (`distinct_by` keeps the newest per value)")
    fires_at: datetime
    status: str = Field(description="its outcome's status; `consumed` when it would have had none")
    reason: str | None = None
    message: str | None = None


class UnmatchedEvent(Shape):
    event_id: int
    reason: str
    message: str


class SimulateListenerReply(Reply):
    batches: list[SimulatedBatch] = Field(description="in the order they would have been cut")
    events: int = Field(description="how many events it read")
    matched: int = Field(description="how many of them matched")
    unmatched: dict[str, int] = Field(description="how many did not match, by reason")
    unmatched_events: list[UnmatchedEvent] = Field(description="some of those, each with why")
    through: int = Field(description="the last event id it read")
    truncated: bool = Field(description="whether it stopped before the end of the range")
    first_id: int | None = Field(default=None, description=FIRST_ID)


@command(
    "simulate_listener",
    SimulateListener,
    reply=SimulateListenerReply,
    errors=("not_found",),
    example={
        "command": "simulate_listener",
        "session_id": "ses_...",
        "listener": {
            "name": "respond",
            "filter": {
                "types": ["thread.item_posted"],
                "aliases": ["chats/**"],
                "where": [{"path": "item.role", "op": "eq", "value": "request"}],
            },
            "concurrency": {"mode": "keyed", "key": "alias"},
            "action": {"type": "workflow", "workflow": "responder"},
        },
        "run_seconds": 30,
    },
)
async def simulate_listener(platform: CommandContext, req: SimulateListener) -> dict[str, Any]:
    """The batches the body would have cut from the session's stream: lanes, event ids, when each fires, its
    outcome (a throttle's refusal, a depth's skip), and what never matched and why."""
    limits = platform.settings.limits
    declaration = parse_declaration(req.listener, limits, await platform.store.event_schemas())
    await platform.store.get_session(req.session_id)
    after = req.after or 0
    if req.before is not None and req.before <= after:
        # A range that ends before it starts is a mistake to say, as `redeliver`'s is.
        raise CommandError("invalid_request", f"before: must be after `after` ({after})")
    stream: list[Committed] = []
    while len(stream) < SIMULATED_EVENTS + 1:
        page = await platform.store.routed_events(
            req.session_id, after=stream[-1].id if stream else after, before=req.before, limit=PAGE
        )
        stream += page
        if len(page) < PAGE:
            break
    truncated = len(stream) > SIMULATED_EVENTS
    stream = stream[:SIMULATED_EVENTS]
    found = await simulate(
        stream, declaration, platform.settings, req.session_id, after=after, run_seconds=req.run_seconds
    )
    return {
        **found.reply(),
        "through": stream[-1].id if stream else after,
        "truncated": truncated,
        **await where_it_starts(platform, req.session_id, after),
    }
