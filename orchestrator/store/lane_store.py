"""The lane store: the engine's few transactional verbs on lanes, as a Protocol the driver and router use.

Owns the seam between the engine's decisions (`orchestrator.core.lane_step`) and where lanes are kept. Each
verb is one round trip to PostgreSQL (`lanes_pg.PgLaneStore`, SQL functions in 0002_lanes.sql); the
in-memory twin (`lanes_memory.MemoryLaneStore`) keeps the same rules in dicts, and one contract suite
(tests/store/test_lane_store_contract.py) holds both to them. A verb that records a decision takes the
snapshot it was decided from and answers `Stale` when the lane moved on meanwhile: the driver reads again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from orchestrator.core.declaration import CancelOn
from orchestrator.core.lane_snapshot import FETCH_EVENTS, LaneAddress, LaneSnapshot, Take
from orchestrator.core.outcomes import Outcome
from orchestrator.core.run_checks import RunRecord
from orchestrator.core.waits import StartMade, StopAsked

# How long an unfired lane may go unnudged past its window, or a batch stay claimed, before the router's poll
# nudges its lane again (a nudge lost with a worker, a driver that died between a batch's record and its finish).
STALE_GRACE_SECONDS = 10.0


@dataclass(frozen=True)
class Stale:
    """A record refused: the lane moved on (`seq`), the listener was paused, or the deployment's throttle
    (`throttle`), one of the batch's keys in the listener's own (`listener_throttle`) or every key slot was taken
    meanwhile."""

    reason: str


@dataclass(frozen=True)
class Recorded:
    batch_id: int
    # Lanes a key slot went to that this record gave back (to be driven).
    granted: tuple[LaneAddress, ...] = ()


@dataclass(frozen=True)
class Finishing:
    """A batch acted on, to be finished: what happened, and what to record of it."""

    snap: LaneSnapshot
    take: Take
    batch_id: int
    started: bool
    outcome: Outcome | None
    version: int | None
    # A run was planned and did not start: its slot (and key slot) goes back.
    release: bool = False
    key_max: int = 0
    receipt: dict[str, Any] | None = None
    # A repeat stopped by a guard: the failure before it stands as the last one (`listener.failed`).
    failed_execution: str | None = None
    # How many waiting events the answered snapshot reads (0: none, which says whether the lane waits).
    fetch: int = 0


@dataclass(frozen=True)
class Finished:
    snapshot: LaneSnapshot | None
    granted: tuple[LaneAddress, ...] = ()
    outcome_new: bool = False
    # This finish marked the batch done (another attempt of the lane's step may finish it again): counted once.
    done_new: bool = False
    # A stop asked of the batch's run before its start was made (noted told here: its teller is the finisher).
    stop: StopAsked | None = None
    # Its cancel watch was answered before its start (noted told here: the finisher cancels the run).
    cancel: bool = False


@dataclass(frozen=True)
class Ending:
    """A run's end, with what `lane_step.run_end` decided of it."""

    execution_id: str
    session_id: str
    status: str
    error: str | None
    listener: str | None
    error_type: str | None = None
    keyed: bool = False
    key_max: int = 0
    repeat_in: float | None = None
    gave_up: bool = False
    # The run's own lane, and how many of its waiting events the answer reads when it is the first to drive (0:
    # counts and times only, the driver holding them read ahead); another lane is read whole.
    lane: str | None = None
    fetch_own: int = FETCH_EVENTS

    def fetch_for(self, first: LaneAddress) -> int:
        """How many waiting events the answer reads of `first`, the first lane to drive."""
        own = first.listener == self.listener and first.lane == self.lane
        return self.fetch_own if own else FETCH_EVENTS


@dataclass(frozen=True)
class Ended:
    recorded: bool
    # Lanes to drive now: the run's own when more waits in it, the one a freed key slot went to.
    drive: tuple[LaneAddress, ...] = ()
    # The first of them, read after the end in its transaction (`Ending.fetch_own`): its drive's first read.
    snapshot: LaneSnapshot | None = None
    # A stop asked of the run made its end `stopped` (a `cancel_on` that heard its event, `cancelled`), whatever it
    # reported: no repeat, whatever was decided.
    stopped: bool = False
    # What the end recorded (a stop or a `cancel_on` decides over what the run reported); None: not recorded here.
    status: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class RouteNudge:
    """A lane the round found empty and now pending: its oldest and newest events' commits, and the listener
    version whose timing says when its window closes."""

    address: LaneAddress
    oldest_at: float
    newest_id: int | None
    newest_at: float | None
    version: int = 0


@dataclass(frozen=True)
class TracedEvent:
    """An event a round read that was written under a trace: its round's span joins that trace."""

    id: int
    type: str
    traceparent: str
    lanes: int


@dataclass(frozen=True)
class CancelWatch:
    """A run of a listener with `cancel_on`, watching for its events from the last of its batch: its lane key is
    what an event's value at a condition's key must be (cut to the listener's `key_segments`)."""

    execution_id: str
    session_id: str
    listener: str
    lane: str
    after: int
    cancel_on: tuple[CancelOn, ...]
    key_segments: int | None = None


@dataclass(frozen=True)
class WaitAnswer:
    """A wait answered (or a cancel watch that heard its event), for the router to tell its run."""

    wait_id: int
    session_id: str
    execution_id: str
    # The Temporal run the wait is of ('': the execution's, a cancel watch's or a stop's).
    run_id: str
    seq: int
    kind: str
    matched: int
    event_ids: tuple[int, ...]
    grace_seconds: float | None = None


