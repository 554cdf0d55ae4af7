"""A listener tried on a session's stored stream: the batches a body would have cut, without saving it.

Owns the replay of a stream through the engine's own parts on a clock of its own: the in-memory lane store
(held to PostgreSQL's contract by one suite), whose routing round matches by the router's rules
(`core.routing`), and the lane driver with its pure step. Each event arrives at its commit time (the events of
one transaction together) and each lane steps when its step said it would. A run starts nowhere and ends
`run_seconds` after its start (0: at once); a write action writes nothing; a lane's `idle` timer is not
simulated. So the batches are the engine's own, for runs that take that long.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace
from opentelemetry.metrics import NoOpMeter

from orchestrator.config import Settings
from orchestrator.core.declaration import ListenerDeclaration, lane_timing
from orchestrator.core.events import Committed
from orchestrator.core.lane_clock import Declared, LaneNews, window_close
from orchestrator.core.lane_snapshot import LaneAddress
from orchestrator.core.routing import ListenerVersion, routing_decision
from orchestrator.lanes.driver import LaneDriver, Observed
from orchestrator.store.lanes_memory import MemoryLaneStore
from orchestrator.telemetry import Metrics
from orchestrator.workflows.messages import RunInput, RunTag

# Steps of the simulated clock at most (an event's arrival, a lane's step, a run's end): far beyond what the
# largest stream a simulation reads needs, and a bound on a body the engine would keep busy for ever.
MAX_STEPS = 200_000
# How many unmatched events are named one by one (all are counted by reason).
UNMATCHED_NAMED = 100
# A lane whose step says "now" again right after stepping looks again a microsecond later, not in a loop.
TICK = 1e-6
# How many steps between yields to the event loop: a simulation is seconds of work, and the process's other
# requests (`/healthz` among them) waited for all of it.
YIELD_EVERY = 64

# Outside the logging tree (no `getLogger`), so no configuration of the process's logging reaches it: uvicorn's
# `dictConfig` turned a disabled logger of the tree on again, and `orchestrator dev` printed simulated batches.
_SILENT = logging.Logger("orchestrator.lanes.simulation.driver", logging.CRITICAL + 1)
# A simulated batch is no batch of the platform's: it counts in no metric, traces nothing, logs nothing.
UNOBSERVED = Observed(Metrics(NoOpMeter("orchestrator")), trace.NoOpTracer(), _SILENT)


@dataclass
class _Clock:
    t: float


@dataclass
class _Runs:
    """Temporal, as far as a simulation needs it: a run ends `seconds` after its start."""

    clock: _Clock
    seconds: float
    ends: list[tuple[float, int, RunTag]] = field(default_factory=list)

    async def start(self, tag: RunTag, run_input: RunInput, priority: Any) -> None:
        heapq.heappush(self.ends, (self.clock.t + self.seconds, len(self.ends), tag))

    async def stop(self, execution_id: str, reason: str) -> None:
        """Never asked: a simulation deletes no session."""

    async def cancel(self, execution_id: str) -> bool:
        """Never asked: a simulation stops no run."""
        return False


class _Writes:
    async def write(self, decl: Any, session_id: str, context: Any, depth: int, key: str) -> tuple[str, None]:
        return "success", None


@dataclass
class _Wakes:
    """When each lane steps next: what its step, a nudge or a run's end said."""

    clock: _Clock
    at: dict[LaneAddress, float] = field(default_factory=dict)

    def wake(self, address: LaneAddress, at: float) -> None:
        self.at[address] = min(self.at.get(address, math.inf), at)

    async def nudge_quietly(self, address: LaneAddress, news: LaneNews) -> None:
        if news.due_in is not None:
            self.wake(address, self.clock.t + news.due_in)


@dataclass
class Simulated:
    """What a simulation found: the batches, how many events it read and matched, and why the rest did not."""

    batches: list[dict[str, Any]]
    events: int
    matched: int
    unmatched: Counter[str]
    unmatched_events: list[dict[str, Any]]

    def reply(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "events": self.events,
            "matched": self.matched,
            "unmatched": dict(sorted(self.unmatched.items())),
            "unmatched_events": self.unmatched_events,
        }


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat()


