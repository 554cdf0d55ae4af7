"""The lane step and its driver against a lane store, as a hypothesis state machine: on the in-memory twin and on
PostgreSQL (`tests/lane_worlds/`), no Temporal.

Random writes, routing rounds, drives, runs ending (completed, failed, stopped), a driver dying between any
two of its verbs, pauses and resumes, the listener switched off and on in the session, saved again (the same
body, a narrower or wider filter, another `max_events`) or deleted, replays, the clock moving on, and the lane's
clock handed over by continue-as-new; the listener with or without a throttle of its own (one key, or per alias).
After every step: every routed event is in exactly one of its lane's own batches once the lane has fired past it;
never more runs than slots, nor more keys running than `max_parallel`, and key slots a keyed listener's alone;
the throttle holds exactly, and so does the listener's own (per key, a batch counted under each of its keys); a
repeat waits its delay and its run holds the slot meanwhile. At the end, with the clock run on and every run
ended, nothing is left waiting, claimed, or holding a slot.

Each example opens a world of its own (`open_world`) in an event loop of its own, and closes both in its
teardown: tests/engine/test_lane_machine.py runs it on both stores, `bench.lane_machine` for many more examples.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from orchestrator.config import Settings
from orchestrator.core.backoff import retry_delay
from orchestrator.core.declaration import ListenerDeclaration, effective_max_parallel, lane_run_slots
from orchestrator.core.lane_clock import LaneClock, LaneNews, nudged, reported
from orchestrator.core.lane_snapshot import LaneAddress, LaneSnapshot, Take
from orchestrator.core.lane_step import step
from orchestrator.core.limits import Limits
from orchestrator.lanes.driver import Drive, LaneDriver
from orchestrator.store.lane_store import Recorded, Stale
from orchestrator.workflows.messages import RunInput, RunTag
from tests.lane_worlds import Held, LaneRow, LaneWorld, route_round

ALIASES = ["a", "b", "c"]
# Times the store reports are floats of epoch seconds; on PostgreSQL, microseconds moved by the world's advances.
EPSILON = 1e-5

# Opens the world an example runs in, with these limits (in the example's own event loop).
WorldOpener = Callable[[Limits], Awaitable[LaneWorld]]


@dataclass
class Starts:
    """Temporal as the driver sees it: runs started once each, by execution id."""

    runs: dict[str, RunTag] = field(default_factory=dict)
    ended: set[str] = field(default_factory=set)

    async def start(self, tag: RunTag, run_input: RunInput, priority: Any) -> None:
        self.runs.setdefault(tag.execution_id, tag)

    async def stop(self, execution_id: str, reason: str) -> None:
        self.ended.add(execution_id)

    async def cancel(self, execution_id: str) -> bool:
        return execution_id in self.runs and execution_id not in self.ended

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


def close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what a loop still runs (a driver's reads ahead) and close it."""
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.close()


