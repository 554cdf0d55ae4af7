"""The router: committed events from PostgreSQL to the lanes of every listener that matches them.

Owns the path from the stream to the lane workflows. Each worker process runs one router. It wakes on
PostgreSQL NOTIFY (one per committing session) and on a slow poll that catches anything a lost
notification missed. A routing round for a session holds that session's position row (FOR UPDATE SKIP
LOCKED), so exactly one worker routes a session at a time and a worker that dies mid-round gives the row
back with its connection. Each round also renews the router's lease on the session, so a session stays with
one router while it is busy, and another takes it over once the lease runs out. A round reads the events
after what it has read, signals each lane that is due with signal-with-start (everything waiting for a lane
packed into one signal, one signal in flight per lane; `orchestrator.core.pacing` decides which lanes are
due and holds the others' events back), then saves the position, which never passes an event held back. A
crash between signalling and saving re-delivers; the lane drops what it has.
Each event written under a trace gets a `route` span in that trace, and its lane gets the span's traceparent
with the event, so the batch that takes it continues the trace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
from opentelemetry import context as otel_context
from opentelemetry import trace
from temporalio.client import Client
from temporalio.common import WorkflowIDReusePolicy

from orchestrator.config import Settings
from orchestrator.core.batch_windows import envelope_bytes
from orchestrator.core.declaration import ListenerDeclaration
from orchestrator.core.events import Event
from orchestrator.core.lane_keys import lane_workflow_id
from orchestrator.core.pacing import Pacing, first_held_id, next_due, pace, unfired
from orchestrator.core.routing import LaneDelivery, ListenerVersion, route
from orchestrator.store.engine_records import EngineRecords, RoutingRound
from orchestrator.telemetry import METRICS, TRACER, log_fields, parent_and_links, traceparent_of
from workflows.messages import DELIVER_SIGNAL, Delivery, LaneAddress, LaneState

log = logging.getLogger(__name__)

# The most events one round reads; what is left is read by the next round at once.
ROUND_EVENTS = 2_000
# The most events, and bytes of events, packed into one signal: a signal's payload stays far below
# Temporal's 2 MB limit (over it the server refuses the signal, and the session would stop routing).
EVENTS_PER_SIGNAL = 500
SIGNAL_BYTES = 512 * 1024
# How often the router looks for sessions behind without being told (a lost NOTIFY, a restart).
POLL_SECONDS = 2.0
# The shortest time between two routing rounds of one session. A burst's events wait at most this long
# before they go out, far less than a typical window, and each lane gets one signal per round instead of one
# per commit (signals, not the database, bound throughput: each is a workflow task).
ROUND_INTERVAL_SECONDS = 0.2
# How long the router waits before it tries a lost database again.
RECONNECT_SECONDS = 1.0
# How long a session stays with the router that routed it last: another router takes it over only once this
# has passed since that router's last round (it died, or the session went quiet). Longer than the gaps
# between the rounds of a session with work waiting (the poll, the pace, the hold for a blocked lane).
LEASE_SECONDS = 6.0
# Sessions routed at once by one worker; each round holds a pooled connection while it signals.
CONCURRENT_ROUNDS = 4


class Router:
    def __init__(
        self,
        store: EngineRecords,
        temporal: Client,
        database_url: str,
        settings: Settings,
        *,
        poll_seconds: float = POLL_SECONDS,
        round_interval: float = ROUND_INTERVAL_SECONDS,
        lease_seconds: float = LEASE_SECONDS,
    ) -> None:
        self.store = store
        self.temporal = temporal
        self.database_url = database_url
        self.settings = settings
        self.poll_seconds = poll_seconds
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        self._known_lanes: set[str] = set()
        self._last_round: dict[str, float] = {}
        self._paced: dict[str, _SessionPacing] = {}
        self._flush_timers: dict[str, asyncio.TimerHandle] = {}
        self._polled_at = 0.0
        self.round_interval = round_interval
        self.lease_seconds = lease_seconds
        self.id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        # What this router has done, for benchmarks and status: events read, and signals sent to lanes.
        self.routed = 0
        self.signals = 0

    async def run(self) -> None:
        """Route until cancelled; a database that goes away is waited for, not fatal."""
        listen: asyncpg.Connection | None = None
        try:
            while True:
                try:
                    if listen is None or listen.is_closed():
                        listen = await self._listen()
                    await self._drain()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), timeout=self.poll_seconds)
                    # On a clock of its own, not only when nothing woke the router: on a busy database
                    # something always does, and a session whose router died must still be found.
                    if time.monotonic() >= self._polled_at + self.poll_seconds:
                        self._polled_at = time.monotonic()
                        self._dirty.update(await self.store.sessions_behind())
                    self._wake.clear()
                except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as err:
                    log.warning("the router lost the database (%s); trying again", err)
                    if listen is not None:
                        with contextlib.suppress(Exception):
                            await listen.close()
                    listen = None
                    await asyncio.sleep(RECONNECT_SECONDS)
        finally:
            for timer in self._flush_timers.values():
                timer.cancel()
            with contextlib.suppress(Exception):  # best effort: otherwise the leases simply run out
                await asyncio.shield(self.store.release_routing_leases(self.id))
            if listen is not None:
                with contextlib.suppress(Exception):
                    await listen.close()

    async def _listen(self) -> asyncpg.Connection:
        """A connection of its own that LISTENs; while it was gone notifications were lost, so look at all."""
        listen = await asyncpg.connect(self.database_url)
        try:
            await listen.add_listener("orchestrator_events", self._on_notify)
            await listen.add_listener("orchestrator_listeners", self._on_notify)
            await listen.add_listener("orchestrator_lanes", self._on_notify)
            self._dirty.update(await self.store.sessions_behind())
        except BaseException:
            # Not yet the caller's to close: a router stopped (or failing) here would leak it. `terminate`
            # needs no await, so a cancellation cannot interrupt it.
            listen.terminate()
            raise
        return listen

    def _on_notify(self, _conn: object, _pid: int, channel: str, payload: object) -> None:
        if channel in ("orchestrator_events", "orchestrator_lanes"):
            self._dirty.add(str(payload))
        self._wake.set()

    async def _drain(self) -> None:
        """Route every dirty session, a few at a time, until none is dirty."""
        gate = asyncio.Semaphore(CONCURRENT_ROUNDS)
        while self._dirty:
            batch = sorted(self._dirty)[: CONCURRENT_ROUNDS * 8]
            self._dirty.difference_update(batch)

            async def one(session_id: str) -> None:
                async with gate:
                    # Rounds of one session at most this often: under a burst, what waits for a lane is
                    # packed into one signal instead of a signal per commit.
                    wait = self._last_round.get(session_id, 0.0) + self.round_interval - time.monotonic()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    self._last_round[session_id] = time.monotonic()
                    try:
                        while await self.route_session(session_id) >= ROUND_EVENTS:
                            pass
                    except Exception:
                        log.exception(
                            "routing session %s failed; it will be retried", session_id, extra=log_fields(session_id)
                        )
                        await asyncio.sleep(0.5)
                        self._dirty.add(session_id)

            await asyncio.gather(*(one(s) for s in batch))

    async def _listeners(self) -> dict[str, list[ListenerVersion]]:
        versions: dict[str, list[ListenerVersion]] = {}
        for row in await self.store.listener_versions():
            versions.setdefault(row["name"], []).append(
                ListenerVersion(
                    name=row["name"],
                    version=row["version"],
                    effective_at=datetime.fromisoformat(row["effective_at"]),
                    declaration=ListenerDeclaration.model_validate(row["body"]),
                    body=row["body"],
                )
            )
        return versions

    async def route_session(self, session_id: str) -> int:
        """One round for one session; answers how many events it read (0 if another worker holds it).

        Lanes signalled less than their pace ago keep this round's events back (`orchestrator.core.pacing`);
        the saved position stays before the first event held, so holding back is never a way to lose one.
        """
        try:
            async with self.store.routing_round(session_id, self.id, self.lease_seconds) as held:
                if held is None:
                    # Another worker holds the row now, or another router's lease: look again once a lease
                    # would have run out, in case that router has died.
                    self._flush_later(session_id, self.lease_seconds)
                    return 0
                kept = await self._round(session_id, held)
        except Exception:
            # Whatever this round held or read is forgotten: the next one starts from the saved position.
            self._paced.pop(session_id, None)
            raise
        # Only once the round's transaction has committed: its generation is the session's now.
        if kept is None:
            return 0
        read, paced = kept
        self._hold(session_id, paced)
        self.routed += read
        return read

    async def _round(self, session_id: str, held: RoutingRound) -> tuple[int, _SessionPacing] | None:
        """Read, route, signal the lanes that are due and save the position; answer what to keep, or None."""
        conn, position, generation = held
        paced = self._paced.get(session_id)
        if paced is None or paced.generation != generation:
            # First round here, or another worker routed the session meanwhile: what this router holds
            # is forgotten (the other one delivered it, or its position is still before it).
            paced = _SessionPacing(generation=generation, read_to=position)
        events, traces = await self.store.traced_events_after(conn, session_id, paced.read_to, ROUND_EVENTS)
        if not events and not paced.pacing.held:
            return None
        listeners = await self._listeners() if events else {}
        deliveries = route([(e.envelope(), e.created_at) for e in events], listeners)
        spans = _route_spans(session_id, events, traces, deliveries)
        for delivery in deliveries:
            delivery.traces = {
                e["id"]: tp for e in delivery.events if (tp := traceparent_of(spans.get(e["id"], _UNTRACED)))
            }
        try:
            await self._note_lanes(session_id, deliveries)
            fired = await self.store.fired_through(conn, session_id) if unfired(paced.pacing) else None
            due, pacing = pace(paced.pacing, deliveries, time.monotonic(), fired)
            await asyncio.gather(*(self._deliver(session_id, d.delivery, d.held_seconds) for d in due))
            read_to = events[-1].id if events else paced.read_to
            first_held = first_held_id(pacing)
            saved = read_to if first_held is None else first_held - 1
            if due or saved != position:
                generation = await self.store.save_position(conn, session_id, saved)
        except Exception as err:
            for span in spans.values():
                span.set_status(trace.StatusCode.ERROR, f"routing failed: {err}")
            raise
        finally:
            for span in spans.values():
                span.end()
        return len(events), _SessionPacing(generation=generation, read_to=read_to, pacing=pacing)

    def _hold(self, session_id: str, paced: _SessionPacing) -> None:
        """Keep what a round held back for the session, and route it again when the first lane falls due."""
        now = time.monotonic()
        due = next_due(paced.pacing, now)
        if due is None:
            self._cancel_flush(session_id)
        else:
            self._flush_later(session_id, due - now)
        if due is None and not paced.pacing.next_at:
            self._paced.pop(session_id, None)  # nothing held, no lane paced: nothing worth remembering
        else:
            self._paced[session_id] = paced

    def _flush_later(self, session_id: str, delay: float) -> None:
        """Route the session again in `delay` seconds (a timer already set for it is replaced)."""
        self._cancel_flush(session_id)
        self._flush_timers[session_id] = asyncio.get_running_loop().call_later(max(delay, 0.0), self._flush, session_id)

    def _cancel_flush(self, session_id: str) -> None:
        timer = self._flush_timers.pop(session_id, None)
        if timer is not None:
            timer.cancel()

    def _flush(self, session_id: str) -> None:
        self._flush_timers.pop(session_id, None)
        self._dirty.add(session_id)
        self._wake.set()

    async def _note_lanes(self, session_id: str, deliveries: Sequence[LaneDelivery]) -> None:
        new = []
        for d in deliveries:
            workflow_id = lane_workflow_id(session_id, d.listener, d.lane)
            if workflow_id not in self._known_lanes:
                new.append((session_id, d.listener, d.lane, workflow_id))
        if new:
            await self.store.note_lanes(new)
            self._known_lanes.update(row[3] for row in new)

    async def _deliver(self, session_id: str, delivery: LaneDelivery, held_seconds: float) -> None:
        address = LaneAddress(session_id=session_id, listener=delivery.listener, lane=delivery.lane)
        workflow_id = lane_workflow_id(session_id, delivery.listener, delivery.lane)
        for events in signal_chunks(delivery.events):
            traces = {e["id"]: delivery.traces[e["id"]] for e in events if e["id"] in delivery.traces}
            # The signal goes out under the routing span of its first traced event, so the event's trace shows
            # the delivery (the lane itself starts untraced: see orchestrator.telemetry.LANE_WORKFLOW).
            parent, _ = parent_and_links(traces.values())
            token = otel_context.attach(parent) if parent is not None else None
            try:
                await self.temporal.start_workflow(
                    "OrchestratorLane",
                    LaneState(
                        address=address,
                        history_limit=self.settings.lane_history_limit,
                        handover_bytes=self.settings.lane_handover_bytes,
                        idle_exit_seconds=self.settings.lane_idle_exit_seconds,
                    ),
                    id=workflow_id,
                    task_queue=self.settings.task_queue,
                    id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                    start_signal=DELIVER_SIGNAL,
                    start_signal_args=[
                        Delivery(
                            version=delivery.version,
                            declaration=delivery.body,
                            events=events,
                            traces=traces,
                            held_seconds=held_seconds,
                        )
                    ],
                )
            finally:
                if token is not None:
                    otel_context.detach(token)
            self.signals += 1
            METRICS.events_routed.add(len(events), {"listener": delivery.listener})
            METRICS.lane_pending.add(len(events), {"listener": delivery.listener, "lane": delivery.lane})


@dataclass(frozen=True)
class _SessionPacing:
    """What the router holds for one session between rounds: the routing generation its last round left, how
    far it has read (beyond the saved position when it holds events back), and the lanes' pacing."""

    generation: int
    read_to: int
    pacing: Pacing = field(default_factory=Pacing)


