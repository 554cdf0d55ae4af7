"""The values that cross between the router, the lane workflows, the runs and the activities.

All pydantic, carried by Temporal's pydantic data converter. A lane's events never cross: they stay in
PostgreSQL, and what crosses is the lane's clock (`LaneStart`, the whole of a lane's state, so
continue-as-new hands it over in one piece), what the lane is told (`LaneNews`, in a nudge or its step's
report) and, once a batch fires, the run's input.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from temporalio.exceptions import ApplicationError

from orchestrator.core.lane_clock import TIMER_RESOLUTION_SECONDS, LaneClock, LaneNews
from orchestrator.core.outcomes import Outcome

# The one signal a lane takes: the store has news for it (events wait, a slot was freed, a repeat is due).
NUDGE_SIGNAL = "nudge"
# The signal that tells a run its wait was answered: `{seq, matched, events}` (orchestrator.sdk).
WAIT_SIGNAL = "orchestrator.wait_answered"
# The memo key under which a run carries its `RunTag`: what the record of its end needs.
RUN_MEMO = "orchestrator"
# How many outcomes a lane keeps for its `outcomes` query (the store keeps them all).
LANE_OUTCOMES = 20


class LaneAddress(BaseModel):
    session_id: str
    listener: str
    lane: str


class LaneTrouble(BaseModel):
    """A lane whose fire keeps failing (the database or Temporal away): since when, and the last error."""

    since: float
    failures: int
    error: str
    retry_at: float


class LaneStart(BaseModel):
    """A lane workflow's input and whole state: its address, its settings and its clock."""

    address: LaneAddress
    # Continue as new after this many history events; end after this long with nothing to do.
    history_limit: int = 2_500
    idle_exit_seconds: float = 300.0
    # The Temporal server skips time (the test server): its timers are exact, and the lane's clock leads.
    time_skipping: bool = False
    # How late its server's timers may fire (`Settings.temporal_timer_resolution_seconds`): it wakes that early.
    timer_resolution: float = TIMER_RESOLUTION_SECONDS
    clock: LaneClock = Field(default_factory=LaneClock)
    outcomes: list[Outcome] = Field(default_factory=list)
    trouble: LaneTrouble | None = None


class FireRequest(BaseModel):
    """A lane asks its driver to take its next steps: `lane_now` is the lane's time (epoch seconds), and
    waits shorter than `early` are waited out in the step rather than on a timer; `settle`, how long the step
    it woke early for is still off, is waited out before the lane is read."""

    address: LaneAddress
    lane_now: float = 0.0
    early: float = 0.0
    settle: float = 0.0
    time_skipping: bool = False


class FireReport(BaseModel):
    """What the steps did (the outcomes they recorded) and what the lane should know now."""

    news: LaneNews
    outcomes: list[Outcome] = Field(default_factory=list)


class LaneView(BaseModel):
    """The answer of a lane's `state` query: its clock as the lane sees it."""

    address: LaneAddress
    clock: LaneClock
    trouble: LaneTrouble | None = None


class IdleNotice(BaseModel):
    """A lane's silence, to be written as a `lane.idle` event."""

    address: LaneAddress
    lane_workflow_id: str
    last_event_id: int
    after_seconds: float