class LaneMachine(RuleBasedStateMachine):
    def __init__(self, open_world: WorldOpener, tally: Counter[str] | None = None) -> None:
        super().__init__()
        self.open_world = open_world
        # What the examples reached, summed over them (steps, batches, runs, repeats, replays, drivers dead).
        self.tally: Counter[str] = Counter() if tally is None else tally

    @initialize(
        mode=st.sampled_from(["serial", "keyed", "parallel"]),
        window=st.sampled_from([0.0, 1.0, 3.0]),
        max_events=st.integers(1, 4),
        max_parallel=st.integers(1, 2),
        attempts=st.integers(0, 2),
        distinct=st.booleans(),
        fires=st.sampled_from([3, 1000]),
        read_ahead=st.sampled_from([0, 1, 8]),
        throttle=st.sampled_from([None, {"per_seconds": 5, "runs": 1}, {"per_seconds": 5, "runs": 2, "key": "alias"}]),
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
        throttle: dict[str, Any] | None,
    ) -> None:
        self.loop = asyncio.new_event_loop()
        self.limits = Limits(activation_delay_seconds=0, listener_fires_per_minute=fires)
        self.world = self.run(self.open_world(self.limits))
        self.session = self.run(self.world.open_session())
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
        if throttle is not None:
            body["throttle"] = throttle
        self.body = body
        self.run(self.world.save_listener(body))
        # What stays the same whatever the listener is saved again with: its concurrency, window and action.
        self.decl = ListenerDeclaration.model_validate(body)
        self.deleted = False
        # Whether it was ever deleted: a deleted listener's batches are consumed at once, window or not.
        self.was_deleted = False
        # The machine's clock is its own: a driver waits nothing out on the wall clock (as on a server that skips time).
        self.settings = Settings(limits=self.limits, temporal_time_skipping=True)
        self.starts, self.nudges = Starts(), Nudges()
        # With a read ahead, a drive's first read may be one taken when an earlier drive ended, before any of
        # the writes, routes, ends and records that came between.
        self.driver = LaneDriver(
            self.world.lanes, self.settings, self.starts, Writes(), self.nudges, read_ahead=read_ahead
        )
        # (run key, the repeat's retry number) -> when that repeat is due: each failure sets its own repeat's.
        self.repeat_due: dict[tuple[str, int], float] = {}
        # (run key, retry) of the repeats a stop called off: never cut.
        self.stopped_repeats: set[tuple[str, int]] = set()
        self.clocks: dict[str, LaneClock] = {}
        # What the router queued into each lane (listener, lane), ever: the queue itself keeps only what waits.
        self.routed: dict[tuple[str, str], set[int]] = {}
        self.look()

    def run(self, coro: Awaitable[Any]) -> Any:
        return self.loop.run_until_complete(coro)

    def look(self) -> Held:
        """Read what the store holds now (the invariants' view, and the rules' between two steps)."""
        held: Held = self.run(self.world.held())
        self.held = held
        return held

    def teardown(self) -> None:
        if not hasattr(self, "loop"):
            return
        try:
            if hasattr(self, "world"):
                try:
                    self.settle()
                finally:
                    self.run(self.world.close())
        finally:
            close_loop(self.loop)

    def _lanes(self) -> list[LaneRow]:
        return sorted(self.held.lanes.values(), key=lambda lane: lane.id)

    # -- the world moves -----------------------------------------------------------------------------------

    @rule(alias=st.sampled_from(ALIASES))
    def write(self, alias: str) -> None:
        self.run(self.world.write(self.session, alias))

    @rule()
    def route_round(self) -> None:
        routed, queued = self.run(route_round(self.world, self.session, self.limits.listener_parallel_runs))
        for lane, ids in queued.items():
            self.routed.setdefault(lane, set()).update(ids)
        for nudge in routed.nudges:
            self._told(nudge.address.workflow_id, LaneNews(due_in=0.0), nudge=True)

    @rule(seconds=st.sampled_from([0.5, 1.0, 2.0, 5.0, 61.0]))
    def clock_runs_on(self, seconds: float) -> None:
        self.run(self.world.advance(seconds))

    @rule(index=st.integers(0, 2))
    def drive(self, index: int) -> None:
        lanes = self._lanes()
        if lanes:
            self._drive(lanes[index % len(lanes)].address)

    def _drive(self, address: LaneAddress) -> None:
        drive = self.run(self.driver.drive(address))
        if drive.wait is not None and drive.wait.reason == "throttled":
            self.tally["held by the throttle"] += 1
        if drive.handed:
            self.run(self.driver.hand_on(drive.handed))
        self._told(address.workflow_id, drive.news())

    @rule()
    def poll(self) -> None:
        """The router's poll: each lane it finds (events waiting past their window and a grace with no nudge, a
        queue nobody will hand a slot to, a batch left claimed, a repeat long due) is nudged, and steps."""
        for stale in self.run(self.world.lanes.stale_lanes()):
            self.tally["polled"] += 1
            self._drive(stale.address)

    @rule(index=st.integers(0, 2), at=st.sampled_from(["record", "act", "finish"]))
    def driver_dies(self, index: int, at: str) -> None:
        lanes = self._lanes()
        if not lanes:
            return
        lane = lanes[index % len(lanes)]
        target = {
            "record": (self.world.lanes, "record"),
            "act": (self.driver, "_act"),
            "finish": (self.world.lanes, "finish"),
        }[at]
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
            self.tally[f"died at {at}"] += 1
        finally:
            setattr(holder, name, real)

    @rule(index=st.integers(0, 2))
    def two_drivers_race(self, index: int) -> None:
        """One driver reads the lane and decides; another drives it meanwhile (a run's end handing a slot on,
        the lane's own step); then the first records what it decided, over what it read."""
        lanes = self._lanes()
        if not lanes:
            return
        lane = lanes[index % len(lanes)]
        snap = self.run(self.world.lanes.snapshot(lane.address))
        assert snap is not None
        decision = step(snap, snap.now, self.limits)
        self.drive(index)
        if not isinstance(decision, Take):
            return
        recorded = self._record(snap, decision)
        if isinstance(recorded, Recorded):
            self.run(self.driver._act_and_finish(snap, decision, recorded.batch_id, Drive()))

    def _record(self, snap: LaneSnapshot, decision: Take) -> Recorded | Stale:
        """Record, as a driver does, what was decided over `snap`."""
        limits = self.limits
        recorded: Recorded | Stale = self.run(
            self.world.lanes.record(
                snap,
                decision,
                limits.listener_fires_per_minute,
                effective_max_parallel(self.decl.concurrency, limits),
                executions_limit=limits.executions_per_session,
            )
        )
        return recorded

    @precondition(lambda self: bool(self.starts.running()))
    @rule(index=st.integers(0, 5), status=st.sampled_from(["completed", "failed", "stopped"]))
    def run_ends(self, index: int, status: str) -> None:
        running = self.starts.running()
        tag = running[index % len(running)]
        self.starts.ended.add(tag.execution_id)
        if status == "failed" and tag.retry < tag.attempts and tag.run_key is not None:
            self.repeat_due[(tag.run_key, tag.retry + 1)] = self.world.now() + retry_delay(tag.delay_seconds, tag.retry)
        self.run(self.driver.end(tag, status, None))

    @precondition(lambda self: any(t.retry < t.attempts for t in self.starts.running()))
    @rule(index=st.integers(0, 5))
    def a_run_fails_with_attempts_left(self, index: int) -> None:
        """As `run_ends` failed, for a run that has attempts left: repeats reached far more often."""
        failing = [t for t in self.starts.running() if t.retry < t.attempts]
        tag = failing[index % len(failing)]
        self.run_ends(self.starts.running().index(tag), "failed")

    @precondition(lambda self: any(r.due_at is not None for r in self.held.runs.values()))
    @rule(index=st.integers(0, 2), raced=st.booleans())
    def a_repeat_is_stopped(self, index: int, raced: bool) -> None:
        """`stop_execution` of a failed run waiting for its repeat: the repeat is called off, its slot handed on.
        `raced`: a driver read the lane once the repeat was due and decided before the stop, and records after it."""
        waiting = sorted((r for r in self.held.runs.values() if r.due_at is not None), key=lambda r: r.run_key)
        run = waiting[index % len(waiting)]
        address = self.held.lanes[run.lane_id].address
        if raced and run.due_at is not None:
            # Its repeat due: the driver's decision is to take it.
            self.run(self.world.advance(max(run.due_at - self.world.now(), 0.0) + 0.01))
        snap = self.run(self.world.lanes.snapshot(address)) if raced else None
        decision = step(snap, snap.now, self.limits) if snap is not None else None
        key_max = effective_max_parallel(self.decl.concurrency, self.limits)
        drive = self.run(self.world.lanes.stop_repeat(self.session, run.execution_id, key_max))
        assert drive is not None, "a repeat waited"
        assert self.run(self.world.lanes.stop_repeat(self.session, run.execution_id, key_max)) is None, "once"
        self.stopped_repeats.add((run.run_key, run.retry + 1))
        self.tally["repeats stopped"] += 1
        if snap is not None and isinstance(decision, Take):
            recorded = self._record(snap, decision)
            assert isinstance(recorded, Stale), "a decision read before the stop is recorded over nothing"
            self.tally["stale after a stopped repeat"] += 1
        if drive:
            self.run(self.driver.hand_on(list(drive)))

    @precondition(lambda self: not self.deleted)
    @rule(paused=st.booleans())
    def pause_or_resume(self, paused: bool) -> None:
        self.run(self.world.pause("l") if paused else self.world.resume("l"))

    @rule(
        change=st.sampled_from(["save", "delete", "switch off", "switch on"]),
        narrow=st.booleans(),
        max_events=st.integers(1, 4),
    )
    def listener_changes(self, change: str, narrow: bool, max_events: int) -> None:
        """The listener saved again (after its deletion too): the same body (no new version), its filter narrowed
        to two aliases or widened again, or its batches' size changed; or deleted; or switched off or on in the
        session (which the commands refuse for a deleted listener)."""
        if change == "save":
            body = {**self.body, "batch": {**self.body["batch"], "max_events": max_events}}
            body["filter"] = {"types": ["object.written"], **({"aliases": ["a", "b"]} if narrow else {})}
            self.run(self.world.save_listener(body))
            self.deleted = False
        elif change == "delete" and not self.deleted:
            self.run(self.world.delete_listener("l"))
            self.deleted = self.was_deleted = True
        elif change.startswith("switch") and not self.deleted:
            self.run(self.world.switch(self.session, "l", change == "switch on"))

    @precondition(lambda self: any(b.own for b in self.held.batches.values()))
    @rule(index=st.integers(0, 10))
    def replay_a_batch(self, index: int) -> None:
        own = sorted((b for b in self.held.batches.values() if b.own), key=lambda b: b.id)
        batch = own[index % len(own)]
        self.run(self.world.ask_replay(batch.lane_id, batch.event_ids, batch.first_id))

    @rule()
    def continue_as_new(self) -> None:
        """A lane's clock is its whole state: it survives being handed over as JSON."""
        for workflow_id, clock in self.clocks.items():
            self.clocks[workflow_id] = LaneClock.model_validate_json(clock.model_dump_json())
            assert self.clocks[workflow_id] == clock

    def _told(self, workflow_id: str, news: LaneNews, *, nudge: bool = False) -> None:
        clock = self.clocks.get(workflow_id, LaneClock())
        now = self.world.now()
        self.clocks[workflow_id] = nudged(clock, news, now) if nudge else reported(clock, news, now)

    # -- what always holds ---------------------------------------------------------------------------------

    @invariant()
    def the_promises_hold(self) -> None:
        self.tally["steps"] += 1
        held = self.look()
        self.every_fired_event_is_in_exactly_one_own_batch(held)
        self.never_more_runs_than_slots(held)
        self.a_batch_is_taken_once_its_window_has_closed(held)
        self.a_key_slot_is_never_free_while_a_lane_waits_for_one(held)
        self.the_throttle_is_exact(held)
        self.the_listeners_own_throttle_is_exact(held)
        self.repeats_wait_their_delay_and_hold_their_slot(held)

    def every_fired_event_is_in_exactly_one_own_batch(self, held: Held) -> None:
        for lane in held.lanes.values():
            own = [b for b in held.batches.values() if b.lane_id == lane.id and b.own]
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

    def never_more_runs_than_slots(self, held: Held) -> None:
        cap = lane_run_slots(self.decl, self.limits) or 1
        by_lane = Counter(r.lane_id for r in held.runs.values())
        assert all(n <= cap for n in by_lane.values()), by_lane
        running = Counter(t.lane for t in self.starts.running() if t.run_key in held.runs)
        assert all(n <= cap for n in running.values()), running
        if self.decl.concurrency.mode == "keyed":
            most = effective_max_parallel(self.decl.concurrency, self.limits)
            assert len(by_lane) <= most, f"{len(by_lane)} keys running, at most {most}"
            assert sum(1 for holding in held.key_slots.values() if holding) <= most

    def a_batch_is_taken_once_its_window_has_closed(self, held: Held) -> None:
        window = self.decl.batch.window_seconds
        for batch in held.batches.values():
            if batch.own and not (self.was_deleted and batch.verdict == {"consumed": True}):
                oldest = min(held.events[i].committed for i in batch.event_ids)
                assert batch.created_at >= oldest + window - EPSILON, "a batch was cut before its window closed"

    def a_key_slot_is_never_free_while_a_lane_waits_for_one(self, held: Held) -> None:
        if self.decl.concurrency.mode != "keyed":
            assert not held.key_slots, f"key slots are a keyed listener's alone: {held.key_slots}"
            return
        if self.was_deleted:
            # A deleted listener's lane gives its slot back to nobody (it has no key slots): the lanes queued for
            # one wait for the poll, which nudges a queue nobody holds a slot of.
            return
        holding = sum(1 for h in held.key_slots.values() if h)
        queued = sum(1 for h in held.key_slots.values() if not h)
        most = effective_max_parallel(self.decl.concurrency, self.limits)
        assert holding >= most or not queued, f"{holding} of {most} key slots held while {queued} lanes wait"

    def the_throttle_is_exact(self, held: Held) -> None:
        fires = sorted(b.created_at for b in held.batches.values() if b.counted)
        for i, at in enumerate(fires):
            in_minute = [f for f in fires[i:] if f < at + 60]
            assert len(in_minute) <= self.limits.listener_fires_per_minute

    def the_listeners_own_throttle_is_exact(self, held: Held) -> None:
        throttle = self.decl.throttle
        counted = [b for b in held.batches.values() if b.counted]
        if throttle is None:
            assert not any(b.throttle_keys for b in counted)
            return
        starts: dict[str, list[float]] = {}
        for batch in counted:
            keys = set(batch.throttle_keys)
            assert keys, "a counted batch of a throttled listener counts under its keys"
            assert keys <= ({"_"} if throttle.key is None else set(ALIASES)), keys
            for key in keys:
                starts.setdefault(key, []).append(batch.created_at)
        for key, times in starts.items():
            times.sort()
            for i, at in enumerate(times):
                inside = [t for t in times[i:] if t < at + throttle.per_seconds - EPSILON]
                assert len(inside) <= throttle.runs, f"key {key}: {len(inside)} starts within {throttle.per_seconds} s"

    def repeats_wait_their_delay_and_hold_their_slot(self, held: Held) -> None:
        for batch in held.batches.values():
            due = self.repeat_due.get((batch.run_key or "", batch.retry))
            if batch.retry > 0 and due is not None:
                assert batch.created_at >= due - EPSILON, "a repeat came before its delay"
            assert (batch.run_key, batch.retry) not in self.stopped_repeats, "a repeat called off was cut"
        for run in held.runs.values():
            if run.due_at is not None:
                assert (run.run_key, run.retry + 1) in self.repeat_due, "only a failed run waits for its repeat"

    # -- nothing stranded ----------------------------------------------------------------------------------

    def settle(self) -> None:
        """Run the clock on and let everything finish: route, drive every lane, end every run."""
        self.run(self.world.resume("l"))
        if not self.deleted:
            self.run(self.world.switch(self.session, "l", True))
        for _ in range(200):
            self.run(self.world.advance(61.0))
            self.route_round()
            for index in range(len(self.look().lanes)):
                self.drive(index)
            running = self.starts.running()
            if not running and not self._busy():
                break
            for tag in running:
                self.starts.ended.add(tag.execution_id)
                self.run(self.driver.end(tag, "completed", None))
        assert not self._busy(), self._busy()
        held = self.look()
        for lane in held.lanes.values():
            assert lane.fired_through == lane.routed_through, "every routed event was taken"
        assert not held.key_slots, "no key slot is left held or queued"
        self.tally.update(
            examples=1,
            batches=len(held.batches),
            runs=len(self.starts.runs),
            repeats=sum(1 for b in held.batches.values() if b.retry > 0),
            replays=sum(1 for b in held.batches.values() if b.replay > 0),
        )

    def _busy(self) -> dict[str, int]:
        held = self.look()
        busy = {
            "waiting": sum(1 for lane in held.lanes.values() if lane.routed_through > lane.fired_through),
            "claimed": sum(1 for b in held.batches.values() if b.state == "claimed"),
            "runs": len(held.runs),
            "replays": held.replays,
            "unrouted": held.unrouted,
        }
        return {k: v for k, v in busy.items() if v}


def machine_on(open_world: WorldOpener, tally: Counter[str] | None = None) -> type[LaneMachine]:
    """The machine as a class hypothesis runs (`run_state_machine_as_test`), each example on a world `open_world`
    opens, what the examples reach summed into `tally`."""

    class OnWorld(LaneMachine):
        def __init__(self) -> None:
            super().__init__(open_world, tally)

    return OnWorld
