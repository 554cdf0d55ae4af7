"""What the commands on listeners' lanes and runs answer (`runs.py`): a listener as it stands in a session, its
lanes and why each waits, its outcomes, and the runs.

Owns these replies' models only (`replies.py` says what a reply model is); how each value is found is `runs.py`'s
and the store's.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from orchestrator.commands.replies import Reply, Shape

# How a run stands, as its record says (the executions table holds no other).
ExecutionStatus = Literal["running", "completed", "failed", "stopped", "cancelled"]


class RunInFlight(Shape):
    """A run holding one of a lane's slots, or its repeat waiting out its delay."""

    run_key: str
    execution_id: str | None
    retry: int
    state: Literal["running", "waiting"]
    due_at: datetime | None = Field(description="a repeat: when it starts")
    since: datetime | None


class FireTrouble(Shape):
    since: datetime
    failures: int
    error: str | None


class LaneWaiting(Shape):
    """Why a lane does not step now, by the lane step's own rule; `text` says it in words."""

    reason: str = Field(
        description="`fire_failing`, `retry_waiting`, `paused`, `run_failing`, `slot_held`, `throttled`,"
        " `queued_for_key_slot`, `debouncing` or `window_open`"
    )
    text: str
    until: datetime | None = None
    since: datetime | None = None
    run: str | None = Field(default=None, description="the run that holds the slot, or whose repeat waits")
    failures: int | None = None
    attempts: int | None = Field(default=None, description="`run_failing`: its workflow task's attempts")
    error: str | None = None
    place: int | None = Field(default=None, description="`queued_for_key_slot`: its place in the queue")
    limit: Literal["throttle", "listener_fires_per_minute"] | None = None
    throttle: dict[str, Any] | None = Field(default=None, description="the listener's `throttle`, as declared")


class LaneView(Shape):
    """A lane: what waits (pending), the runs holding its slots, its batches, and why it waits."""

    lane: str
    workflow_id: str
    pending: int
    in_flight: int
    runs_in_flight: list[RunInFlight]
    waiting_for_slot: bool
    routed_through: int
    fired_through: int
    batches: int
    last_batch_first_id: int | None
    last_batch_last_id: int | None
    waiting: LaneWaiting | None
    trouble: FireTrouble | None = Field(default=None, description="its fire keeps failing")


class OutcomeRecord(Shape):
    """A batch's outcome, as recorded."""

    status: str
    reason: str | None = None
    listener: str
    lane: str
    first_id: int
    last_id: int
    event_ids: list[int]
    retry: int
    replay: int
    execution_id: str | None = None
    message: str | None = None
    created_at: datetime
    at: datetime = Field(description="the same moment, as a lane's outcomes say it")


class SessionListener(Shape):
    """A listener as it stands in the session."""

    name: str
    version: int
    enabled: bool
    paused: bool
    effective_at: datetime
    lanes: list[LaneView]
    recent_outcomes: list[OutcomeRecord] = Field(description="the newest first")
    counts: dict[str, int] = Field(description="its outcomes by status")
    warnings: list[str]


class ListSessionListenersReply(Reply):
    listeners: list[SessionListener]


class OpenWait(Shape):
    """A run's open wait (`wait_for_event`)."""

    seq: int = Field(description="its number in the run")
    conditions: list[dict[str, Any]]
    after: int = Field(description="the position in the stream it counts from")
    max_events: int
    deadline: datetime


class CancelledBy(Shape):
    event: int = Field(description="the event that cancelled it")


class ExecutionView(Shape):
    """A run."""

    id: str
    workflow: str
    listener: str | None
    lane: str | None
    status: ExecutionStatus
    batch: dict[str, Any] | None = Field(description="the batch that started it")
    error: str | None
    started_at: datetime
    ended_at: datetime | None
    actor: dict[str, Any] | None = Field(description="who started it")
    waiting: OpenWait | None = Field(default=None, description="a run that waits for events: on what")
    cause: CancelledBy | None = Field(default=None, description="a run `cancel_on` cancelled")


class ListExecutionsReply(Reply):
    executions: list[ExecutionView] = Field(description="oldest first unless `newest_first`")
    more: bool = Field(description="whether runs past `limit` match")


class StartedRun(Shape):
    id: str = Field(description="the run's execution id")
    workflow: str


class StartExecutionReply(Reply):
    execution: StartedRun


class StopView(Shape):
    id: str
    status: Literal["stopping"] | ExecutionStatus = Field(
        description="`stopping` (it cleans up, then ends `stopped`), `stopped`, or how it had ended already"
    )
    repeat: Literal["stopped"] | None = Field(default=None, description="it had failed and its repeat was called off")


class StopExecutionReply(Reply):
    execution: StopView
