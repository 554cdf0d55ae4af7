"""The router: committed events from PostgreSQL to the lanes of every listener that matches them.

Owns the path from the stream to the lane workflows. Each worker process runs one router. It wakes on
PostgreSQL NOTIFY (one per committing session) and on a slow poll that catches anything a lost
notification missed. A routing round for a session holds that session's position row (FOR UPDATE SKIP
LOCKED), so exactly one worker routes a session at a time and a worker that dies mid-round gives the row
back with its connection. A round reads the events after the position, signals each lane with
signal-with-start (everything waiting for a lane packed into one signal, one signal in flight per lane),
then saves the position. A crash between signalling and saving re-delivers; the lane drops what it has.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from datetime import datetime

import asyncpg
from temporalio.client import Client
from temporalio.common import WorkflowIDReusePolicy

from orchestrator.config import Settings
from orchestrator.core.declaration import ListenerDeclaration
from orchestrator.core.lane_keys import lane_workflow_id
from orchestrator.core.routing import LaneDelivery, ListenerVersion, route
from orchestrator.store.engine_records import EngineRecords
from workflows.messages import DELIVER_SIGNAL, Delivery, LaneAddress, LaneState

log = logging.getLogger(__name__)

# The most events one round reads; what is left is read by the next round at once.
ROUND_EVENTS = 2_000
# The most events packed into one signal: keeps a signal's payload far below Temporal's 2 MB limit.
EVENTS_PER_SIGNAL = 500
# How often the router looks for sessions behind without being told (a lost NOTIFY, a restart).
POLL_SECONDS = 2.0
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
    ) -> None:
        self.store = store
        self.temporal = temporal
        self.database_url = database_url
        self.settings = settings
        self.poll_seconds = poll_seconds
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        self._known_lanes: set[str] = set()
        # What this router has done, for benchmarks and status: events read, and signals sent to lanes.
        self.routed = 0
        self.signals = 0

    async def run(self) -> None:
        """Route until cancelled."""
        listen = await asyncpg.connect(self.database_url)
        try:
            await listen.add_listener("orchestrator_events", self._on_notify)
            await listen.add_listener("orchestrator_listeners", self._on_notify)
            self._dirty.update(await self.store.sessions_behind())
            while True:
                await self._drain()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=self.poll_seconds)
                if not self._wake.is_set():
                    self._dirty.update(await self.store.sessions_behind())
                self._wake.clear()
        finally:
            with contextlib.suppress(Exception):
                await listen.close()

    def _on_notify(self, _conn: object, _pid: int, channel: str, payload: object) -> None:
        if channel == "orchestrator_events":
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
                    try:
                        while await self.route_session(session_id) >= ROUND_EVENTS:
                            pass
                    except Exception:
                        log.exception("routing session %s failed; it will be retried", session_id)
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
        """One round for one session; answers how many events it read (0 if another worker holds it)."""
        async with self.store.routing_round(session_id) as held:
            if held is None:
                return 0
            conn, position = held
            events = await self.store.events_after(conn, session_id, position, ROUND_EVENTS)
            if not events:
                return 0
            listeners = await self._listeners()
            deliveries = route([(e.envelope(), e.created_at) for e in events], listeners)
            await self._note_lanes(session_id, deliveries)
            await asyncio.gather(*(self._deliver(session_id, d) for d in deliveries))
            await self.store.save_position(conn, session_id, events[-1].id)
            self.routed += len(events)
            return len(events)

    async def _note_lanes(self, session_id: str, deliveries: Sequence[LaneDelivery]) -> None:
        new = []
        for d in deliveries:
            workflow_id = lane_workflow_id(session_id, d.listener, d.lane)
            if workflow_id not in self._known_lanes:
                new.append((session_id, d.listener, d.lane, workflow_id))
        if new:
            await self.store.note_lanes(new)
            self._known_lanes.update(row[3] for row in new)

    async def _deliver(self, session_id: str, delivery: LaneDelivery) -> None:
        address = LaneAddress(session_id=session_id, listener=delivery.listener, lane=delivery.lane)
        workflow_id = lane_workflow_id(session_id, delivery.listener, delivery.lane)
        for start in range(0, len(delivery.events), EVENTS_PER_SIGNAL):
            await self.temporal.start_workflow(
                "OrchestratorLane",
                LaneState(
                    address=address,
                    history_limit=self.settings.lane_history_limit,
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
                        events=delivery.events[start : start + EVENTS_PER_SIGNAL],
                    )
                ],
            )
            self.signals += 1