class BatchInfo(BaseModel):
    """`batch` as a run and templates see it.

    A run carries what its listener's template names: the pointers (`messages`) only for a template that names
    `batch.messages` or the whole `batch`, the envelopes (`events`) only for one that names them (or `event`,
    `item`, the whole `batch`). `event_ids` are always there, and `entry_ids` when the entries are fewer;
    `RunSession.batch_messages()` and `batch_events()` read the rest by id. Reading `messages` or `events` that
    were not carried fails the run with a message that says so and names the call that reads them, rather than
    handing it an empty list it would take for an empty batch. Both stay fields (`carried_messages`,
    `carried_events`, `messages` and `events` on the wire, null when not carried), so the data converter and a
    run that takes a `dict` see them as they came.
    """

    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)

    first_id: int
    last_id: int
    count: int
    retry: int
    lane: str
    # Every event the batch consumed, ascending (those `distinct_by` superseded too).
    event_ids: list[int]
    # On the wire `messages`: null when the template does not name them.
    carried_messages: list[dict[str, Any]] | None = Field(default=None, alias="messages")
    # On the wire `events`: the entries' envelopes, null when the template does not name them.
    carried_events: list[dict[str, Any]] | None = Field(default=None, alias="events")
    # The entries' ids when they are fewer than `event_ids` (`distinct_by` superseded some, or the listener no
    # longer takes some) and the messages were not carried.
    entry_ids: list[int] | None = None
    # A batch asked for again (`replay_batch`): the first event id of the batch it replays.
    replay_of: int | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The entries' pointers, when the template named them (`{{ batch.messages }}`)."""
        if self.carried_messages is None:
            raise ApplicationError(
                "batch.messages: not carried to this run, as its listener's template does not name them:"
                " name `{{ batch.messages }}` in the action's input, or read them with"
                " `await RunSession(run).batch_messages()`",
                type="BatchMessagesNotCarried",
                non_retryable=True,
            )
        return self.carried_messages

    @property
    def events(self) -> list[dict[str, Any]]:
        """The entries' envelopes, when the template named them (`{{ batch.events }}`, `event`, `item`)."""
        if self.carried_events is None:
            raise ApplicationError(
                "batch.events: not carried to this run, as its listener's template does not name them:"
                " name `{{ batch.events }}` in the action's input, or read them with"
                " `await RunSession(run).batch_events()`",
                type="BatchEventsNotCarried",
                non_retryable=True,
            )
        return self.carried_events

    @property
    def message_ids(self) -> list[int]:
        """The entries' ids, ascending: what `batch.messages` points at."""
        if self.carried_messages is not None:
            return [int(m["id"]) for m in self.carried_messages]
        return self.entry_ids if self.entry_ids is not None else self.event_ids


class RunInput(BaseModel):
    """The one argument of a workflow started by a listener. Its JSON form is what a `dict` run receives."""

    session_id: str
    listener: str
    batch: BatchInfo
    input: Any = None
    execution_id: str | None = None
    # The batch's run, the same across its retries: a retried batch's same write is answered, not made twice.
    run_key: str | None = None
    depth: int = 0
    # A schedule's firing: which schedule, when it was due and for a run's timer the run that set it (`{alias,
    # due_at, set_by?}`); None for a listener's run.
    scheduled: dict[str, Any] | None = None
    # A run started on a task queue its action names: the platform's, where `orchestrator.session` (and
    # `orchestrator.run_ended`) are served by name to a run of any language. None: the run's own queue is it.
    platform_task_queue: str | None = None


class RunTag(BaseModel):
    """Who a run is (its memo): the record of its end finds its slot and its execution by these, and decides
    by them whether its batch is repeated (`lane_step.run_end`)."""

    execution_id: str
    session_id: str
    workflow: str
    run_key: str | None = None
    listener: str | None = None
    lane: str | None = None
    depth: int = 0
    retry: int = 0
    attempts: int = 0
    delay_seconds: float = 0.0
    # A keyed listener's: its end hands the key slot on, one of `key_slots` in the session.
    key_slots: int | None = None
    # A run on a task queue its action names (None: the platform's), and then the platform's queue, where the
    # run reports its end by the activity `orchestrator.run_ended` (a local activity cannot cross queues).
    task_queue: str | None = None
    platform_task_queue: str | None = None


class RunEnd(BaseModel):
    """A run's end, as the run itself reports it (or the sweep that found it closed)."""

    tag: RunTag
    status: str
    error: str | None = None
    # A failed run's error's type (an ApplicationError's own `type`, else the exception's class).
    error_type: str | None = None
    # The run's own time at its end (epoch seconds): on a server that skips time, what it has skipped so far.
    at: float | None = None
