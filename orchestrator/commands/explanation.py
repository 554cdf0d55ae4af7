"""What `explain_event` answers (and a write with `"explain": true`): the router's decision on an event listener by
listener, what followed it in each listener's lane, and the chains of causes back from it and forward from it.

Owns these shapes only (`replies.py` says what a reply model is); `explain.py` finds what they hold.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from orchestrator.commands.replies import EventEnvelope, Shape


class OutcomeBrief(Shape):
    """A batch's outcome."""

    status: str
    reason: str | None
    execution_id: str | None
    message: str | None


class BatchState(Shape):
    """A batch, by its events and attempt."""

    first_id: int
    last_id: int
    retry: int
    replay: int
    state: str


class BatchFate(BatchState):
    """A batch that took the event: its verdict, run, outcome and receipt."""

    taken_at: datetime
    entry: bool = Field(description="whether the event is an entry of the batch (`distinct_by` may have replaced it)")
    consumed_without_run: bool = Field(
        description="consumed with no run and no outcome: the listener was switched off in the session, or deleted,"
        " when the batch came due (a batch that ended with an outcome and no run says so in `outcome`)"
    )
    outcome: OutcomeBrief | None
    receipt_event_id: int | None
    execution_id: str | None = None


class TakenByWait(Shape):
    execution_id: str
    wait: int


class ListenerFate(Shape):
    """One listener's part in an event: matched or why not, and then its lane, batch, run, outcome and receipt."""

    listener: str
    matched: bool
    reason: str | None = Field(default=None, description="why it did not match")
    message: str | None = None
    version: int | None = Field(default=None, description="the listener's version that matched")
    lane: str | None = None
    deleted_since: bool | None = Field(default=None, description="taken by a listener, or a life of one, deleted since")
    switched_off: bool | None = None
    paused: bool | None = None
    routed: bool | None = Field(default=None, description="false: the router has not taken the event yet")
    queued: bool | None = None
    queued_at: datetime | None = None
    lane_workflow: str | None = None
    waiting: bool | None = Field(default=None, description="queued, and in no batch yet")
    batches: list[BatchFate] | None = Field(default=None, description="every batch that took it")
    batch: BatchState | None = Field(default=None, description="the newest batch that took it")
    run: str | None = Field(default=None, description="its run's execution id")
    outcome: OutcomeBrief | None = None
    receipt: int | None = Field(default=None, description="its receipt's event id")
    taken_by_wait: TakenByWait | None = None


class WaitTaken(Shape):
    execution_id: str
    wait: int
    kind: str
    condition: int | None = Field(description="the index of the condition it matched")


class NamedEvent(Shape):
    """An event as a chain of causes names it: what it is, and who did it."""

    id: int
    type: str
    alias: str | None = None
    actor: dict[str, Any] | None = None


class RunStep(Shape):
    execution_id: str
    workflow: str | None = None


class CauseStep(Shape):
    """One step back from an event: one of its fields."""

    request: dict[str, Any] | None = None
    schedule: dict[str, Any] | None = None
    idle: dict[str, Any] | None = None
    transaction: dict[str, Any] | None = None
    run: RunStep | None = None
    batch: dict[str, Any] | None = None
    event: NamedEvent | None = None


class CausingBatch(Shape):
    listener: str
    lane: str
    first_id: int
    last_id: int
    retry: int
    replay: int


class RunRef(Shape):
    execution_id: str


class WroteStep(Shape):
    event: NamedEvent
    caused: list[CausedNode] | None = Field(default=None, description="what that event caused in turn")


class CausedNode(Shape):
    """A batch that took the event (its runs, and what they and its action wrote), or a run it cancelled."""

    batch: CausingBatch | None = None
    runs: list[str] | None = None
    cancelled: RunRef | None = None
    cancelling: RunRef | None = Field(default=None, description="cancelled, and still cleaning up")
    wrote: list[WroteStep]
    truncated: bool | None = None


class Explanation(Shape):
    """What became of an event: the router's decision listener by listener, and what followed."""

    event: EventEnvelope
    routed: bool = Field(description="whether the router has taken the event yet")
    listeners: list[ListenerFate]
    waits: list[WaitTaken] = Field(description="the runs' waits it answered")
    caused_by: list[CauseStep] = Field(description="what caused it, nearest first")
    caused: list[CausedNode] = Field(
        description="the batches that took it, and the runs a `cancel_on` cancelled for it"
    )


WroteStep.model_rebuild()
