"""A world for the crossing faults: a lane store (the in-memory twin, or PostgreSQL: `tests/lane_worlds/`) and
Temporal's twin, driven by a seeded random schedule.

Each schedule is a small world (one session, one listener in a random mode, retries on or off) driven by a seeded
random sequence of what happens in a deployment: writes, routing rounds, lanes stepping when their clocks say,
runs started by hand, runs ending and reporting it, runs terminated from outside, the sweep and the poll, the
clock running on, Temporal forgetting closed runs past its retention (or, rarely, losing a run's data), starts
that fail before or after they were made, nudges lost. At any named crossing (`orchestrator.crossings`) the
process may die: nothing after the point runs, the driver's memory is gone, and what Temporal retries (a lane's
step, a run's report) runs again. After every step: no serial or keyed lane has two runs at work on Temporal, no
run is recorded `stopped` unless Temporal stopped it (or forgot it, and its record says so), no run's end is
recorded twice, no slot is freed twice, no lane but a keyed workflow listener's holds a key slot. After the
schedule, with faults off and the clock run on: every routed event is in a batch whose run started on Temporal,
every run's end is recorded as Temporal has it, every slot was freed exactly once, nothing waits.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.config import Settings
from orchestrator.core.lane_clock import LaneClock, LaneNews, nudged, reported, step_due
from orchestrator.core.lane_snapshot import LaneAddress
from orchestrator.core.limits import Limits
from orchestrator.core.run_checks import FORGOTTEN
from orchestrator.crossings import POINTS, Died, crossing, inject
from orchestrator.engine.run_sweep import RunSweep
from orchestrator.lanes.driver import LaneDriver
from orchestrator.lanes.executions import start_run
from orchestrator.lanes.temporal_twin import StartFailed, StartFault, TemporalTwin
from orchestrator.workflows.messages import BatchInfo, RunInput, RunTag
from tests.engine.lane_machine import close_loop
from tests.lane_worlds import Held, LaneWorld, MemoryWorld, lane_address, route_round

ALIASES = ("a", "b", "c", "d")
# What may happen at each step, and how often (weights).
ACTIONS = {
    "write": 6.0,
    "route": 4.0,
    "lanes": 6.0,
    "end": 3.0,
    "report": 3.0,
    "terminate": 0.5,
    "sweep": 1.5,
    "poll": 1.0,
    "clock": 3.0,
    "forget": 0.5,
    "lose": 0.2,
    "hand": 0.3,
}
# Steps in a schedule, before the settling.
STEPS = 160


@dataclass
class Writes:
    """A write action's object written, by its key (the store's writes are idempotent by it)."""

    written: Counter[str] = field(default_factory=Counter)

    async def write(self, decl: Any, session_id: str, context: Any, depth: int, key: str) -> tuple[str, None]:
        self.written[key] += 1
        return "success", None


@dataclass
class Faults:
    """Where the process dies: at each crossing passed, with probability `rate` (none once `on` is off)."""

    rng: random.Random
    rate: float
    on: bool = True
    deaths: Counter[str] = field(default_factory=Counter)

    def __call__(self, point: str) -> None:
        assert point in POINTS, point
        if self.on and self.rng.random() < self.rate:
            self.deaths[point] += 1
            raise Died(point)

    def start_fault(self) -> StartFault:
        if not self.on or self.rng.random() >= self.rate:
            return None
        return self.rng.choice(["before", "after"])


# Opens the lane store's world a schedule runs on (in the schedule's own event loop).
WorldOpener = Callable[[Limits], Awaitable[LaneWorld]]
LIMITS = Limits(activation_delay_seconds=0, listener_fires_per_minute=1000)


async def in_memory(limits: Limits) -> LaneWorld:
    """The in-memory twin, its clock standing still between the schedule's moves."""
    return MemoryWorld(frozen_at=1_000.0)


