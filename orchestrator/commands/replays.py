"""`replay_batch` and `redeliver`: a listener takes events again, as batches of their own.

`replay_batch` runs a past batch again with all of its events (its own outcome, receipt and run, with
`batch.replay_of` its first event id); `redeliver` hands a range of events to one listener, grouped into its
lanes by its key and cut as a lane cuts its own (`max_events` entries, those `distinct_by` leaves). Both queue
the batches with the lane (`replays`), which takes them when a slot is free and judges them by the guards like
any batch; both are refused for a deleted listener, bounded in size, and written to the session's stream as an
event (`listener.replayed`, `listener.redelivered`), so they are audited where everything else is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from orchestrator.commands.events import refuse_trimmed
from orchestrator.commands.fields import ClientId, EventId, ListenerName, Position, SessionId
from orchestrator.commands.registry import Request, command
from orchestrator.commands.replies import Reply, Shape
from orchestrator.core.batch_cuts import Grouped, cut_all
from orchestrator.core.declaration import ListenerDeclaration
from orchestrator.core.distinct import distinct_value
from orchestrator.core.errors import CommandError
from orchestrator.core.filters import listener_accepts
from orchestrator.core.lane_keys import lane_key, lane_workflow_id
from orchestrator.core.lane_step import UNBOUNDED_BYTES
from orchestrator.crossings import crossing
from orchestrator.lanes.nudges import nudge_lanes

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext

# The widest id range `redeliver` takes in one command, and the most events it hands over.
MAX_REDELIVER_RANGE = 100_000
MAX_REDELIVER_EVENTS = 10_000


class ReplayBatch(Request):
    command: Literal["replay_batch"]
    session_id: SessionId
    listener: ListenerName
    batch: EventId = Field(description="the batch's first event id, as its outcome and receipt name it")
    client: ClientId | None = None


class Redeliver(Request):
    command: Literal["redeliver"]
    session_id: SessionId
    listener: ListenerName
    after: Position = Field(description="the events after this id")
    through: EventId = Field(description="up to this id, included")
    client: ClientId | None = None


async def _open_listener(platform: CommandContext, session_id: str, name: str) -> ListenerDeclaration:
    session = await platform.store.get_session(session_id)
    if session["status"] != "open":
        raise CommandError("session_not_open", f"session_id: session {session_id!r} is {session['status']}")
    try:
        listener = await platform.store.get_listener(name)  # not_found for a deleted one
    except CommandError as err:
        # The store names its own argument (`name`); these commands call it `listener`.
        raise CommandError(err.code, f"listener: no listener {name!r}") from None
    return ListenerDeclaration.model_validate(listener["body"])


class BatchReplay(Shape):
    listener: str
    lane: str
    replay_of: int = Field(description="the first event id of the batch replayed")


class ReplayedBatch(BatchReplay):
    """The new batch, queued."""

    event_ids: list[int]


class ReplayBatchReply(Reply):
    batch: ReplayedBatch
    replay: BatchReplay = Field(description="the same, without `event_ids`")
    event_id: int = Field(description="its `listener.replayed` event")


class RedeliveredBatch(Shape):
    lane: str
    event_ids: list[int]


class Redelivered(Shape):
    listener: str
    events: int = Field(description="how many events it handed over")
    batches: int = Field(description="how many batches")


class RedeliverReply(Reply):
    batches: list[RedeliveredBatch] = Field(description="the new batches, queued, in lane order")
    redelivered: Redelivered
    event_id: int = Field(description="its `listener.redelivered` event")


@command(
    "replay_batch",
    ReplayBatch,
    reply=ReplayBatchReply,
    errors=("not_found", "session_not_open", "past_retention"),
    example={"command": "replay_batch", "session_id": "ses_...", "listener": "respond", "batch": 2},
)
async def replay_batch(platform: CommandContext, req: ReplayBatch) -> dict[str, Any]:
    """Run a past batch again with all of its events, as a batch of its own (its own outcome, receipt and run,
    `batch.replay_of` its first event id)."""
    await _open_listener(platform, req.session_id, req.listener)
    found = await platform.store.find_batch(req.session_id, req.listener, req.batch)
    # A batch outlives its events for the throttle's minute, but a replay needs all of them.
    if found is None or await platform.store.events_kept(req.session_id, found["event_ids"]) < len(found["event_ids"]):
        await refuse_trimmed(platform, req.session_id, req.batch, "batch")
        if found is not None:
            raise CommandError("past_retention", f"batch: retention deleted events of the batch at {req.batch}")
        raise CommandError("not_found", f"batch: no batch of {req.listener!r} starts at event {req.batch}")
    lane = await platform.store.ask_replay(
        req.session_id, req.listener, found["lane"], found["workflow_id"], [found["event_ids"]], req.batch
    )
    audit = await platform.store.append_event(
        req.session_id,
        "listener.replayed",
        require_open=True,
        source={"client": req.client} if req.client else None,
        data={"listener": req.listener, "lane": found["lane"], "batch": req.batch, "events": len(found["event_ids"])},
    )
    crossing("replay.recorded")
    await nudge_lanes(platform.temporal, platform.settings, [lane])
    replay = {"listener": req.listener, "lane": found["lane"], "replay_of": req.batch}
    return {"batch": {**replay, "event_ids": list(found["event_ids"])}, "replay": replay, "event_id": audit.id}


@command(
    "redeliver",
    Redeliver,
    reply=RedeliverReply,
    errors=("not_found", "session_not_open", "limit_exceeded", "past_retention"),
    example={"command": "redeliver", "session_id": "ses_...", "listener": "respond", "after": 0, "through": 2},
)
async def redeliver(platform: CommandContext, req: Redeliver) -> dict[str, Any]:
    """Hand the events after `after` through `through` to one listener again, in its lanes by its key and cut as
    a lane cuts its own: at most `max_events` entries a batch, those `distinct_by` leaves."""
    decl = await _open_listener(platform, req.session_id, req.listener)
    if req.through <= req.after:
        raise CommandError("invalid_request", f"through: must be after `after` ({req.after})")
    if req.through - req.after > MAX_REDELIVER_RANGE:
        raise CommandError("limit_exceeded", f"through: a range of at most {MAX_REDELIVER_RANGE} ids at once")
    # A range reaching into what retention deleted would hand over part of what was asked for.
    await refuse_trimmed(platform, req.session_id, req.after + 1, "after")
    # Read as the router reads them (a thread item's whole message, not its preview), to be judged as it judges.
    events = await platform.store.routed_events(
        req.session_id, after=req.after, before=req.through + 1, limit=MAX_REDELIVER_EVENTS + 1
    )
    if len(events) > MAX_REDELIVER_EVENTS:
        raise CommandError("limit_exceeded", f"through: at most {MAX_REDELIVER_EVENTS} events at once")
    lanes: dict[str, list[Grouped]] = {}
    by = decl.batch.distinct_by
    for event in events:
        envelope = event.envelope
        if listener_accepts(decl, envelope):
            grouped = Grouped(event.id, None if by is None else distinct_value(envelope, by))
            lanes.setdefault(lane_key(decl.concurrency, envelope), []).append(grouped)
    # Cut as the lane cuts its own: `max_events` entries a batch, those `distinct_by` leaves.
    cuts = {
        lane: cut_all(grouped, decl.batch.max_events, by is not None, UNBOUNDED_BYTES)
        for lane, grouped in lanes.items()
    }
    asked = [
        await platform.store.ask_replay(
            req.session_id, req.listener, lane, lane_workflow_id(req.session_id, req.listener, lane), batches, None
        )
        for lane, batches in sorted(cuts.items())
    ]
    handed = sum(len(grouped) for grouped in lanes.values())
    audit = await platform.store.append_event(
        req.session_id,
        "listener.redelivered",
        require_open=True,
        source={"client": req.client} if req.client else None,
        data={"listener": req.listener, "after": req.after, "through": req.through, "events": handed},
    )
    crossing("replay.recorded")
    await nudge_lanes(platform.temporal, platform.settings, asked)
    new = [{"lane": lane, "event_ids": ids} for lane, batches in sorted(cuts.items()) for ids in batches]
    return {
        "batches": new,
        "redelivered": {"listener": req.listener, "events": handed, "batches": len(new)},
        "event_id": audit.id,
    }