async def simulate(
    stream: Sequence[Committed],
    declaration: ListenerDeclaration,
    settings: Settings,
    session_id: str,
    *,
    after: int = 0,
    run_seconds: float = 0.0,
) -> Simulated:
    """The batches `declaration` would have cut from `stream` (a session's events after `after`, in id order)."""
    body = declaration.model_dump(mode="json", exclude_unset=True)
    versions = [ListenerVersion(declaration.name, 1, datetime.min.replace(tzinfo=UTC), declaration, body)]
    clock = _Clock(stream[0].created_at.timestamp() if stream else 0.0)
    store = MemoryLaneStore(lambda: clock.t)
    store.open_session(session_id)
    store.cursors[session_id] = after
    store.save_listener(body, effective_at=0.0)
    for event in stream:
        store.load(session_id, event.envelope, event.created_at.timestamp())
    runs, wakes = _Runs(clock, run_seconds), _Wakes(clock)
    # Time skips here: nothing is waited out on a wall clock.
    timing = settings.model_copy(update={"temporal_time_skipping": True})
    driver = LaneDriver(store, timing, runs, _Writes(), wakes, observed=UNOBSERVED)
    declared = Declared(**lane_timing(declaration))
    unmatched: Counter[str] = Counter()
    named: list[dict[str, Any]] = []
    matched = arrived = 0
    arrivals = _arrivals(stream)
    for step in range(MAX_STEPS):
        if step % YIELD_EVERY == 0:
            await asyncio.sleep(0)
        next_event = arrivals[arrived] if arrived < len(stream) else math.inf
        next_end = runs.ends[0][0] if runs.ends else math.inf
        next_wake = min(wakes.at.values(), default=math.inf)
        t = min(next_event, next_end, next_wake)
        if t == math.inf:
            break
        clock.t = max(clock.t, t)
        if next_end <= t:
            _, _, tag = heapq.heappop(runs.ends)
            await driver.end(tag, "completed", None)
        elif next_event <= t:
            first = arrived
            while arrived < len(stream) and arrivals[arrived] <= clock.t:
                arrived += 1
            now = stream[first:arrived]
            for event in now:
                found = routing_decision(declaration.name, versions, event.envelope, event.created_at)
                if found["matched"]:
                    matched += 1
                    continue
                unmatched[found["reason"]] += 1
                if len(named) < UNMATCHED_NAMED:
                    named.append({"event_id": event.id, "reason": found["reason"], "message": found["message"]})
            # The round reads the events that arrived, and no further: the stream was loaded whole, in id order,
            # and what the simulated runs write comes after all of it.
            routed = await store.route_page(session_id, len(now), settings.limits.listener_parallel_runs)
            for nudge in routed.nudges:
                wakes.wake(nudge.address, max(window_close(nudge.oldest_at, nudge.newest_at, declared), clock.t))
        else:
            address = min(wakes.at, key=lambda a: (wakes.at[a], a.workflow_id))
            del wakes.at[address]
            drive = await driver.drive(address)
            if drive.handed:
                await driver.hand_on(drive.handed)
            news = drive.news()
            if news.due_in is not None:
                wakes.wake(address, clock.t + max(news.due_in, TICK))
    return Simulated(_batches(store), len(stream), matched, unmatched, named)


def _arrivals(stream: Sequence[Committed]) -> list[float]:
    """When each event reaches the router: with the last of its transaction's events (they commit, and are
    routed, together; ids are in commit order, so they are consecutive), else at its own time."""
    found = [event.created_at.timestamp() for event in stream]
    for n in range(len(stream) - 2, -1, -1):
        if stream[n].tx is not None and stream[n].tx == stream[n + 1].tx:
            found[n] = max(found[n], found[n + 1])
    return found


def _batches(store: MemoryLaneStore) -> list[dict[str, Any]]:
    """The lanes' batches in the order they were cut, each with its outcome as `list_session_listeners`
    would show it."""
    outcomes = {(o["lane"], o["first_id"], o["retry"], o["replay"]): o for o in store.outcomes.values()}
    found = []
    for batch in sorted(store.batches.values(), key=lambda b: b.id):
        lane = store.lanes[batch.lane_id].lane
        outcome = outcomes.get((lane, batch.first_id, batch.retry, batch.replay), {})
        answer: dict[str, Any] = {
            "lane": lane,
            "first_id": batch.first_id,
            "last_id": batch.last_id,
            "event_ids": list(batch.event_ids),
            "count": len(batch.entry_ids),
            "fires_at": _iso(batch.created_at),
            "status": outcome.get("status", "consumed"),
        }
        if outcome.get("reason"):
            answer["reason"] = outcome["reason"]
        if outcome.get("message"):
            answer["message"] = outcome["message"]
        found.append(answer)
    return found
