"""The lane step and its driver against the in-memory twin, as a hypothesis state machine: no servers.

Random writes, routing rounds, drives, runs ending (completed, failed, stopped), a driver dying between any
two of its verbs, pauses and resumes, replays, the clock moving on, and the lane's clock handed over by
continue-as-new. After every step: every routed event is in exactly one of its lane's own batches once the
lane has fired past it; never more runs than slots, nor more keys running than `max_parallel`; the throttle
holds exactly; a repeat waits its delay and its run holds the slot meanwhile. At the end, with the clock run
on and every run ended, nothing is left waiting, claimed, or holding a slot.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from orchestrator.config import Settings
from orchestrator.core.backoff import retry_delay
from orchestrator.core.declaration import ListenerDeclaration, effective_max_parallel, lane_run_slots
from orchestrator.core.lane_clock import LaneClock, LaneNews, nudged, reported
from orchestrator.core.lane_snapshot import LaneAddress, Take
from orchestrator.core.lane_step import step
from orchestrator.core.limits import Limits
from orchestrator.core.routing import route, versions_by_name
from orchestrator.lanes.driver import Drive, LaneDriver
from orchestrator.store.lane_store import QueuedLane, Recorded
from orchestrator.store.lanes_memory import MemoryLaneStore
from orchestrator.workflows.messages import RunInput, RunTag

SESSION = "ses_machine"
ALIASES = ["a", "b", "c"]


@dataclass
class Starts:
    """Temporal as the driver sees it: runs started once each, by execution id."""

    runs: dict[str, RunTag] = field(default_factory=dict)
    ended: set[str] = field(default_factory=set)
    most_in_lane: Counter[str] = field(default_factory=Counter)

    async def start(self, tag: RunTag, run_input: RunInput, priority: Any) -> None:
        self.runs.setdefault(tag.execution_id, tag)

    async def stop(self, execution_id: str, reason: str) -> None:
        self.ended.add(execution_id)

    def running(self) -> list[RunTag]:
        return [t for i, t in sorted(self.runs.items()) if i not in self.ended]


class Writes:
    async def write(self, decl: Any, session_id: str, context: Any, depth: int, key: str) -> tuple[str, None]:
        return "success", None


@dataclass
class Nudges:
    sent: list[tuple[LaneAddress, LaneNews]] = field(default_factory=list)

    async def nudge_quietly(self, address: LaneAddress, news: LaneNews) -> None:
        self.sent.append((address, news))


class Crash(Exception):
    """A driver dying between two of its verbs."""


class LaneMachine(RuleBasedStateMachine):
    @initialize(
        mode=st.sampled_from(["serial", "keyed", "parallel"]),
        window=st.sampled_from([0.0, 1.0, 3.0]),
        max_events=st.integers(1, 4),
        max_parallel=st.integers(1, 2),
        attempts=st.integers(0, 2),
        distinct=st.booleans(),
        fires=st.sampled_from([3, 1000]),
        read_ahead=st.sampled_from([0, 1, 8]),
    )
    def start(
        self,
        mode: str,
        window: float,
        max_events: int,
        max_parallel: int,
        attempts: int,
        distinct: bool,
        fires: int,
        read_ahead: int,
    ) -> None:
        self.loop = asyncio.new_event_loop()
        self.t = 1_000.0
        self.store = MemoryLaneStore(lambda: self.t)
        self.store.open_session(SESSION)
        concurrency: dict[str, Any] = {"mode": mode}
        if mode == "keyed":
            concurrency |= {"key": "alias", "max_parallel": max_parallel}
        elif mode == "parallel":
            concurrency |= {"max_parallel": max_parallel}
        body: dict[str, Any] = {
            "name": "l",
            "filter": {"types": ["object.written"]},
            "concurrency": concurrency,
            "batch": {"window_seconds": window, "max_events": max_events, "distinct_by": "alias" if distinct else None},
            "action": {"type": "workflow", "workflow": "w"},
        }
        if attempts:
            body["retry"] = {"attempts": attempts, "delay_seconds": 2}
        self.store.save_listener(body, effective_at=0.0)
        self.decl = ListenerDeclaration.model_validate(body)
        self.limits = Limits(activation_delay_seconds=0, listener_fires_per_minute=fires)
        # The machine's clock is its own: a driver waits nothing out on the wall clock (as on a server that skips time).
        self.settings = Settings(limits=self.limits, temporal_time_skipping=True)
        self.starts, self.nudges = Starts(), Nudges()
        # With a read ahead, a drive's first read may be one taken when an earlier drive ended, before any of
        # the writes, routes, ends and records that came between.
        self.driver = LaneDriver(self.store, self.settings, self.starts, Writes(), self.nudges, read_ahead=read_ahead)
        # (run key, the repeat's retry number) -> when that repeat is due: each failure sets its own repeat's.
        self.repeat_due: dict[tuple[str, int], float] = {}
        self.clocks: dict[str, LaneClock] = {}
        # What the router queued into each lane (listener, lane), ever: the queue itself keeps only what waits.
        self.routed: dict[tuple[str, str], set[int]] = {}

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        if hasattr(self, "loop"):
            self.settle()
            self.loop.close()

    # -- the world moves -----------------------------------------------------------------------------------

    @rule(alias=st.sampled_from(ALIASES))
    def write(self, alias: str) -> None:
        self.store.append(SESSION, "object.written", alias=alias, data={"rev": 1})

    @rule()
    def route_round(self) -> None:
        position, events, _ = self.run(self.store.unrouted(SESSION, 1000))
        if not events:
            return
        versions = versions_by_name(
            {"name": n, "version": v, "effective_at": "1970-01-01T00:00:00+00:00", "body": b}
            for n, vs in self.store.listeners.items()
            for v, _, b in vs
        )
        deliveries = route([(e.envelope, e.created_at) for e in events], versions)
        created = {e.id: e.created_at for e in events}
        queued = [QueuedLane.of(SESSION, d, created, self.limits) for d in deliveries]
        routed = self.run(self.store.route(SESSION, position, events[-1].id, queued))
        for q in queued if routed.saved else []:
            self.routed.setdefault((q.listener, q.lane), set()).update(q.event_ids)
        for nudge in routed.nudges:
            self._told(nudge.address.workflow_id, LaneNews(due_in=0.0), nudge=True)

    @rule(seconds=st.sampled_from([0.5, 1.0, 2.0, 5.0, 61.0]))
    def clock_runs_on(self, seconds: float) -> None:
        self.t += seconds

    @rule(index=st.integers(0, 2))
    def drive(self, index: int) -> None:
        lanes = sorted(self.store.lanes.values(), key=lambda lane: lane.id)
        if lanes:
            lane = lanes[index % len(lanes)]
            drive = self.run(self.driver.drive(lane.address))
            if drive.handed:
                self.run(self.driver.hand_on(drive.handed))
            self._told(lane.workflow_id, drive.news())

    @rule(index=st.integers(0, 2), at=st.sampled_from(["record", "act", "finish"]))
    def driver_dies(self, index: int, at: str) -> None:
        lanes = sorted(self.store.lanes.values(), key=lambda lane: lane.id)
        if not lanes:
            return
        lane = lanes[index % len(lanes)]
        target = {"record": (self.store, "record"), "act": (self.driver, "_act"), "finish": (self.store, "finish")}[at]
        holder, name = target
        real = getattr(holder, name)

        async def dies(*args: Any, **kwargs: Any) -> Any:
            if at != "record":
                await real(*args, **kwargs)  # its effect lands, then the driver dies
            raise Crash(at)

        setattr(holder, name, dies)
        try:
            self.run(self.driver.drive(lane.address))
        except Crash:
            pass
        finally:
            setattr(holder, name, real)

    @rule(index=st.integers(0, 2))
    def two_drivers_race(self, index: int) -> None:
        """One driver reads the lane and decides; another drives it meanwhile (a run's end handing a slot on,
        the lane's own step); then the first records what it decided, over what it read."""
        lanes = sorted(self.store.lanes.values(), key=lambda lane: lane.id)
        if not lanes:
            return
        lane = lanes[index % len(lanes)]
        snap = self.run(self.store.snapshot(lane.address))
        assert snap is not None
        decision = step(snap, snap.now, self.limits)
        self.drive(index)
        if not isinstance(decision, Take):
            return
        key_max = effective_max_parallel(self.decl.concurrency, self.limits)
        recorded = self.run(self.store.record(snap, decision, self.limits.listener_fires_per_minute, key_max))
        if isinstance(recorded, Recorded):
            self.run(self.driver._act_and_finish(snap, decision, recorded.batch_id, Drive()))

    @precondition(lambda self: bool(self.starts.running()))
    @rule(index=st.integers(0, 5), status=st.sampled_from(["completed", "failed", "stopped"]))
    def run_ends(self, index: int, status: str) -> None:
        running = self.starts.running()
        tag = running[index % len(running)]
        self.starts.ended.add(tag.execution_id)
        if status == "failed" and tag.retry < tag.attempts and tag.run_key is not None:
            self.repeat_due[(tag.run_key, tag.retry + 1)] = self.t + retry_delay(tag.delay_seconds, tag.retry)
        self.run(self.driver.end(tag, status, None))

    @rule(paused=st.booleans())
    def pause_or_resume(self, paused: bool) -> None:
        if paused:
            self.store.pauses.add(("l", None))
        else:
            self.store.pauses.discard(("l", None))

    @precondition(lambda self: any(b.retry == 0 and b.replay == 0 for b in self.store.batches.values()))
    @rule(index=st.integers(0, 10))
    def replay_a_batch(self, index: int) -> None:
        own = sorted((b for b in self.store.batches.values() if b.retry == 0 and b.replay == 0), key=lambda b: b.id)
        batch = own[index % len(own)]
        self.store.ask_replay(batch.lane_id, batch.event_ids, batch.first_id)

    @rule()
    def continue_as_new(self) -> None:
        """A lane's clock is its whole state: it survives being handed over as JSON."""
        for workflow_id, clock in self.clocks.items():
            self.clocks[workflow_id] = LaneClock.model_validate_json(clock.model_dump_json())
            assert self.clocks[workflow_id] == clock

    def _told(self, workflow_id: str, news: LaneNews, *, nudge: bool = False) -> None:
        clock = self.clocks.get(workflow_id, LaneClock())
        self.clocks[workflow_id] = nudged(clock, news, self.t) if nudge else reported(clock, news, self.t)

    # -- what always holds ---------------------------------------------------------------------------------

    @invariant()
    def every_fired_event_is_in_exactly_one_own_batch(self) -> None:
        for lane in self.store.lanes.values():
            own = [b for b in self.store.batches.values() if b.lane_id == lane.id and b.retry == 0 and b.replay == 0]
            taken = Counter(i for b in own for i in b.event_ids)
            assert all(n == 1 for n in taken.values()), f"an event in two batches of lane {lane.lane}: {taken}"
            routed = self.routed.get((lane.listener, lane.lane), set())
            fired = {i for i in routed if i <= lane.fired_through}
            assert set(taken) == fired, f"lane {lane.lane}: fired {sorted(fired)}, batched {sorted(taken)}"
            # The queue holds what waits, and of what its batches took only a claimed batch's: a batch's rows go
            # when it is finished (0016), by whichever driver finishes it.
            waiting = {i for i in routed if i > lane.fired_through}
            claimed = {i for b in own if b.state == "claimed" for i in b.event_ids}
            queue = set(lane.queue)
            assert waiting <= queue <= waiting | claimed, (
                f"lane {lane.lane}: queue {sorted(queue)}, waiting {sorted(waiting)}, claimed {sorted(claimed)}"
            )

    @invariant()
    def never_more_runs_than_slots(self) -> None:
        cap = lane_run_slots(self.decl, self.limits) or 1
        by_lane = Counter(r.lane_id for r in self.store.runs.values())
        assert all(n <= cap for n in by_lane.values()), by_lane
        running = Counter(t.lane for t in self.starts.running() if t.run_key in self.store.runs)
        assert all(n <= cap for n in running.values()), running
        if self.decl.concurrency.mode == "keyed":
            most = effective_max_parallel(self.decl.concurrency, self.limits)
            assert len(by_lane) <= most, f"{len(by_lane)} keys running, at most {most}"
            assert sum(1 for k in self.store.key_slots.values() if k.holding) <= most

    @invariant()
    def a_batch_is_taken_once_its_window_has_closed(self) -> None:
        window = self.decl.batch.window_seconds
        for batch in self.store.batches.values():
            if batch.retry == 0 and batch.replay == 0:
                oldest = min(self.store.events[i].committed for i in batch.event_ids)
                assert batch.created_at >= oldest + window - 1e-9, "a batch was cut before its window closed"

    @invariant()
    def a_key_slot_is_never_free_while_a_lane_waits_for_one(self) -> None:
        if self.decl.concurrency.mode != "keyed":
            return
        held = sum(1 for k in self.store.key_slots.values() if k.holding)
        queued = [k for k in self.store.key_slots.values() if not k.holding]
        most = effective_max_parallel(self.decl.concurrency, self.limits)
        assert held >= most or not queued, f"{held} of {most} key slots held while {len(queued)} lanes wait"

    @invariant()
    def the_throttle_is_exact(self) -> None:
        fires = sorted(b.created_at for b in self.store.batches.values() if b.counted)
        for i, at in enumerate(fires):
            in_minute = [f for f in fires[i:] if f < at + 60]
            assert len(in_minute) <= self.limits.listener_fires_per_minute

    @invariant()
    def repeats_wait_their_delay_and_hold_their_slot(self) -> None:
        for batch in self.store.batches.values():
            due = self.repeat_due.get((batch.run_key or "", batch.retry))
            if batch.retry > 0 and due is not None:
                assert batch.created_at >= due - 1e-9, "a repeat came before its delay"
        for run in self.store.runs.values():
            if run.due_at is not None:
                assert (run.run_key, run.retry + 1) in self.repeat_due, "only a failed run waits for its repeat"

    # -- nothing stranded ----------------------------------------------------------------------------------

    def settle(self) -> None:
        """Run the clock on and let everything finish: route, drive every lane, end every run."""
        self.store.pauses.clear()
        for _ in range(200):
            self.t += 61.0
            self.route_round()
            for index in range(len(self.store.lanes)):
                self.drive(index)
            running = self.starts.running()
            if not running and not self._busy():
                break
            for tag in running:
                self.starts.ended.add(tag.execution_id)
                self.run(self.driver.end(tag, "completed", None))
        assert not self._busy(), self._busy()
        for lane in self.store.lanes.values():
            assert lane.fired_through == lane.routed_through, "every routed event was taken"
        assert not self.store.key_slots, "no key slot is left held or queued"

    def _busy(self) -> dict[str, int]:
        busy = {
            "waiting": sum(1 for lane in self.store.lanes.values() if lane.routed_through > lane.fired_through),
            "claimed": sum(1 for b in self.store.batches.values() if b.state == "claimed"),
            "runs": len(self.store.runs),
            "replays": len(self.store.replays),
            "unrouted": sum(1 for e in self.store.events if e > self.store.cursors[SESSION]),
        }
        return {k: v for k, v in busy.items() if v}


LaneMachine.TestCase.settings = settings(
    max_examples=300, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_the_lane_step_keeps_its_promises = LaneMachine.TestCase
