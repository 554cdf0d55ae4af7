"""What the lane step reads and what it decides: a lane as the store holds it, and the lane's next move.

Owns the values that cross between the store, the pure step (`lane_step.py`) and its driver: a snapshot of a
lane (its queue's head, its slots and runs, a repeat or replay waiting, the listener and session now, the
key slots, fires and throttle of its listener, and the database's clock), and the decisions (`Take`, `Finish`,
`Wait`, `Drop`). All immutable. Times are epoch seconds on the database's clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from orchestrator.core.declaration import ListenerDeclaration

# The most queued events a snapshot reads: a batch takes at most 1,000 entries, and `distinct_by` may
# consume several events per entry; what a batch leaves goes in the next.
FETCH_EVENTS = 5_000


@dataclass(frozen=True)
class LaneAddress:
    session_id: str
    listener: str
    lane: str
    workflow_id: str


class Queued(NamedTuple):  # a thousand a read: a named tuple builds in 40% of a frozen dataclass's time
    """An event as a lane holds it, by reference: what the step decides by and where a run is to look, never
    its envelope (the driver reads envelopes only for a template that names them).

    `size`: what it weighs in a batch that carries it; `distinct`: its `distinct_by` value under the listener
    as declared now (None: none, or the path is missing); `accepted`: whether the listener as declared now
    takes it (a re-save may have narrowed the filter since it was routed); `message`: its pointer, as
    `batch.messages` shows it; `throttle_key`: the key it counts under in the listener's throttle as declared now
    (None: no throttle, or not read: a past batch's entries)."""

    id: int
    committed: float
    depth: int = 0
    size: int = 0
    distinct: str | None = None
    accepted: bool = True
    message: Mapping[str, Any] = MappingProxyType({})
    traceparent: str | None = None
    throttle_key: str | None = None


@dataclass(frozen=True)
class RunPlan:
    """What a run's repeats need, kept with its slot: a repeat runs the workflow its batch was given."""

    workflow: str
    input: Any
    attempts: int
    delay_seconds: float
    receipt: str | None
    version: int
    depth: int
    keyed: bool
    priority: int | None = None
    # The task queue the run starts on when its action names one (None: the platform's).
    task_queue: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "workflow": self.workflow,
            "input": self.input,
            "attempts": self.attempts,
            "delay_seconds": self.delay_seconds,
            "receipt": self.receipt,
            "version": self.version,
            "depth": self.depth,
            "keyed": self.keyed,
            "priority": self.priority,
            "task_queue": self.task_queue,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunPlan:
        return cls(
            workflow=str(data["workflow"]),
            input=data.get("input"),
            attempts=int(data.get("attempts", 0)),
            delay_seconds=float(data.get("delay_seconds", 0.0)),
            receipt=data.get("receipt"),
            version=int(data.get("version", 0)),
            depth=int(data.get("depth", 0)),
            keyed=bool(data.get("keyed", False)),
            priority=data.get("priority"),
            task_queue=data.get("task_queue"),
        )


@dataclass(frozen=True)
class HeldSlot:
    """A run holding one of its lane's slots; `due_at` set: it failed and holds the slot until its repeat."""

    run_key: str
    batch_id: int
    execution_id: str
    retry: int
    plan: RunPlan
    due_at: float | None = None
    since: float | None = None


@dataclass(frozen=True)
class Act:
    """Run the action."""


@dataclass(frozen=True)
class Consume:
    """No run and no outcome (the listener switched off in the session, or deleted)."""


@dataclass(frozen=True)
class Stop:
    """No run; an outcome says why."""

    status: str
    reason: str | None = None
    message: str | None = None


Verdict = Act | Consume | Stop
ACT = Act()
CONSUME = Consume()


def verdict_json(verdict: Verdict) -> dict[str, Any] | None:
    """A verdict as a batch keeps it: null to act, `{"consumed": true}`, or the outcome's status."""
    if isinstance(verdict, Act):
        return None
    if isinstance(verdict, Consume):
        return {"consumed": True}
    return {"status": verdict.status, "reason": verdict.reason, "message": verdict.message}


def verdict_of(data: Mapping[str, Any] | None) -> Verdict:
    if data is None:
        return ACT
    if data.get("consumed"):
        return CONSUME
    return Stop(str(data["status"]), data.get("reason"), data.get("message"))


@dataclass(frozen=True)
class BatchRecord:
    """A batch the store keeps: what it consumed and kept as entries, its attempt, and its verdict."""

    id: int
    first_id: int
    last_id: int
    event_ids: tuple[int, ...]
    entry_ids: tuple[int, ...]
    retry: int
    verdict: Verdict
    replay: int = 0
    replay_of: int | None = None
    run_key: str | None = None
    # The keys of the listener's throttle it was counted under (a repeat counts under them again).
    throttle_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class PastBatch:
    """A batch the lane took before, with its entries: one claimed and not finished (its driver died between
    the two), or the batch of a failed run whose repeat is due (`run`)."""

    batch: BatchRecord
    entries: tuple[Queued, ...]
    run: HeldSlot | None = None


@dataclass(frozen=True)
class Replay:
    """A batch asked for again (`replay_batch`, `redeliver`): its events, and its number among replays of its
    first event."""

    id: int
    events: tuple[Queued, ...]
    replay_of: int | None
    number: int


@dataclass(frozen=True)
class ListenerNow:
    """The listener as declared now (the newest version in effect), and how its session treats it."""

    version: int
    declaration: ListenerDeclaration
    switched_off: bool = False
    paused: bool = False


KeySlot = Literal["held", "queued"] | None


@dataclass(frozen=True)
class LaneSnapshot:
    """A lane as the store holds it now. `waiting` may be cut short (at `FETCH_EVENTS`, or empty in a view
    that reads no envelopes): `pending` counts them all."""

    address: LaneAddress
    lane_id: int
    seq: int
    fired_through: int
    now: float
    session_status: str
    session_alias: str | None
    listener: ListenerNow | None
    pending: int = 0
    waiting: tuple[Queued, ...] = ()
    oldest_at: float | None = None
    newest_at: float | None = None
    newest_id: int = 0
    # The newest event ever queued for the lane (its own `lane.idle` too): what tells a read that nothing
    # was queued since another.
    routed_through: int = 0
    runs: tuple[HeldSlot, ...] = ()
    claimed: PastBatch | None = None
    # The batch of the waiting run whose repeat is due first (by the database's clock, when read).
    repeat: PastBatch | None = None
    replay: Replay | None = None
    key_slot: KeySlot = None
    keys_held: int = 0
    fires_last_minute: int = 0
    oldest_fire_at: float | None = None
    running_executions: int = 0
    # False: read without envelopes (counts and times only), enough for `next_move` but not to cut a batch.
    complete: bool = True
    # The listener's throttle: the key of the lane's oldest waiting event (read even when no event is), and when
    # each key among the events read (waiting, a repeat's batch, a replay's) that has started `runs` batches lets
    # the next go (`throttles.free_at`, on the database's clock; a key left out may go now).
    throttle_head: str | None = None
    throttle_free_at: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    # What a step holding the lane for the throttle last said (`LaneStore.hold`): when it would step again. What
    # status shows, and the router's poll leaves alone; the step itself judges by the two above.
    throttled_until: float | None = None


def fetch_limit(listener: ListenerNow | None, fetch: int = FETCH_EVENTS) -> int:
    """How many waiting events a read of `fetch` holds at most (the store's rule): a batch without
    `distinct_by` takes at most `max_events`, so no more are read."""
    if listener is not None and listener.declaration.batch.distinct_by is None:
        return min(fetch, listener.declaration.batch.max_events)
    return fetch


def with_read_ahead(fresh: LaneSnapshot, ahead: LaneSnapshot) -> LaneSnapshot | None:
    """`fresh`, read without envelopes, with the waiting events of `ahead`, read in full earlier, when those are
    exactly what a full read would hold now; None when they may not be.

    They are when no batch was taken since (the same `seq` and `fired_through`: a record moves both, a session's
    deletion empties the queue and moves the second), the session's status is the same, under the same
    listener version, with no replay to read, and either the earlier read held as many as a read takes or
    nothing was queued since: the lane's queue only grows at its end (the router queues in id order).
    """
    if not ahead.complete or fresh.seq != ahead.seq or fresh.fired_through != ahead.fired_through:
        return None
    if fresh.session_status != ahead.session_status or fresh.replay is not None:
        return None
    if fresh.listener is None or ahead.listener is None or fresh.listener.version != ahead.listener.version:
        return None
    if len(ahead.waiting) < fetch_limit(ahead.listener) and fresh.routed_through != ahead.routed_through:
        return None
    return replace(fresh, waiting=ahead.waiting, pending=max(fresh.pending, len(ahead.waiting)), complete=True)


# -- decisions ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Take:
    """Record a batch and act on it: the lane's next batch, a replay, or a failed run's repeat."""

    kind: Literal["batch", "replay", "repeat"]
    consumed: tuple[int, ...]
    entries: tuple[Queued, ...]
    retry: int
    verdict: Verdict
    depth: int
    run_key: str
    execution_id: str
    replay_number: int = 0
    replay_of: int | None = None
    replay_id: int | None = None
    # The run it starts and the slot it holds (a workflow action that acts), and what its repeats need.
    plan: RunPlan | None = None
    # A keyed listener's slot across keys: taken now, kept (held already), or given back (held, no run).
    key_slot: Literal["take", "keep", "give_back"] | None = None
    # Counts as a fire (the throttle): a batch that acts.
    counted: bool = False
    # The keys of the listener's own throttle it counts under (a counted batch of a throttled listener).
    throttle_keys: tuple[str, ...] = ()
    # A claimed batch whose run already started and ended (its end took the slot's row before the driver that
    # started it finished): nothing to act on, only the finish.
    ran: bool = False

    @property
    def first_id(self) -> int:
        return min(self.consumed)

    @property
    def last_id(self) -> int:
        return max(self.consumed)

    @property
    def entry_ids(self) -> tuple[int, ...]:
        return tuple(q.id for q in self.entries)


@dataclass(frozen=True)
class Finish:
    """Act on a batch a dead driver left claimed, with the verdict it was given, and finish it."""

    claimed: PastBatch


WaitReason = Literal[
    "nothing",
    "window_open",
    "debouncing",
    "slot_held",
    "retry_waiting",
    "queued_for_key_slot",
    "paused",
    "throttled",
]


@dataclass(frozen=True)
class Wait:
    """Nothing to do now: why, and when to look again (None: when told, by a nudge or a run's end)."""

    reason: WaitReason
    until: float | None = None
    # Join the queue for a key slot (a keyed lane with a batch due and every key slot taken).
    queue_for_key_slot: bool = False
    # Give back a key slot the lane holds with nothing to use it on (handed one, and then nothing was due), or
    # leave the queue for one (held by the throttle: a slot handed on meanwhile would go unused).
    give_back_key_slot: bool = False
    run: HeldSlot | None = None


@dataclass(frozen=True)
class Drop:
    """A replay asked for a listener since deleted, or of events gone: forgotten, nobody to report to."""

    replay_id: int


Decision = Take | Finish | Wait | Drop


@dataclass(frozen=True)
class RunEnd:
    """What a run's end does: hold its slot for `repeat_in` seconds until its repeat, or release it (a keyed
    listener's key slot going to the lane that has waited longest); `gave_up`: its last attempt failed."""

    repeat_in: float | None
    gave_up: bool = False


@dataclass(frozen=True)
class Acted:
    """What acting on a batch came to: the outcome's status (None: consumed), and whether a run started."""

    status: str | None
    message: str | None = None
    execution_id: str | None = None
    started: bool = False


def depth_of(entries: Sequence[Queued]) -> int:
    """A batch's depth: its deepest event's (a run's writes are one deeper)."""
    return max((q.depth for q in entries), default=0)
