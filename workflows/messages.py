"""The values that cross between the router, the lane workflows, the run workflows and the activities.

All pydantic, carried by Temporal's pydantic data converter; `LaneState` is the whole of a lane's state,
so continue-as-new hands it over in one piece.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from orchestrator.core.batch_windows import LaneBuffer
from orchestrator.core.outcomes import Outcome, OutcomeLog

# Signal names: the router and the activities address lanes by these.
DELIVER_SIGNAL = "deliver"
RUN_FINISHED_SIGNAL = "run_finished"
KEY_SLOT_SIGNAL = "key_slot_granted"
# Where a pending envelope keeps its event's traceparent; the fire activity takes it off before anything
# the listener declared (filters, templates, the run's `batch`) sees the envelope.
TRACE_KEY = "_traceparent"


class LaneAddress(BaseModel):
    session_id: str
    listener: str
    lane: str


class Delivery(BaseModel):
    """What the router sends a lane: the listener as it stands now, and the lane's new events."""

    version: int
    declaration: dict[str, Any]
    events: list[dict[str, Any]]
    # The W3C traceparent of each event's routing span, by event id (events written untraced have none).
    traces: dict[int, str] = Field(default_factory=dict)
    # How long the router held the oldest of these events back (`orchestrator.core.pacing`): a window they
    # open is opened as of then.
    held_seconds: float = Field(default=0.0, ge=0.0)

    def traced_events(self) -> list[dict[str, Any]]:
        """The events, each carrying its traceparent under `TRACE_KEY` while it waits in the lane."""
        if not self.traces:
            return self.events
        return [{**e, TRACE_KEY: self.traces[e["id"]]} if e["id"] in self.traces else e for e in self.events]


class InFlight(BaseModel):
    """A run that holds one of the lane's slots until its `run_finished` signal arrives."""

    run_key: str
    first_id: int
    last_id: int
    count: int
    started_at: float


class HeldBatch(BaseModel):
    """A cut batch of a keyed lane waiting for one of the listener's key slots."""

    entries: list[dict[str, Any]]
    event_ids: list[int]


class LaneState(BaseModel):
    address: LaneAddress
    # Continue as new after this many history events; complete after this long with nothing to do.
    history_limit: int = 2_500
    handover_bytes: int = 1_536 * 1024
    idle_exit_seconds: float = 300.0
    version: int = 0
    declaration: dict[str, Any] = Field(default_factory=dict)
    buffer: LaneBuffer = Field(default_factory=LaneBuffer)
    in_flight: list[InFlight] = Field(default_factory=list)
    # Runs whose `run_finished` arrived before the result of the activity that started them.
    finished_early: list[str] = Field(default_factory=list)
    # Runs of this lane that finished lately: a `run_finished` told again (a run's task replayed after its
    # local activity had told the lane) changes nothing.
    finished_lately: list[str] = Field(default_factory=list)
    # When the lane last looked for runs that ended without a `run_finished` signal.
    runs_checked_at: float | None = None
    held: HeldBatch | None = None
    # A held batch asks for a key slot again when one was handed to this lane, or at `key_slot_retry_at`.
    key_slot_offered: bool = False
    key_slot_retry_at: float | None = None
    outcomes: OutcomeLog = Field(default_factory=OutcomeLog)
    batches: int = 0
    last_event_at: float | None = None
    # The router event id after which this lane's silence was already announced with `lane.idle`.
    idle_announced_after: int | None = None
    last_batch: list[int] = Field(default_factory=list)
    # The deployment's cap on max_parallel (limit listener_parallel_runs), learnt from the last fire.
    parallel_cap: int | None = None


class LaneView(BaseModel):
    """The answer of the lane's `state` query."""

    address: LaneAddress
    version: int
    pending: int
    pending_ids: list[int]
    in_flight: list[InFlight]
    waiting_for_key_slot: bool
    high_water: int
    batches: int
    last_batch_first_id: int | None
    last_batch_last_id: int | None


class BatchInfo(BaseModel):
    """`batch` as a run and templates see it."""

    first_id: int
    last_id: int
    count: int
    retry: int
    lane: str
    event_ids: list[int]
    messages: list[dict[str, Any]]
    events: list[dict[str, Any]]


class RunInput(BaseModel):
    """The one argument of a workflow started by a listener. Its JSON form is what a `dict` run receives."""

    session_id: str
    listener: str
    batch: BatchInfo
    input: Any = None
    execution_id: str | None = None
    # The batch's run, the same across its retries: what makes a retried batch's writes rewrite, not repeat.
    run_key: str | None = None
    depth: int = 0


class IdleNotice(BaseModel):
    """A lane's silence, to be written as a `lane.idle` event."""

    address: LaneAddress
    lane_workflow_id: str
    last_event_id: int
    after_seconds: float


class FireRequest(BaseModel):
    """A cut batch the lane asks to fire."""

    address: LaneAddress
    lane_workflow_id: str
    version: int
    entries: list[dict[str, Any]]
    event_ids: list[int]
    task_queue: str


class FireResult(BaseModel):
    """What became of a batch: an outcome (already recorded), a run holding a slot, or a wait for a key slot."""

    outcome: Outcome | None = None
    run_key: str | None = None
    waiting_for_key_slot: bool = False
    max_parallel: int = 1


class RunPlan(BaseModel):
    """What the fire activity hands the run workflow it starts for a workflow action."""

    address: LaneAddress
    lane_workflow_id: str | None
    run_key: str
    workflow: str
    input: RunInput
    retry_attempts: int = 0
    retry_delay_seconds: float = 0
    receipt_alias: str | None = None
    version: int = 0
    task_queue: str
    # Off on servers without the custom search attributes registered (the time-skipping test server).
    search_attributes: bool = True
    # Keyed listeners: the run gives its lane's key slot back when it ends (max_parallel for the hand-over).
    key_slot_max_parallel: int | None = None
    # The action's input template and the session part of its context: a repeat is a batch of its own with
    # `batch.retry` = n+1, so its input is rendered again rather than copied from the first attempt.
    input_template: Any = None
    session: dict[str, Any] = Field(default_factory=dict)


class RunFinished(BaseModel):
    run_key: str
    status: str
    outcomes: list[Outcome] = Field(default_factory=list)


class ExecutionRecord(BaseModel):
    execution_id: str
    session_id: str
    workflow: str
    listener: str | None
    lane: str | None
    status: str
    batch: dict[str, Any] | None = None
    error: str | None = None
    depth: int = 0


class RepeatCheck(BaseModel):
    """A failed run's batch about to be delivered again: the run's plan, the repeat's number, the failure."""

    plan: RunPlan
    retry: int
    failed: ExecutionRecord


class RepeatVerdict(BaseModel):
    """Whether the repeat runs; when a guard stops it, the repeat's outcome (None: consumed with none)."""

    go: bool
    outcome: Outcome | None = None
