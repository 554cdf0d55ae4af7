"""The lane store's in-memory twin: the same verbs and rules as 0002_lanes.sql's functions, kept in dicts.

Owns a whole small world (sessions and their streams, listeners, lanes, batches, slots, executions, outcomes)
so the engine's logic runs without servers: the contract suite holds it and `PgLaneStore` to one behaviour,
and the lane step's state-machine test drives it through crashes, pauses, replays and repeats. Its clock is
the caller's (`now`). Each verb runs whole, as a PostgreSQL statement does; nothing awaits inside one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from orchestrator.core.batch_cuts import envelope_bytes
from orchestrator.core.declaration import (
    ListenerDeclaration,
    ThrottleSpec,
    WorkflowAction,
    effective_max_parallel,
    lane_run_slots,
    lane_timing,
)
from orchestrator.core.distinct import distinct_value
from orchestrator.core.errors import CommandError
from orchestrator.core.events import Event, message_of
from orchestrator.core.lane_clock import Declared
from orchestrator.core.lane_keys import lane_workflow_id
from orchestrator.core.lane_snapshot import (
    FETCH_EVENTS,
    BatchRecord,
    HeldSlot,
    LaneAddress,
    LaneSnapshot,
    ListenerNow,
    PastBatch,
    Queued,
    Replay,
    RunPlan,
    Take,
    fetch_limit,
    verdict_json,
    verdict_of,
)
from orchestrator.core.limits import Limits, executions_refusal
from orchestrator.core.routing import LaneDelivery, own_silence, route, versions_by_name
from orchestrator.core.run_checks import RunRecord
from orchestrator.core.throttles import UNKEYED, free_at, started, throttle_key
from orchestrator.core.verdicts import accepts
from orchestrator.core.waits import StartMade
from orchestrator.store.lane_store import (
    STALE_GRACE_SECONDS,
    CancelWatch,
    Ended,
    Ending,
    Finished,
    Finishing,
    Recorded,
    RoutedPage,
    RouteNudge,
    Stale,
    StaleLane,
)


@dataclass(frozen=True)
class QueuedLane:
    """What one routing round queues for one lane: its events (ascending) and the listener as declared (what
    `orchestrator_route_page` reads of the version that routed them)."""

    listener: str
    lane: str
    workflow_id: str
    event_ids: list[int]
    declared: Declared
    # The newest of them that is not the lane's own `lane.idle`, and its commit (None: only its own).
    newest_id: int | None
    newest_at: datetime | None
    # How many runs the lane may hold at once (None: a write action, which holds none past its step).
    run_slots: int | None = None
    # A keyed listener's key slots in the session (None: not keyed, or a write action).
    key_max: int | None = None

    @classmethod
    def of(cls, session_id: str, delivery: LaneDelivery, created: dict[int, datetime], limits: Limits) -> QueuedLane:
        """What a routing round queues for the lane a delivery is for (`created`: the events' commits)."""
        ids = [int(e["id"]) for e in delivery.events]
        others = [int(e["id"]) for e in delivery.events if own_silence(e) is None]
        decl = delivery.declaration
        return cls(
            listener=delivery.listener,
            lane=delivery.lane,
            workflow_id=lane_workflow_id(session_id, delivery.listener, delivery.lane),
            event_ids=ids,
            declared=Declared(**lane_timing(decl)),
            newest_id=others[-1] if others else None,
            newest_at=created[others[-1]] if others else None,
            run_slots=lane_run_slots(decl, limits),
            key_max=effective_max_parallel(decl.concurrency, limits)
            if decl.concurrency.mode == "keyed" and isinstance(decl.action, WorkflowAction)
            else None,
        )


@dataclass
class MemEvent:
    id: int
    session_id: str
    envelope: dict[str, Any]
    committed: float
    key: str | None = None

    def queued(self, lane: MemLane | None = None, listener: ListenerNow | None = None) -> Queued:
        """The event as a lane holds it, by reference (`orchestrator_queued`'s row), under `listener` as declared
        now (None: nothing to group by, nothing to ask)."""
        envelope = self.envelope
        decl = None if listener is None else listener.declaration
        distinct_by = None if decl is None else decl.batch.distinct_by
        return Queued(
            id=self.id,
            committed=self.committed,
            depth=int(envelope.get("depth") or 0),
            size=envelope_bytes(envelope),
            distinct=None if distinct_by is None else distinct_value(envelope, distinct_by),
            accepted=decl is None or lane is None or accepts(decl, lane.listener, lane.lane, envelope),
            message=message_of(envelope),
            throttle_key=None if decl is None else throttle_key(decl.throttle, envelope),
        )


@dataclass
class MemLane:
    id: int
    session_id: str
    listener: str
    lane: str
    workflow_id: str
    routed_through: int = 0
    fired_through: int = 0
    newest_id: int = 0
    newest_at: float | None = None
    window_seconds: float = 0.0
    run_slots: int | None = None
    seq: int = 0
    nudged_at: float = 0.0
    queue: dict[int, float] = field(default_factory=dict)  # event id -> when queued
    throttled_until: float | None = None

    @property
    def address(self) -> LaneAddress:
        return LaneAddress(self.session_id, self.listener, self.lane, self.workflow_id)


@dataclass
class MemBatch:
    id: int
    lane_id: int
    session_id: str
    listener: str
    first_id: int
    last_id: int
    event_ids: tuple[int, ...]
    entry_ids: tuple[int, ...]
    retry: int
    replay: int
    replay_of: int | None
    verdict: dict[str, Any] | None
    counted: bool
    run_key: str | None
    created_at: float
    state: str = "claimed"
    throttle_keys: tuple[str, ...] = ()

    def record(self) -> BatchRecord:
        return BatchRecord(
            id=self.id,
            first_id=self.first_id,
            last_id=self.last_id,
            event_ids=self.event_ids,
            entry_ids=self.entry_ids,
            retry=self.retry,
            verdict=verdict_of(self.verdict),
            replay=self.replay,
            replay_of=self.replay_of,
            run_key=self.run_key,
            throttle_keys=self.throttle_keys,
        )


@dataclass
class MemRun:
    run_key: str
    lane_id: int
    batch_id: int
    execution_id: str
    retry: int
    plan: dict[str, Any]
    due_at: float | None = None


@dataclass
class MemKeySlot:
    lane_id: int
    session_id: str
    listener: str
    holding: bool
    since: float
    order: int
    due_at: float | None = None


@dataclass
class MemExecution:
    id: str
    session_id: str
    workflow: str
    listener: str | None
    lane: str | None
    batch: dict[str, Any] | None
    run_key: str | None
    depth: int
    status: str = "running"
    error: str | None = None
    started_event_id: int | None = None
    started_at: float = 0.0
    checked_at: float = 0.0
    start_input: dict[str, Any] | None = None


class MemoryLaneStore:
    """The lane store and the little of the rest of the store the engine touches, in memory."""

    def __init__(self, now: Callable[[], float]) -> None:
        self.now = now
        self.sessions: dict[str, dict[str, Any]] = {}
        self.events: dict[int, MemEvent] = {}
        self.cursors: dict[str, int] = {}
        # name -> (version, effective_at, body); deleted names are left out.
        self.listeners: dict[str, list[tuple[int, float, dict[str, Any]]]] = {}
        # name -> the last version ever saved, deletions included: a listener saved again goes on from it.
        self.last_versions: dict[str, int] = {}
        self.switched_off: set[tuple[str, str]] = set()
        self.pauses: set[tuple[str, str | None]] = set()
        self.lanes: dict[int, MemLane] = {}
        self.batches: dict[int, MemBatch] = {}
        self.runs: dict[str, MemRun] = {}
        self.key_slots: dict[int, MemKeySlot] = {}
        self.replays: dict[int, tuple[int, tuple[int, ...], int | None]] = {}
        self.replays_asked_at: dict[int, float] = {}
        self.executions: dict[str, MemExecution] = {}
        self.outcomes: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.receipts: dict[str, dict[str, Any]] = {}
        self.cancel_watches: dict[str, CancelWatch] = {}
        # (session, listener, key) -> the newest starts of a listener's own throttle's key, oldest first.
        self.throttles: dict[tuple[str, str, str], list[float]] = {}
        # How often each run's slot was given back (by its run key): once, or the twin is wrong.
        self.released: Counter[str] = Counter()
        self._ids = {"event": 0, "lane": 0, "batch": 0, "replay": 0, "order": 0}

    def _next(self, kind: str) -> int:
        self._ids[kind] += 1
        return self._ids[kind]

    # -- the world the engine reads (the contract suite and the state machine set it up) -------------------

    def open_session(self, session_id: str, alias: str | None = None) -> None:
        self.sessions[session_id] = {"status": "open", "alias": alias, "drain_through": None}
        self.cursors[session_id] = 0

    def close_session(self, session_id: str) -> None:
        self.sessions[session_id]["status"] = "closed"

    def save_listener(self, body: dict[str, Any], effective_at: float | None = None) -> int:
        """Save `body` as the listener's next version, as `PostgresStore.save_listener` does: the body of its
        newest version saved again answers that version and changes nothing; a listener saved again after its
        deletion goes on from its last version."""
        name = body["name"]
        versions = self.listeners.setdefault(name, [])
        if versions and versions[-1][2] == body:
            return versions[-1][0]
        version = self.last_versions.get(name, 0) + 1
        self.last_versions[name] = version
        versions.append((version, self.now() if effective_at is None else effective_at, body))
        return version

    def delete_listener(self, name: str) -> None:
        self.listeners.pop(name, None)

    def append(
        self,
        session_id: str,
        type_: str,
        *,
        alias: str | None = None,
        source: dict[str, Any] | None = None,
        depth: int = 0,
        data: dict[str, Any] | None = None,
        execution: dict[str, Any] | None = None,
        item: dict[str, Any] | None = None,
        key: str | None = None,
    ) -> int:
        """Append an event to a session's stream (ids in commit order, as the session's lock keeps them)."""
        if key is not None:
            for event in self.events.values():
                if event.session_id == session_id and event.key == key:
                    return event.id
        event_id = self._next("event")
        committed = self.now()
        envelope = Event.model_validate(
            {
                "id": event_id,
                "session_id": session_id,
                "type": type_,
                "alias": alias,
                "item": item,
                "execution": execution,
                "source": source or {},
                "depth": depth,
                "data": data,
                "created_at": datetime.fromtimestamp(committed, UTC),
            }
        ).envelope()
        self.events[event_id] = MemEvent(event_id, session_id, envelope, committed, key)
        return event_id

    def ask_replay(self, lane_id: int, event_ids: tuple[int, ...], replay_of: int | None) -> int:
        """A batch asked for again (`replay_batch`, `redeliver`) for a lane: its replay's id."""
        replay_id = self._next("replay")
        self.replays[replay_id] = (lane_id, event_ids, replay_of)
        self.replays_asked_at[replay_id] = self.now()
        return replay_id

    def load(self, session_id: str, envelope: dict[str, Any], committed: float) -> None:
        """Put an event committed elsewhere into the session's stream with its own id and commit (a stored
        stream replayed); events appended later get later ids."""
        event_id = int(envelope["id"])
        self.events[event_id] = MemEvent(event_id, session_id, envelope, committed)
        self._ids["event"] = max(self._ids["event"], event_id)

    # -- reading ---------------------------------------------------------------------------------------------

    def _lane(self, address: LaneAddress) -> MemLane | None:
        for lane in self.lanes.values():
            if (lane.session_id, lane.listener, lane.lane) == (address.session_id, address.listener, address.lane):
                return lane
        return None

    def _listener_now(self, session_id: str, name: str, now: float) -> ListenerNow | None:
        versions = self.listeners.get(name)
        if not versions:
            return None
        # None in effect yet: a life saved again after a deletion, its lanes holding only the deleted life's events.
        in_effect = [v for v in versions if v[1] <= now]
        if not in_effect:
            return None
        version, _, body = max(in_effect, key=lambda v: v[0])
        return ListenerNow(
            version=version,
            declaration=ListenerDeclaration.model_validate(body),
            switched_off=(session_id, name) in self.switched_off,
            paused=self._paused(name, session_id),
        )

    def _paused(self, name: str, session_id: str) -> bool:
        return (name, None) in self.pauses or (name, session_id) in self.pauses

    def _running(self, session_id: str) -> int:
        """The session's runs running now, a listener's and those started by hand: what `executions_per_session`
        caps (`orchestrator_running_executions`)."""
        return sum(1 for x in self.executions.values() if x.session_id == session_id and x.status == "running")

    def _events(
        self, ids: Sequence[int], lane: MemLane | None = None, listener: ListenerNow | None = None
    ) -> tuple[Queued, ...]:
        return tuple(self.events[i].queued(lane, listener) for i in sorted(ids) if i in self.events)

    async def envelopes(self, ids: Sequence[int]) -> list[dict[str, Any]]:
        return [dict(self.events[i].envelope) for i in sorted(set(ids)) if i in self.events]

    async def pointers(self, session_id: str, ids: Sequence[int]) -> list[dict[str, Any]]:
        found = (self.events[i] for i in sorted(set(ids)) if i in self.events)
        return [message_of(e.envelope) for e in found if e.session_id == session_id]

    def _held(self, run: MemRun) -> HeldSlot:
        batch = self.batches.get(run.batch_id)
        return HeldSlot(
            run_key=run.run_key,
            batch_id=run.batch_id,
            execution_id=run.execution_id,
            retry=run.retry,
            plan=RunPlan.from_json(run.plan),
            due_at=run.due_at,
            since=None if batch is None else batch.created_at,
        )

    def _past(self, batch: MemBatch, lane: MemLane | None = None, listener: ListenerNow | None = None) -> PastBatch:
        """A batch taken before; its entries judged by `listener` as declared now, when given (a repeat's)."""
        run = self.runs.get(batch.run_key) if batch.run_key else None
        return PastBatch(
            batch=batch.record(),
            entries=self._events(batch.entry_ids, lane, listener),
            run=None if run is None else self._held(run),
        )

    async def snapshot(self, address: LaneAddress, fetch: int = FETCH_EVENTS) -> LaneSnapshot | None:
        lane = self._lane(address)
        if lane is None:
            return None
        now = self.now()
        listener = self._listener_now(lane.session_id, lane.listener, now)
        fetch = fetch_limit(listener, fetch)
        waiting_ids = sorted(i for i in lane.queue if i > lane.fired_through)[: max(fetch, 1)]
        runs = sorted((r for r in self.runs.values() if r.lane_id == lane.id), key=lambda r: r.run_key)
        claimed = sorted(
            (b for b in self.batches.values() if b.lane_id == lane.id and b.state == "claimed"), key=lambda b: b.id
        )
        waiting_runs = sorted((r for r in runs if r.due_at is not None), key=lambda r: r.due_at or 0.0)
        replays = sorted((i, r) for i, r in self.replays.items() if r[0] == lane.id)
        replay = None
        if replays:
            replay_id, (_, event_ids, replay_of) = replays[0]
            first = min(event_ids)
            done = [b.replay for b in self.batches.values() if b.lane_id == lane.id and b.first_id == first]
            events = self._events(event_ids, lane, listener) if fetch > 0 else ()
            replay = Replay(replay_id, events, replay_of, 1 + max(done, default=0))
        slot = self.key_slots.get(lane.id)
        session = self.sessions.get(lane.session_id, {"status": "closed", "alias": None})
        fires = [
            b.created_at
            for b in self.batches.values()
            if b.session_id == lane.session_id and b.listener == lane.listener and b.counted and b.created_at > now - 60
        ]
        waiting = self._events(waiting_ids, lane, listener) if fetch > 0 else ()
        repeat = self._past(self.batches[waiting_runs[0].batch_id], lane, listener) if waiting_runs else None
        head, free = self._throttle(lane, listener, waiting_ids, waiting, repeat, replay)
        return LaneSnapshot(
            address=lane.address,
            lane_id=lane.id,
            seq=lane.seq,
            fired_through=lane.fired_through,
            now=now,
            session_status=session["status"],
            session_alias=session.get("alias"),
            listener=listener,
            pending=len(waiting_ids) if fetch > 0 else min(len(waiting_ids), 1),
            waiting=waiting,
            oldest_at=self.events[waiting_ids[0]].committed if waiting_ids else None,
            newest_at=lane.newest_at,
            newest_id=lane.newest_id,
            routed_through=lane.routed_through,
            runs=tuple(self._held(r) for r in runs),
            claimed=self._past(claimed[0]) if claimed else None,
            repeat=repeat,
            replay=replay,
            key_slot=None if slot is None else ("held" if slot.holding else "queued"),
            keys_held=self._keys_held(lane.session_id, lane.listener),
            fires_last_minute=len(fires),
            oldest_fire_at=min(fires, default=None),
            running_executions=self._running(lane.session_id),
            complete=fetch > 0,
            throttle_head=head,
            throttle_free_at=free,
            throttled_until=lane.throttled_until,
        )

    def _throttle(
        self,
        lane: MemLane,
        listener: ListenerNow | None,
        waiting_ids: Sequence[int],
        waiting: Sequence[Queued],
        repeat: PastBatch | None,
        replay: Replay | None,
    ) -> tuple[str | None, dict[str, float]]:
        """The listener's throttle as `orchestrator_lane_snapshot` reads it: the oldest waiting event's key, and when
        each key among the events read that has started `runs` batches lets the next go."""
        throttle = None if listener is None else listener.declaration.throttle
        if throttle is None:
            return None, {}
        head = throttle_key(throttle, self.events[waiting_ids[0]].envelope) if waiting_ids else None
        keys = {head} if head is not None else set()
        if throttle.key is None:
            keys.add(UNKEYED)
        keys |= {q.throttle_key for q in waiting if q.throttle_key is not None}
        keys |= set(repeat.batch.throttle_keys if repeat is not None else ())
        keys |= {q.throttle_key for q in (replay.events if replay is not None else ()) if q.throttle_key is not None}
        free = {}
        for key in sorted(keys):
            at = free_at(self.throttles.get((lane.session_id, lane.listener, key), []), throttle)
            if at is not None:
                free[key] = at
        return head, free

    async def hold(self, snap: LaneSnapshot, until: float) -> None:
        lane = self.lanes.get(snap.lane_id)
        if lane is not None and lane.seq == snap.seq:
            lane.throttled_until = until

    # -- the keys' slots -------------------------------------------------------------------------------------

    def _keys_held(self, session_id: str, listener: str) -> int:
        return sum(
            1 for k in self.key_slots.values() if (k.session_id, k.listener) == (session_id, listener) and k.holding
        )

    def _key_row(self, lane: MemLane, holding: bool) -> MemKeySlot:
        waiting = [i for i in lane.queue if i > lane.fired_through]
        due = self.events[min(waiting)].committed + lane.window_seconds if waiting else None
        return MemKeySlot(lane.id, lane.session_id, lane.listener, holding, self.now(), self._next("order"), due)

    def _key_slot_freed(self, lane: MemLane, key_max: int, requeue: bool) -> tuple[LaneAddress, ...]:
        self.key_slots.pop(lane.id, None)
        if requeue and key_max > 0:
            self.key_slots[lane.id] = self._key_row(lane, False)
        free = key_max - self._keys_held(lane.session_id, lane.listener)
        if free <= 0:
            return ()
        waiting = sorted(
            (
                k
                for k in self.key_slots.values()
                if (k.session_id, k.listener) == (lane.session_id, lane.listener) and not k.holding
            ),
            key=lambda k: (not (k.due_at is not None and k.due_at <= self.now()), k.since, k.order),
        )
        granted = waiting[:free]
        for slot in granted:
            slot.holding = True
        return tuple(self.lanes[slot.lane_id].address for slot in granted)

    async def queue_for_key_slot(self, snap: LaneSnapshot, key_max: int) -> bool:
        lane = self.lanes[snap.lane_id]
        slot = self.key_slots.get(lane.id)
        if slot is not None and slot.holding:
            return True
        if self._keys_held(lane.session_id, lane.listener) < key_max:
            self.key_slots[lane.id] = self._key_row(lane, True) if slot is None else slot
            self.key_slots[lane.id].holding = True
            return True
        if slot is None:
            self.key_slots[lane.id] = self._key_row(lane, False)
        return False

    async def give_back_key_slot(self, snap: LaneSnapshot, key_max: int) -> tuple[LaneAddress, ...]:
        lane = self.lanes[snap.lane_id]
        if any(r.lane_id == lane.id for r in self.runs.values()):
            return ()
        return self._key_slot_freed(lane, key_max, False)

    async def drop_replay(self, replay_id: int) -> None:
        self.replays.pop(replay_id, None)

    # -- writing ---------------------------------------------------------------------------------------------

    def _waiting(self, lane: MemLane) -> bool:
        return lane.routed_through > lane.fired_through

    async def record(
        self,
        snap: LaneSnapshot,
        take: Take,
        fires_limit: int,
        key_max: int,
        at: float | None = None,
        executions_limit: int | None = None,
    ) -> Recorded | Stale:
        lane = self.lanes[snap.lane_id]
        now = self.now()
        if take.counted:
            fires = sum(
                1
                for b in self.batches.values()
                if (b.session_id, b.listener) == (lane.session_id, lane.listener)
                and b.counted
                and b.created_at > now - 60
            )
            if fires >= fires_limit:
                return Stale("throttle")
        decl = snap.listener.declaration if snap.listener is not None else None
        throttle = decl.throttle if take.counted and decl is not None else None
        # The listener's own throttle is judged and kept on the step's time when it leads the store's clock.
        judged = now if at is None else max(now, at)
        if throttle is not None and self._throttle_holds(lane, throttle, take.throttle_keys, judged):
            return Stale("listener_throttle")
        slot = self.key_slots.get(lane.id)
        holds = slot is not None and slot.holding
        if take.key_slot == "take" and not holds and self._keys_held(lane.session_id, lane.listener) >= key_max:
            return Stale("key_slot")
        if self._paused(lane.listener, lane.session_id):
            return Stale("paused")
        if (
            take.plan is not None
            and executions_limit is not None
            and self._running(lane.session_id) >= executions_limit
        ):
            return Stale("executions")
        if lane.seq != snap.seq:
            return Stale("seq")
        lane.seq += 1
        lane.throttled_until = None
        if take.kind == "batch":
            lane.fired_through = max(lane.fired_through, take.last_id)
        if take.key_slot == "take":
            if slot is None:
                self.key_slots[lane.id] = self._key_row(lane, True)
            else:
                slot.holding = True
        batch = MemBatch(
            id=self._next("batch"),
            lane_id=lane.id,
            session_id=lane.session_id,
            listener=lane.listener,
            first_id=take.first_id,
            last_id=take.last_id,
            event_ids=tuple(take.consumed),
            entry_ids=take.entry_ids,
            retry=take.retry,
            replay=take.replay_number,
            replay_of=take.replay_of,
            verdict=verdict_json(take.verdict),
            counted=take.counted,
            run_key=take.run_key if take.plan is not None or take.kind == "repeat" else None,
            created_at=now,
            throttle_keys=take.throttle_keys if throttle is not None else (),
        )
        if any(
            (b.lane_id, b.first_id, b.retry, b.replay) == (lane.id, batch.first_id, batch.retry, batch.replay)
            for b in self.batches.values()
        ):
            raise ValueError("a batch is recorded once")  # PostgreSQL's unique constraint
        self.batches[batch.id] = batch
        if throttle is not None:
            self._throttle_started(lane, throttle, take.throttle_keys, judged)
        if take.kind == "replay" and take.replay_id is not None:
            self.replays.pop(take.replay_id, None)
        if take.plan is not None:
            if take.kind == "repeat":
                run = self.runs[take.run_key]
                run.execution_id, run.retry, run.due_at = take.execution_id, take.retry, None
            else:
                self.runs[take.run_key] = MemRun(
                    take.run_key, lane.id, batch.id, take.execution_id, 0, take.plan.to_json()
                )
            if take.execution_id not in self.executions:
                self.executions[take.execution_id] = MemExecution(
                    id=take.execution_id,
                    session_id=lane.session_id,
                    workflow=take.plan.workflow,
                    listener=lane.listener,
                    lane=lane.lane,
                    batch={
                        "first_id": take.first_id,
                        "last_id": take.last_id,
                        "retry": take.retry,
                        "event_ids": list(take.consumed),
                    },
                    run_key=take.run_key,
                    depth=take.depth + 1,
                    started_at=now,
                    checked_at=now,
                )
        elif take.kind == "repeat":
            gone = self.runs.pop(take.run_key, None)
            if gone is not None:
                self.released[gone.run_key] += 1
        granted: tuple[LaneAddress, ...] = ()
        if take.key_slot == "give_back":
            granted = self._key_slot_freed(lane, key_max, self._waiting(lane))
        return Recorded(batch.id, granted)

    def _throttle_holds(self, lane: MemLane, throttle: ThrottleSpec, keys: Sequence[str], at: float) -> bool:
        """Whether one of `keys` has started `runs` batches of the lane's listener in the window before `at`."""
        for key in keys:
            frees = free_at(self.throttles.get((lane.session_id, lane.listener, key), []), throttle)
            if frees is not None and frees > at:
                return True
        return False

    def _throttle_started(self, lane: MemLane, throttle: ThrottleSpec, keys: Sequence[str], at: float) -> None:
        """A batch of the lane's listener started at `at` under `keys`: each keeps its newest `runs` starts."""
        for key in keys:
            where = (lane.session_id, lane.listener, key)
            self.throttles[where] = started(self.throttles.get(where, []), at, throttle.runs)

    def _started(self, execution: MemExecution) -> None:
        if execution.started_event_id is None:
            execution.started_event_id = self.append(
                execution.session_id,
                "execution.started",
                execution={"id": execution.id, "workflow": execution.workflow, "status": "running"},
                source={"listener": execution.listener, "execution": execution.id},
                depth=execution.depth,
            )

    def _listener_failed(self, execution_id: str, listener: str, lane: str, depth: int) -> None:
        execution = self.executions.get(execution_id)
        if execution is None:
            return
        batch = execution.batch or {}
        failed: dict[str, Any] = {"id": execution.id, "workflow": execution.workflow, "status": "failed"}
        if execution.error is not None:
            failed["error"] = {"message": execution.error[:2000]}
        self.append(
            execution.session_id,
            "listener.failed",
            execution=failed,
            source={"listener": listener, "execution": execution_id},
            depth=depth,
            data={
                "listener": listener,
                "lane": lane,
                "first_id": batch.get("first_id"),
                "last_id": batch.get("last_id"),
                "event_ids": batch.get("event_ids"),
                "retry": batch.get("retry"),
                "execution_id": execution_id,
                "error": execution.error,
            },
            key=f"failed:{execution_id}",
        )

    async def finish(self, finishing: Finishing) -> Finished:
        snap, take, outcome = finishing.snap, finishing.take, finishing.outcome
        lane = self.lanes[snap.lane_id]
        execution = self.executions.get(take.execution_id)
        if finishing.started and execution is not None:
            self._started(execution)
        batch = self.batches.get(finishing.batch_id)
        done = batch is not None and batch.state == "claimed"
        if batch is not None:
            if batch.retry == 0 and batch.replay == 0:
                # The lane's own batch takes its queue rows once finished (0016's `orchestrator_batch_take_queue`).
                for event_id in [i for i in lane.queue if i <= batch.last_id]:
                    del lane.queue[event_id]
            batch.state = "done"
        granted: tuple[LaneAddress, ...] = ()
        if finishing.release:
            run = self.runs.get(take.run_key)
            if run is not None and run.execution_id == take.execution_id:
                del self.runs[take.run_key]
                self.released[run.run_key] += 1
                if take.plan is not None and take.plan.keyed:
                    granted = self._key_slot_freed(lane, finishing.key_max, self._waiting(lane))
            if execution is not None and execution.status == "running" and execution.started_event_id is None:
                del self.executions[take.execution_id]
        new = False
        if outcome is not None:
            key = (lane.session_id, lane.listener, outcome.batch_key)
            if key not in self.outcomes:
                self.outcomes[key] = {**outcome.model_dump(mode="json"), "version": finishing.version}
                new = True
        if finishing.receipt is not None and self.sessions.get(lane.session_id, {}).get("status") == "open":
            self.receipts.setdefault(finishing.receipt["key"], finishing.receipt)
        if finishing.failed_execution is not None:
            self._listener_failed(finishing.failed_execution, lane.listener, lane.lane, take.depth + 1)
        return Finished(await self.snapshot(lane.address, finishing.fetch), granted, new, done)

    async def end_run(self, ending: Ending) -> Ended:
        execution = self.executions.get(ending.execution_id)
        if execution is None or execution.status != "running":
            return Ended(False)
        # A cancellation nobody's `cancel_on` asked for is a stop (`orchestrator_run_end`); the twin answers no
        # cancel watch, so every one here is.
        status = "stopped" if ending.status == "cancelled" else ending.status
        execution.status, execution.error = status, ending.error
        self._started(execution)
        ended: dict[str, Any] = {"id": execution.id, "workflow": execution.workflow, "status": execution.status}
        if execution.status == "failed" and execution.error is not None:
            error = {"type": ending.error_type, "message": execution.error[:2000]}
            ended["error"] = {k: v for k, v in error.items() if v is not None}
        elif execution.status == "stopped" and execution.error is not None:
            ended["error"] = {"type": "stopped", "message": execution.error[:2000]}
        self.append(
            execution.session_id,
            "execution.ended",
            execution=ended,
            source={"listener": execution.listener, "execution": execution.id},
            depth=execution.depth,
        )
        drive: tuple[LaneAddress, ...] = ()
        run = self.runs.get(execution.run_key) if execution.run_key else None
        if run is not None and run.execution_id == ending.execution_id:
            lane = self.lanes[run.lane_id]
            if ending.repeat_in is not None:
                run.due_at = self.now() + ending.repeat_in
            else:
                drive = self._released(run, lane, ending.keyed, ending.key_max)
                if ending.gave_up:
                    self._listener_failed(ending.execution_id, lane.listener, lane.lane, execution.depth)
        snapshot = await self.snapshot(drive[0], ending.fetch_for(drive[0])) if drive else None
        return Ended(True, drive, snapshot, status=execution.status, error=execution.error)

    async def stop_repeat(self, session_id: str, execution_id: str, key_max: int) -> tuple[LaneAddress, ...] | None:
        execution = self.executions.get(execution_id)
        if execution is None or execution.session_id != session_id or execution.status != "failed":
            return None
        run = self.runs.get(execution.run_key) if execution.run_key else None
        if run is None or run.execution_id != execution_id or run.due_at is None:
            return None
        lane = self.lanes[run.lane_id]
        lane.seq += 1
        return self._released(run, lane, lane.id in self.key_slots, key_max)

    def _released(self, run: MemRun, lane: MemLane, keyed: bool, key_max: int) -> tuple[LaneAddress, ...]:
        """A run's slot let go (`orchestrator_run_released`): the lanes to drive now."""
        del self.runs[run.run_key]
        self.released[run.run_key] += 1
        waiting = self._waiting(lane) or any(r[0] == lane.id for r in self.replays.values())
        if keyed:
            return self._key_slot_freed(lane, key_max, waiting)
        return (lane.address,) if waiting else ()

    # -- routing ---------------------------------------------------------------------------------------------

    async def route_page(self, session_id: str, limit: int, parallel_cap: int) -> RoutedPage:
        """The round as `orchestrator_route_page` takes it, with the core's `route` for the matching: the events
        after the session's position, matched against every version of every listener not deleted, queued into
        their lanes, each lane that was empty and may step now nudged."""
        position = self.cursors.get(session_id, 0)
        ids = sorted(i for i, e in self.events.items() if e.session_id == session_id and i > position)[:limit]
        if not ids:
            return RoutedPage(0)
        events = [self.events[i] for i in ids]
        versions = versions_by_name(
            {
                "name": name,
                "version": version,
                "effective_at": datetime.fromtimestamp(effective_at, UTC).isoformat(),
                "body": body,
            }
            for name, found in sorted(self.listeners.items())
            for version, effective_at, body in found
        )
        created = {e.id: datetime.fromisoformat(e.envelope["created_at"]) for e in events}
        deliveries = route([(e.envelope, created[e.id]) for e in events], versions)
        limits = Limits(listener_parallel_runs=parallel_cap)
        self.cursors[session_id] = ids[-1]
        # Lanes are made in (listener, lane) order, and nudged in the order they were made (by their ids).
        nudges: list[tuple[int, RouteNudge]] = []
        for delivery in sorted(deliveries, key=lambda d: (d.listener, d.lane)):
            queued = self._queue(session_id, QueuedLane.of(session_id, delivery, created, limits))
            if queued is not None:
                lane_id, nudge = queued
                nudges.append((lane_id, replace(nudge, version=delivery.version)))
        return RoutedPage(
            read=len(events),
            now=self.now(),
            nudges=tuple(nudge for _, nudge in sorted(nudges, key=lambda made: made[0])),
            lanes=tuple(sorted((d.listener, d.lane, len(d.events)) for d in deliveries)),
        )

    def _queue(self, session_id: str, q: QueuedLane) -> tuple[int, RouteNudge] | None:
        """Queue a round's events into their lane; answer its nudge, with the lane's id, when it was empty and may
        step now (or has an idle timer, whose clock learns of events from nudges)."""
        now = self.now()
        lane = self._lane(LaneAddress(session_id, q.listener, q.lane, q.workflow_id))
        if lane is None:
            lane = MemLane(self._next("lane"), session_id, q.listener, q.lane, q.workflow_id, nudged_at=now)
            self.lanes[lane.id] = lane
        for event_id in q.event_ids:
            lane.queue.setdefault(event_id, now)
        empty = lane.routed_through <= lane.fired_through
        blocked = (
            q.run_slots is not None and sum(1 for r in self.runs.values() if r.lane_id == lane.id) >= q.run_slots
        ) or (lane.id in self.key_slots and not self.key_slots[lane.id].holding)
        lane.routed_through = max(lane.routed_through, max(q.event_ids))
        lane.window_seconds, lane.run_slots = q.declared.window_seconds, q.run_slots
        if q.newest_id is not None and q.newest_id > lane.newest_id:
            lane.newest_id = q.newest_id
            lane.newest_at = None if q.newest_at is None else q.newest_at.timestamp()
        if empty:
            lane.nudged_at = now
        # A keyed lane with no key slot takes a free one now, or joins the queue for one (lanes in order); a
        # debounced one competes when its window closes, joining the queue only when every slot is taken.
        if empty and not blocked and q.key_max is not None and lane.id not in self.key_slots:
            free = self._keys_held(session_id, lane.listener) < q.key_max
            blocked = not free
            if not free or q.declared.debounce_seconds is None:
                self.key_slots[lane.id] = self._key_row(lane, free)
        if not empty or (blocked and q.declared.idle_after_seconds is None):
            return None
        oldest = min(i for i in lane.queue if i > lane.fired_through)
        return lane.id, RouteNudge(lane.address, self.events[oldest].committed, lane.newest_id or None, lane.newest_at)

    async def stale_lanes(self, limit: int = 100) -> list[StaleLane]:
        now = self.now()
        old = now - STALE_GRACE_SECONDS
        claimed = {b.lane_id for b in self.batches.values() if b.state == "claimed" and b.created_at < old}
        claimed |= {r.lane_id for r in self.runs.values() if r.due_at is not None and r.due_at < old}
        replayed = {r[0] for i, r in self.replays.items() if self.replays_asked_at.get(i, now) < old}
        found = []
        for lane in sorted(self.lanes.values(), key=lambda lane: lane.nudged_at):
            if lane.throttled_until is not None and lane.throttled_until >= old:
                continue  # the throttle holds it: its own clock wakes it when it lets it go
            unfired = self._waiting(lane) and self._unnudged(lane, now, lane.window_seconds)
            asked = lane.id in replayed and self._unnudged(lane, now, 0.0)
            left = (unfired or asked) and not self._blocked(lane)
            if not (left or (lane.id in claimed and self._unnudged(lane, now, 0.0))):
                continue
            lane.nudged_at = now
            waiting = [i for i in lane.queue if i > lane.fired_through]
            age = now - self.events[min(waiting)].committed if waiting else 0.0
            found.append(StaleLane(lane.address, max(age, 0.0)))
            if len(found) >= limit:
                break
        return found

    def _unnudged(self, lane: MemLane, now: float, window: float) -> bool:
        return lane.nudged_at < now - (window + STALE_GRACE_SECONDS)

    def _blocked(self, lane: MemLane) -> bool:
        """Left to whoever frees the slot it waits for: its runs hold all of them, or it is queued for a key
        that some lane holds (a queue nobody holds a slot of, its listener no longer keyed, is nobody's to hand on)."""
        held = sum(1 for r in self.runs.values() if r.lane_id == lane.id)
        if lane.run_slots is not None and held >= lane.run_slots:
            return True
        queued = lane.id in self.key_slots and not self.key_slots[lane.id].holding
        return queued and self._keys_held(lane.session_id, lane.listener) > 0

    # -- the runs' crossing to Temporal ---------------------------------------------------------------------

    async def execution_started(self, record: dict[str, Any], limit: int | None = None) -> bool:
        """A run of no lane recorded before its start (`executions.start_run`), with its `execution.started`:
        True when new; refused (`limit_exceeded`) when new and the session runs `limit` already."""
        if record["execution_id"] in self.executions:
            return False
        running = self._running(record["session_id"])
        if limit is not None and running >= limit:
            raise CommandError("limit_exceeded", executions_refusal(running))
        now = self.now()
        execution = MemExecution(
            id=record["execution_id"],
            session_id=record["session_id"],
            workflow=record["workflow"],
            listener=record["listener"],
            lane=record["lane"],
            batch=record["batch"],
            run_key=record["run_key"],
            depth=record["depth"],
            started_at=now,
            checked_at=now,
            start_input=record.get("start_input"),
        )
        self.executions[execution.id] = execution
        self._started(execution)
        return True

    async def watch_for_cancel(self, watch: CancelWatch) -> None:
        # Kept, and never answered: the twin stands in for the lanes, and a run's cancellation is PostgreSQL's and
        # Temporal's (docs/waits.md).
        self.cancel_watches.setdefault(watch.execution_id, watch)

    async def execution_start_made(self, execution_id: str) -> StartMade:
        # No stops here: a run's stop is PostgreSQL's and Temporal's, as its cancellation is (docs/waits.md).
        execution = self.executions.get(execution_id)
        if execution is not None:
            execution.start_input = None
        return StartMade(recorded=execution is not None)

    def _run_batch(self, execution_id: str) -> MemBatch | None:
        run = next((r for r in self.runs.values() if r.execution_id == execution_id), None)
        original = None if run is None else self.batches.get(run.batch_id)
        if run is None or original is None:
            return None
        return next(
            (
                b
                for b in self.batches.values()
                if (b.lane_id, b.first_id, b.replay, b.retry)
                == (original.lane_id, original.first_id, original.replay, run.retry)
            ),
            None,
        )

    async def unsettled_runs(self, older_than_seconds: float, limit: int = 50) -> list[RunRecord]:
        now = self.now()
        due = sorted(
            (x for x in self.executions.values() if x.status == "running" and x.checked_at < now - older_than_seconds),
            key=lambda x: x.checked_at,
        )[:limit]
        found = []
        for x in due:
            x.checked_at = now
            batch = self._run_batch(x.id)
            found.append(
                RunRecord(
                    execution_id=x.id,
                    session_id=x.session_id,
                    workflow=x.workflow,
                    listener=x.listener,
                    lane=x.lane,
                    run_key=x.run_key,
                    depth=x.depth,
                    age_seconds=now - x.started_at,
                    batch=None if batch is None else ("claimed" if batch.state == "claimed" else "done"),
                    start_input=x.start_input,
                )
            )
        return found

    async def reopen_run(self, execution_id: str) -> LaneAddress | None:
        execution = self.executions.get(execution_id)
        batch = self._run_batch(execution_id)
        if execution is None or execution.status != "running" or batch is None:
            return None
        batch.state = "claimed"
        return self.lanes[batch.lane_id].address
