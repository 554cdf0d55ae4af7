"""The router: committed events from PostgreSQL into the queues of every lane that matches them.

Owns the path from the stream to the lanes. Each worker process runs one router. It wakes on PostgreSQL
NOTIFY for the sessions of the wake-up shards it holds (each shard has one router: `core/wake_shards.py`) and on
a slow poll that catches anything a lost notification missed (the deployment's routers take turns at it, and it
walks the sessions behind in order: 0030). A session's writers notify once until a router catches
up with it (0029_wakeups_coalesced.sql): after each round the router asks whether it has (`wake_rearm`), and a
session it has not caught up with (events past the position, or a writer in flight) it routes again after the
round interval, unasked. A
routing round for a session holds that session's position row (FOR UPDATE SKIP LOCKED), so exactly one
worker routes a session at a time and a worker that dies mid-round gives the row back with its connection.
A round is one call (`orchestrator_route_page`, 0007_routing.sql): it reads a page of events after the
position, matches them against every listener version by index probes and compiled checks (`core/rules.py`),
writes each lane's queue rows and saves the position; no event crosses into Python. Then the router nudges the
lanes that were empty. It never holds an event: what is committed is queued, and a lane reads its events when
it fires.

The same loop keeps the lanes honest about what a crash may lose: every few seconds it nudges lanes whose
events have waited past their window with nobody nudging them (a nudge lost with a worker, a lane
terminated from outside) or whose batch stayed claimed (its driver died before finishing it), and its run
sweep (`run_sweep.py`) holds the runs the records still call running against what Temporal says of them.
Each event written under a trace gets a `route` span in that trace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence

from temporalio.client import Client

from orchestrator.config import Settings
from orchestrator.core.declaration import (
    ListenerDeclaration,
    lane_timing,
)
from orchestrator.core.lane_clock import Declared, LaneNews, window_close
from orchestrator.core.outages import Outage
from orchestrator.core.wake_shards import channel
from orchestrator.crossings import crossing
from orchestrator.engine.run_sweep import RunSweep
from orchestrator.engine.wait_answers import WaitTeller
from orchestrator.engine.wake_listen import ShardListener
from orchestrator.lanes.nudges import Nudger
from orchestrator.store.connection import DATABASE_TROUBLE, DATABASE_UNAVAILABLE
from orchestrator.store.engine_records import EngineRecords
from orchestrator.store.lane_store import LaneStore, RouteNudge, TracedEvent
from orchestrator.telemetry import METRICS, TRACER, log_fields, parent_and_links

log = logging.getLogger(__name__)

# The most events one round reads; what is left is read by the next round at once.
ROUND_EVENTS = 2_000
# How often the router looks for sessions behind without being told (a lost NOTIFY, a restart), for lanes
# whose nudge was lost, and for runs that ended without a word.
POLL_SECONDS = 2.0
# The deployment looks for sessions behind once per poll, whichever router's turn it is (0030): a router takes
# the turn when this share of its poll has passed since the last, so that one router alone, whose loop comes
# round a little sooner than the poll's own end, still takes every turn.
POLL_TURN_SHARE = 0.8
# How often a router takes free wake-up shards up to its fair share, or gives back what is beyond it
# (`core/wake_shards.py`): a router that joins gets its share within two of these.
BALANCE_SECONDS = 1.0
# The sweep for runs that ended without a word looks at most this often (and as often as a run is checked,
# `settings.run_check_seconds`, when that is shorter).
SWEEP_SECONDS = 15.0
# The shortest time between two routing rounds of one session: under a burst, each round queues many
# commits and nudges each lane once, instead of a round and a nudge per commit. A session whose last round
# read many events (a burst) waits a little longer, so each round's two statements carry more of them.
ROUND_INTERVAL_SECONDS = 0.05
BUSY_ROUND_EVENTS = 100
BUSY_ROUND_INTERVAL_SECONDS = 0.1
# Listener versions' declarations a router keeps parsed (the newest used).
DECLARATIONS_KEPT = 10_000
# How long the router waits before it tries a lost database again.
RECONNECT_SECONDS = 1.0
# Sessions routed at once by one worker; each round holds a pooled connection while it queues.
CONCURRENT_ROUNDS = 4


class Router:
    def __init__(
        self,
        store: EngineRecords,
        lanes: LaneStore,
        temporal: Client,
        database_url: str,
        settings: Settings,
        *,
        sweep: RunSweep | None = None,
        teller: WaitTeller | None = None,
        upkeep: Sequence[Callable[[], Awaitable[object]]] = (),
        poll_seconds: float = POLL_SECONDS,
        round_interval: float = ROUND_INTERVAL_SECONDS,
    ) -> None:
        self.store = store
        self.lanes = lanes
        self.nudger = Nudger(temporal, settings)
        self.database_url = database_url
        self.settings = settings
        self.poll_seconds = poll_seconds
        self.round_interval = round_interval
        self.sweep = sweep
        # Tells the runs whose waits a round answered (None: a router of no runs, in tests of routing alone).
        self.teller = teller
        # Run at every poll: what else recovers a crossing a dead process left half made (a schedule's).
        self.upkeep = upkeep
        self._dirty: set[str] = set()
        # Sessions whose writers will not notify until a round catches up: routed again after the round interval.
        self._again: set[str] = set()
        # Whether any table is captured (asked at every poll): the router then appends what captured commits staged
        # every round interval and routes it (0033_captured_staged.sql), as a captured commit notifies nobody.
        self._captures = False
        self._staged_at = 0.0
        self._wake = asyncio.Event()
        # Per session: when its last round ended, and how long its next waits after it.
        self._last_round: dict[str, tuple[float, float]] = {}
        # The connection that listens on the wake-up shards this router holds (None until it runs).
        self.listener: ShardListener | None = None
        self._polled_at = 0.0
        self._swept_at = 0.0
        # The database lost: said when lost, once a minute while it stays away, and when it is back.
        self._outage = Outage()
        # Declarations of the listener versions a round nudged for, each read once: a saved version never changes.
        self._declarations: OrderedDict[tuple[str, int], ListenerDeclaration] = OrderedDict()
        # What this router has done, for benchmarks and status: events read.
        self.routed = 0

    @property
    def signals(self) -> int:
        """Nudges this router has sent."""
        return self.nudger.sent

    async def run(self) -> None:
        """Route until cancelled; a database that goes away is waited for, not fatal."""
        balancing: asyncio.Task[None] | None = None
        try:
            # A store closed for good (its process stopping, a test's platform gone) ends the router: it would
            # otherwise connect again every second, taking wake-up shards it cannot route.
            while not self.store.pool.is_closing():
                try:
                    if self.listener is None or self.listener.is_closed():
                        if balancing is not None:
                            balancing.cancel()
                        self.listener = await self._listen()
                        balancing = asyncio.create_task(self._balance(self.listener))
                    await self._drain()
                    again = max(self.round_interval, ROUND_INTERVAL_SECONDS)
                    # `asyncio.timeout`, not `wait_for`: Python 3.11's `wait_for` loses a cancellation that lands
                    # as the wake-up is set, and the router would outlive its cancel.
                    soon = self._again or self._captures
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(min(self.poll_seconds, again) if soon else self.poll_seconds):
                            await self._wake.wait()
                    self._wake.clear()
                    self._dirty.update(self._again)
                    self._again.clear()
                    # On clocks of their own, not only when nothing woke the router: on a busy database
                    # something always does.
                    now = time.monotonic()
                    if now >= self._polled_at + self.poll_seconds:
                        self._polled_at = now
                        self._captures = await self.store.any_captures()
                        self._dirty.update(await self.store.sessions_behind(self.poll_seconds * POLL_TURN_SHARE))
                        await self._nudge_stale_lanes()
                        for task in self.upkeep:
                            await task()
                        for closed in await self.store.close_drained_sessions():
                            log.info("session %s drained and closed", closed, extra=log_fields(closed))
                    if now >= self._swept_at + min(SWEEP_SECONDS, self.settings.run_check_seconds):
                        self._swept_at = now
                        if self.sweep is not None:
                            await self.sweep.round()
                    if (lasted := self._outage.ended(time.monotonic())) is not None:
                        # A warning, as its loss was: the two read together at the level a worker logs.
                        log.warning("the router has the database again, after %.0f s", lasted)
                except DATABASE_TROUBLE as err:
                    lasted = self._outage.failed(time.monotonic())
                    if lasted == 0.0:
                        log.warning("the router lost the database (%s); trying again every second", err)
                    elif lasted is not None:
                        log.warning("the router is still without the database, for %.0f s (%s)", lasted, err)
                    await self._after_failure()
                except Exception:
                    # Never the worker's end: the router is the only way committed events reach their lanes.
                    log.exception("the router's loop failed; trying again")
                    await self._after_failure()
        finally:
            if balancing is not None:
                balancing.cancel()
            if self.listener is not None:
                with contextlib.suppress(Exception):
                    await self.listener.close()
                self.listener = None

    async def _balance(self, listener: ShardListener) -> None:
        """The router's share of the wake-up shards, every BALANCE_SECONDS, beside its rounds (a router draining
        a burst still gives back and takes its shards). A failure drops the listening connection, its locks with
        it, and the loop connects again."""
        while True:
            await asyncio.sleep(BALANCE_SECONDS)
            try:
                taken = await listener.balance()
                if taken:
                    # Their notifications went to nobody until now.
                    self._dirty.update(await self.store.sessions_behind_in([channel(s) for s in taken]))
                    self._wake.set()
            except Exception as err:
                log.warning("the router's wake-up shards failed (%s); listening again", err)
                listener.terminate()
                self._wake.set()
                return

    async def _after_failure(self) -> None:
        """Drop the listening connection (notifications may have been lost with it, and its shards go to the
        other routers) and wait a moment."""
        if self.listener is not None:
            self.listener.terminate()  # not close(): a connection the server left half open would hold it
            self.listener = None
        await asyncio.sleep(RECONNECT_SECONDS)

    async def _listen(self) -> ShardListener:
        """A connection of its own holding its shards and listening on them; while none listened, their
        notifications were lost, so look at their sessions behind."""
        listen = await ShardListener.open(self.database_url, self.settings.database_schema, self._on_notify)
        try:
            self._dirty.update(await self.store.sessions_behind_in([channel(s) for s in listen.held]))
        except BaseException:
            # Not yet the caller's to close: a router stopped (or failing) here would leak it. `terminate`
            # needs no await, so a cancellation cannot interrupt it.
            listen.terminate()
            raise
        return listen

    def _on_notify(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        self._dirty.add(str(payload))
        self._wake.set()

    async def _drain(self) -> None:
        """Route every dirty session, a few at a time, until none is dirty."""
        gate = asyncio.Semaphore(CONCURRENT_ROUNDS)
        await self._look_for_staged()
        while self._dirty:
            batch = sorted(self._dirty)[: CONCURRENT_ROUNDS * 8]
            self._dirty.difference_update(batch)

            async def one(session_id: str) -> None:
                # Waited out before a slot is taken: a session that must wait never holds up one that need not.
                last, interval = self._last_round.get(session_id, (0.0, self.round_interval))
                wait = last + interval - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                async with gate:
                    try:
                        while (read := await self.route_session(session_id)) >= ROUND_EVENTS:
                            pass
                        if not await self.store.wake_rearm(session_id):
                            self._again.add(session_id)
                        busy = read >= BUSY_ROUND_EVENTS and self.round_interval > 0
                        interval = (
                            max(self.round_interval, BUSY_ROUND_INTERVAL_SECONDS) if busy else self.round_interval
                        )
                        self._last_round[session_id] = (time.monotonic(), interval)
                    except Exception as err:
                        if isinstance(err, DATABASE_UNAVAILABLE):
                            # The router says that it lost the database: each session waiting for it is no news.
                            log.debug("routing session %s waits for the database (%s)", session_id, type(err).__name__)
                        else:
                            log.exception(
                                "routing session %s failed; it will be retried",
                                session_id,
                                extra=log_fields(session_id),
                            )
                        await asyncio.sleep(0.5)
                        self._dirty.add(session_id)

            await asyncio.gather(*(one(s) for s in batch))
            # Between batches too: a drain kept going by other sessions' notifications still comes round to them.
            await self._look_for_staged()

    async def _look_for_staged(self) -> None:
        """Every round interval while any table is captured: the captured events that wait staged appended, all
        sessions in one call (no commit notifies for them, 0033_captured_staged.sql), and their sessions routed."""
        now = time.monotonic()
        if not self._captures or now < self._staged_at + max(self.round_interval, ROUND_INTERVAL_SECONDS):
            return
        self._staged_at = now
        self._dirty.update(await self.store.settle_staged())

    async def route_session(self, session_id: str) -> int:
        """One round for one session; answers how many events it read (0 when another worker routes it now)."""
        page = await self.lanes.route_page(session_id, ROUND_EVENTS, self.settings.limits.listener_parallel_runs)
        if not page.read:
            return 0
        crossing("route.saved")
        _route_spans(session_id, page.traced)
        if page.answers and self.teller is not None:
            # Told before the nudges: a run waits on it, while a lane's window is still open.
            await self.teller.tell(page.answers)
        # After the commit, so that a lane's step finds what it is nudged for. A nudge lost here (the router
        # dies) is found by the stale-lane poll, once the lane's window and a grace have passed.
        nudges = [(n, await self._declaration(n.address.listener, n.version)) for n in page.nudges]
        await asyncio.gather(
            *(self.nudger.nudge_quietly(n.address, _news(n, decl, page.now)) for n, decl in nudges if decl is not None)
        )
        for listener, _lane, events in page.lanes:
            METRICS.events_routed.add(events, {"listener": listener})
            METRICS.lane_pending.add(events, {"listener": listener})
        self.routed += page.read
        return page.read

    async def _declaration(self, name: str, version: int) -> ListenerDeclaration | None:
        """A listener version's declaration (None: not saved), read when first needed and kept. A router used to
        read and parse every version of every listener again after each save: 10 us a parse alone, 0.2 s of its
        loop for a thousand listeners of twenty versions, besides the read."""
        key = (name, version)
        found = self._declarations.get(key)
        if found is not None:
            self._declarations.move_to_end(key)
            return found
        body = await self.store.listener_body(name, version)
        if body is None:
            return None
        found = self._declarations[key] = ListenerDeclaration.model_validate(body)
        while len(self._declarations) > DECLARATIONS_KEPT:
            self._declarations.popitem(last=False)
        return found

    async def _nudge_stale_lanes(self) -> None:
        for stale in await self.lanes.stale_lanes():
            log.info("nudging lane %s again: its events waited past their window", stale.address.workflow_id)
            await self.nudger.nudge_quietly(stale.address, LaneNews(due_in=0.0))


def _news(nudge: RouteNudge, decl: ListenerDeclaration, now: float) -> LaneNews:
    """What a lane the round made pending is told: when its window closes, by the core's rule."""
    declared = Declared(**lane_timing(decl))
    closes = window_close(nudge.oldest_at, nudge.newest_at, declared)
    return LaneNews(
        due_in=max(closes - now, 0.0),
        idle_after_seconds=declared.idle_after_seconds,
        last_event_id=nudge.newest_id,
        last_event_age=None if nudge.newest_at is None else max(now - nudge.newest_at, 0.0),
    )


def _route_spans(session_id: str, traced: Sequence[TracedEvent]) -> None:
    """A `route` span for each traced event the round read, a child of its write's span."""
    for event in traced:
        parent, _ = parent_and_links([event.traceparent])
        if parent is None:
            continue
        TRACER.start_span(
            "route",
            context=parent,
            attributes={
                "orchestrator.session": session_id,
                "orchestrator.event_id": event.id,
                "orchestrator.event_type": event.type,
                "orchestrator.lanes": event.lanes,
            },
        ).end()