_UNTRACED = trace.INVALID_SPAN


def signal_chunks(events: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """`events` in order, cut into signals of at most EVENTS_PER_SIGNAL events and SIGNAL_BYTES (one at least)."""
    chunks: list[list[dict[str, Any]]] = []
    size = 0
    for envelope in events:
        weight = envelope_bytes(envelope)
        if not chunks or len(chunks[-1]) >= EVENTS_PER_SIGNAL or size + weight > SIGNAL_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(envelope)
        size += weight
    return chunks


def _route_spans(
    session_id: str, events: Sequence[Event], traces: dict[int, str], deliveries: Sequence[LaneDelivery]
) -> dict[int, trace.Span]:
    """A `route` span for each traced event, a child of its write's span, open until the round ends."""
    if not traces:
        return {}
    lanes: dict[int, int] = {}
    for delivery in deliveries:
        for envelope in delivery.events:
            lanes[envelope["id"]] = lanes.get(envelope["id"], 0) + 1
    spans: dict[int, trace.Span] = {}
    for event in events:
        parent, _ = parent_and_links([traces.get(event.id)])
        if parent is None:
            continue
        spans[event.id] = TRACER.start_span(
            "route",
            context=parent,
            attributes={
                "orchestrator.session": session_id,
                "orchestrator.event_id": event.id,
                "orchestrator.event_type": event.type,
                "orchestrator.lanes": lanes.get(event.id, 0),
            },
        )
    return spans