def answer_of(row: Any) -> WaitAnswer:
    return WaitAnswer(
        wait_id=int(row["wait_id"]),
        session_id=str(row["session_id"]),
        execution_id=str(row["execution_id"]),
        run_id=str(row.get("run_id") or ""),
        seq=int(row["seq"]),
        kind=str(row["kind"]),
        matched=int(row["matched"]),
        event_ids=tuple(int(i) for i in row["event_ids"] or ()),
        grace_seconds=None if row.get("grace_seconds") is None else float(row["grace_seconds"]),
    )


@dataclass(frozen=True)
class RoutedPage:
    """One routing round: how many events it read (0: none after the position, or `busy`: another router has the
    session now), the lanes to nudge, how many events each lane got, and the traced events."""

    read: int
    busy: bool = False
    now: float = 0.0
    nudges: tuple[RouteNudge, ...] = ()
    lanes: tuple[tuple[str, str, int], ...] = ()
    traced: tuple[TracedEvent, ...] = ()
    # The runs' waits (and cancel watches) the round's events answered, for the router to tell.
    answers: tuple[WaitAnswer, ...] = ()


@dataclass(frozen=True)
class StaleLane:
    """A lane with events waiting that nobody nudged for its window and a grace; `pending_age` seconds."""

    address: LaneAddress
    pending_age: float


class LaneStore(Protocol):
    async def snapshot(self, address: LaneAddress, fetch: int = FETCH_EVENTS) -> LaneSnapshot | None:
        """The lane as it is now (None: never queued for)."""
        ...

    async def record(
        self,
        snap: LaneSnapshot,
        take: Take,
        fires_limit: int,
        key_max: int,
        at: float | None = None,
        executions_limit: int | None = None,
    ) -> Recorded | Stale:
        """Record `take` over `snap`: the batch, its run and slots, the lane's `fired_through` for its own. `at`:
        the time the step judged by (a lane's own, which leads the database's on a server that skips time): the
        listener's throttle is judged, and its start kept, at the later of it and the store's clock.
        `executions_limit`: the session's `executions_per_session`, counted again for a run under a lock that
        serializes the session's recorders of runs (`Stale("executions")` when reached; None: not checked)."""
        ...

    async def finish(self, finishing: Finishing) -> Finished:
        """Finish a batch acted on; answer the lane's next snapshot."""
        ...

    async def hold(self, snap: LaneSnapshot, until: float) -> None:
        """Note that the listener's throttle holds the lane read as `snap` until `until` (its `throttled_until`,
        cleared by its next record; nothing when the lane moved on since): what status shows, and what keeps the
        router's poll from nudging a lane its own clock will wake."""
        ...

    async def queue_for_key_slot(self, snap: LaneSnapshot, key_max: int) -> bool:
        """Join the queue for a key slot (or take one free now): whether the lane holds one now."""
        ...

    async def give_back_key_slot(self, snap: LaneSnapshot, key_max: int) -> tuple[LaneAddress, ...]:
        """Give back a key slot the lane holds with no run to use it on; answer where it went."""
        ...

    async def drop_replay(self, replay_id: int) -> None: ...

    async def envelopes(self, ids: Sequence[int]) -> list[dict[str, Any]]:
        """The events `ids` whole, as the engine reads them (a thread item's whole message), ordered by id: what
        a template that names them renders from."""
        ...

    async def pointers(self, session_id: str, ids: Sequence[int]) -> list[dict[str, Any]]:
        """The pointers (`batch.messages`' form) of the events `ids` that are `session_id`'s, ordered by id: read
        from the events' own columns, not built from envelopes (a thread item's whole message is not read)."""
        ...

    async def end_run(self, ending: Ending) -> Ended:
        """Record a run's end (once) and what it does to its slot."""
        ...

    async def stop_repeat(self, session_id: str, execution_id: str, key_max: int) -> tuple[LaneAddress, ...] | None:
        """Call off the repeat a failed run's slot is held for (`stop_execution` of that run): the slot freed and
        handed on, no repeat, no `listener.failed`. The lanes to drive now; None when no repeat waited (none due,
        or taken already). `key_max`: a keyed listener's slots."""
        ...

    async def route_page(self, session_id: str, limit: int, parallel_cap: int) -> RoutedPage:
        """One routing round: the events after the session's position (at most `limit`) matched against every
        listener version in effect at their commit, queued into their lanes, the position moved past them.
        `parallel_cap`: the deployment's `listener_parallel_runs`, which caps a lane's slots and key slots."""
        ...

    async def stale_lanes(self, limit: int = 100) -> list[StaleLane]:
        """Lanes with events waiting past their window and a grace with no nudge (a lost nudge, a terminated
        lane), or a replay asked for, not blocked on slots; and lanes with a batch claimed for longer than the
        grace (its driver died before finishing it) or a repeat due for longer (its nudge lost with the report of
        its run's end): marked nudged now, by one caller each."""
        ...

    async def unsettled_runs(self, older_than_seconds: float, limit: int = 50) -> list[RunRecord]:
        """Runs the records call running that nobody looked at for `older_than_seconds`: marked looked at now,
        by one caller each, with what a start could be made from (`run_checks.RunRecord`)."""
        ...

    async def execution_start_made(self, execution_id: str) -> StartMade:
        """A run of no lane started: the input its record kept to start it is let go (`executions.start_run`);
        answers whether its record is still there and a stop asked before the start (noted told here)."""
        ...

    async def watch_for_cancel(self, watch: CancelWatch) -> None:
        """Before a run of a listener with `cancel_on` starts: its watch, once however often asked, answered at once
        when an event after its batch already cancels it."""
        ...

    async def reopen_run(self, execution_id: str) -> LaneAddress | None:
        """Claim again the finished batch of a run Temporal does not know, so its lane's next step starts it;
        answer the lane (None: the run ended or holds no slot, nothing to reopen)."""
        ...