class World:
    """One deployment: a lane store (`stores`), Temporal's twin, and the process that may die."""

    def __init__(self, seed: int, open_world: WorldOpener = in_memory) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.loop = asyncio.new_event_loop()
        try:
            self.stores = self.loop.run_until_complete(open_world(LIMITS))
        except BaseException:
            close_loop(self.loop)
            raise
        self.session = self.loop.run_until_complete(self.stores.open_session())
        self.mode = self.rng.choice(["serial", "keyed", "parallel"])
        concurrency: dict[str, Any] = {"mode": self.mode}
        if self.mode == "keyed":
            concurrency |= {"key": "alias", "max_parallel": self.rng.choice([1, 2])}
        elif self.mode == "parallel":
            concurrency |= {"max_parallel": self.rng.choice([1, 2])}
        body: dict[str, Any] = {
            "name": "l",
            "filter": {"types": ["object.written"]},
            "concurrency": concurrency,
            "batch": {"window_seconds": self.rng.choice([0.0, 1.0]), "max_events": self.rng.choice([1, 3])},
            "action": {"type": "workflow", "workflow": "w"},
        }
        self.writes_objects = self.rng.random() < 0.2
        if self.writes_objects:
            body["action"] = {"type": "object", "alias": "out/view", "value": {"type": "view"}}
        elif self.rng.random() < 0.5:
            body["retry"] = {"attempts": 2, "delay_seconds": 2}
        self.loop.run_until_complete(self.stores.save_listener(body))
        self.faults = Faults(random.Random(seed * 7 + 1), rate=self.rng.choice([0.05, 0.15, 0.3]))
        retention = self.rng.choice([None, 300.0])
        self.temporal = TemporalTwin(
            self.stores.now,
            retention,
            start_faults=self.faults.start_fault,
            one_per_lane=frozenset({"l"}) if self.mode in ("serial", "keyed") else frozenset(),
        )
        self.settings = Settings(
            limits=LIMITS,
            temporal_time_skipping=True,
            run_check_seconds=20.0,
        )
        self.clocks: dict[str, LaneClock] = {}
        self.addresses: dict[str, LaneAddress] = {}
        # Runs whose app has ended them and whose report has not yet gone through (Temporal retries it).
        self.closing: dict[str, str] = {}
        # What the rounds queued into each lane (listener, lane), ever.
        self.routed: dict[tuple[str, str], set[int]] = {}
        self.forgotten: set[str] = set()
        self.nudges_lost = 0
        self.by_hand = 0
        # What the sweep did, by the kind of its check (RecordEnd, DriveLane, Reopen, Forget, ...).
        self.sweeps: Counter[str] = Counter()
        self.writes = Writes()
        self.restart()

    def close(self) -> None:
        """Give the store's world back and close the loop."""
        try:
            self.loop.run_until_complete(self.stores.close())
        finally:
            close_loop(self.loop)

    @property
    def t(self) -> float:
        return self.stores.now()

    def clock_runs_on(self, seconds: float) -> None:
        self.loop.run_until_complete(self.stores.advance(seconds))

    def held(self) -> Held:
        result: Held = self.loop.run_until_complete(self.stores.held())
        return result

    # -- the process -----------------------------------------------------------------------------------------

    def restart(self) -> None:
        """A new process: the driver's memory (its reads ahead) is gone, the stores are not."""
        self.driver = LaneDriver(
            self.stores.lanes, self.settings, self.temporal, self.writes, self, read_ahead=self.rng.choice([0, 8])
        )
        self.sweep = RunSweep(self.stores.lanes, self.driver, self.temporal, self.settings)

    def run(self, coro: Any) -> Any:
        """Run one piece of the process's work; a death there restarts the process, and a failure of Temporal's
        is the caller's to retry. Answers the result, or None when it died or failed."""
        try:
            return self.loop.run_until_complete(coro)
        except Died:
            self.restart()
        except StartFailed:
            pass
        return None

    async def nudge_quietly(self, address: LaneAddress, news: LaneNews) -> None:
        """A nudge: signal-with-start of the lane's workflow (lost now and then, as a call may be)."""
        if self.faults.on and self.rng.random() < 0.03:
            self.nudges_lost += 1
            return
        self.addresses[address.workflow_id] = address
        self.clocks[address.workflow_id] = nudged(self.clocks.get(address.workflow_id, LaneClock()), news, self.t)

    # -- what happens ------------------------------------------------------------------------------------------

    def write(self) -> None:
        for _ in range(self.rng.randint(1, 3)):
            self.loop.run_until_complete(self.stores.write(self.session, self.rng.choice(ALIASES)))

    async def _route(self) -> None:
        routed, queued = await route_round(self.stores, self.session, LIMITS.listener_parallel_runs)
        if not routed.read:
            return
        for (listener, lane), ids in queued.items():
            self.routed.setdefault((listener, lane), set()).update(ids)
            address = lane_address(self.session, listener, lane)
            self.addresses[address.workflow_id] = address
        crossing("route.saved")
        for nudge in routed.nudges:
            await self.nudge_quietly(nudge.address, LaneNews(due_in=0.0))

    async def _fire(self, workflow_id: str) -> None:
        """The lane workflow's step (the `orchestrator.fire` activity): its report sets its clock."""
        drive = await self.driver.drive(self.addresses[workflow_id])
        if drive.handed:
            await self.driver.hand_on(drive.handed)
        self.clocks[workflow_id] = reported(self.clocks.get(workflow_id, LaneClock()), drive.news(), self.t)

    def lanes_step(self) -> None:
        """Every lane whose clock is due steps (a death leaves it due: Temporal retries the step)."""
        for workflow_id, clock in sorted(self.clocks.items()):
            if step_due(clock, self.t, 0.0):
                self.run(self._fire(workflow_id))

    async def _start_by_hand(self) -> None:
        """`start_execution`: a run of no lane, recorded with its input and started."""
        self.by_hand += 1
        execution_id = f"exe:{self.session}:hand{self.by_hand}.0"
        tag = RunTag(execution_id=execution_id, session_id=self.session, workflow="w")
        batch = BatchInfo(first_id=0, last_id=0, count=0, retry=0, lane="", event_ids=[], messages=[], events=[])
        run_input = RunInput(session_id=self.session, listener="", batch=batch, input={"n": self.by_hand})
        await start_run(self.temporal, self.stores.records, tag, run_input)

    def app_ends_a_run(self) -> None:
        running = [r for r in self.temporal.open() if r.tag.execution_id not in self.closing]
        if running:
            run = self.rng.choice(running)
            self.closing[run.tag.execution_id] = self.rng.choice(["completed", "completed", "failed"])
            self.temporal.returned(run.tag.execution_id)

    async def _report(self, execution_id: str) -> None:
        """The run's last task: its report (`orchestrator.run_ended`), then Temporal closes it."""
        run = self.temporal.runs[execution_id]
        status = self.closing[execution_id]
        await self.driver.end(run.tag, status, None if status == "completed" else "it failed")
        self.temporal.close(execution_id, status)
        del self.closing[execution_id]

    def runs_report(self) -> None:
        for execution_id in sorted(self.closing):
            if execution_id in self.temporal.runs:
                self.run(self._report(execution_id))

    def terminated_from_outside(self) -> None:
        running = [r for r in self.temporal.open() if r.tag.execution_id not in self.closing]
        if running:
            self.temporal.close(self.rng.choice(running).tag.execution_id, "stopped")

    def temporal_forgets(self) -> None:
        retention = self.temporal.retention
        if retention is None:
            return
        for execution_id, run in list(self.temporal.runs.items()):
            if run.closed is not None and self.t - run.started_at > retention:
                self.temporal.forget(execution_id)
                self.forgotten.add(execution_id)

    def temporal_loses_a_run(self) -> None:
        """Temporal's data lost under a run (a dev server started on an empty file): it no longer knows it."""
        known = [i for i in sorted(self.temporal.runs) if i not in self.closing]
        if known:
            lost = self.rng.choice(known)
            self.temporal.forget(lost)
            self.forgotten.add(lost)

    async def _sweep(self) -> None:
        for _, check in await self.sweep.round():
            self.sweeps[type(check).__name__] += 1

    async def _poll(self) -> None:
        for stale in await self.stores.lanes.stale_lanes():
            await self.nudge_quietly(stale.address, LaneNews(due_in=0.0))

    def step(self) -> None:
        action = self.rng.choices(
            [
                "write",
                "route",
                "lanes",
                "end",
                "report",
                "terminate",
                "sweep",
                "poll",
                "clock",
                "forget",
                "lose",
                "hand",
            ],
            weights=[6, 4, 6, 3, 3, 0.5, 1.5, 1, 3, 0.5, 0.2, 0.3],
        )[0]
        if action == "write":
            self.write()
        elif action == "route":
            self.run(self._route())
        elif action == "lanes":
            self.lanes_step()
        elif action == "end":
            self.app_ends_a_run()
        elif action == "report":
            self.runs_report()
        elif action == "terminate":
            self.terminated_from_outside()
        elif action == "sweep":
            self.run(self._sweep())
        elif action == "poll":
            self.run(self._poll())
        elif action == "clock":
            self.clock_runs_on(self.rng.choice([0.5, 2.0, 10.0, 25.0, 61.0]))
        elif action == "hand":
            self.run(self._start_by_hand())
        elif action == "forget":
            self.temporal_forgets()
        else:
            self.temporal_loses_a_run()
        self.check()

    # -- what always holds -----------------------------------------------------------------------------------

    def check(self) -> None:
        assert not self.temporal.violations, self.temporal.violations
        held = self.held()
        for execution in held.executions.values():
            if execution.status == "stopped":
                said = self.temporal.closed_as.get(execution.id)
                assert said == "stopped" or (execution.error or "").startswith(FORGOTTEN), (
                    f"{execution.id} recorded stopped, Temporal closed it as {said}: {execution.error}"
                )
        ended = held.ended()
        assert all(n == 1 for n in ended.values()), f"a run's end recorded twice: {ended.most_common(3)}"
        assert all(n == 1 for n in held.released.values()), f"a slot freed twice: {held.released}"
        if self.mode != "keyed" or self.writes_objects:
            assert not held.key_slots, f"key slots are a keyed workflow listener's alone: {held.key_slots}"

    # -- the end: faults off, the clock run on ---------------------------------------------------------------

    def settle(self) -> None:
        self.faults.on = False
        for _ in range(100):
            self.run(self._route())
            self.run(self._poll())
            self.run(self._sweep())
            self.lanes_step()
            # Every run ends, and the runs their ends start, until none is open.
            while open_runs := self.temporal.open():
                for run in open_runs:
                    self.closing.setdefault(run.tag.execution_id, "completed")
                    self.temporal.returned(run.tag.execution_id)
                self.runs_report()
            self.check()
            if not self._busy():
                break
            self.clock_runs_on(61.0)
        assert not self._busy(), f"seed {self.seed}: left {self._busy()}"
        self.check_settled()

    def _busy(self) -> dict[str, int]:
        held = self.held()
        busy = {
            "waiting": sum(1 for lane in held.lanes.values() if lane.routed_through > lane.fired_through),
            "claimed": sum(1 for b in held.batches.values() if b.state == "claimed"),
            "slots": len(held.runs),
            "key slots": len(held.key_slots),
            "unrouted": held.unrouted,
            "running": sum(1 for x in held.executions.values() if x.status == "running"),
            "open on Temporal": len(self.temporal.open()),
        }
        return {k: v for k, v in busy.items() if v}

    def check_settled(self) -> None:
        held = self.held()
        for lane in held.lanes.values():
            own = [b for b in held.batches.values() if b.lane_id == lane.id and b.own]
            taken = Counter(i for b in own for i in b.event_ids)
            routed = self.routed.get((lane.listener, lane.lane), set())
            assert set(taken) == routed, f"lane {lane.lane}: routed events not in a batch"
            assert all(n == 1 for n in taken.values()), f"lane {lane.lane}: an event in two batches"
        for batch in held.batches.values():
            if self.writes_objects and batch.verdict is None:
                lane = held.lanes[batch.lane_id]
                key = f"{lane.workflow_id}:{batch.first_id}:{batch.last_id}" + (
                    f":r{batch.replay}" if batch.replay else ""
                )
                assert self.writes.written[key] >= 1, f"seed {self.seed}: batch {batch.first_id}'s write never made"
                outcome_key = f"{lane.lane}:{batch.first_id}:{batch.last_id}:{batch.retry}"
                outcome = held.outcomes.get((lane.listener, outcome_key))
                assert outcome == "success", f"seed {self.seed}: {outcome}"
            if batch.verdict is not None or batch.run_key is None:
                continue
            execution_id = next(
                (
                    x.id
                    for x in held.executions.values()
                    if x.run_key == batch.run_key and x.batch and x.batch["retry"] == batch.retry
                ),
                None,
            )
            assert execution_id is not None, f"batch {batch.first_id} retry {batch.retry} has no run"
            started = execution_id in self.temporal.runs or execution_id in self.forgotten
            assert started, f"seed {self.seed}: {execution_id} was never started on Temporal"
            execution = held.executions[execution_id]
            run = self.temporal.runs.get(execution_id)
            if run is not None:
                assert execution.status == run.closed, (execution_id, execution.status, run.closed)
            assert held.released[batch.run_key] == 1, f"{batch.run_key}'s slot freed {held.released}"
        for execution in held.executions.values():
            if execution.listener is None:
                run = self.temporal.runs.get(execution.id)
                assert run is not None or execution.id in self.forgotten, f"{execution.id} never started"
                assert run is None or execution.status == run.closed, (execution.id, execution.status, run.closed)


def run_schedule(seed: int, steps: int = STEPS, open_world: WorldOpener = in_memory) -> World:
    world = World(seed, open_world)
    try:
        with inject(world.faults):
            for _ in range(steps):
                world.step()
            world.settle()
    finally:
        world.close()
    return world
