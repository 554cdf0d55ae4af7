"""The lane engine under test: a worker with the platform's parts and test workflows, and the router.

`RunLog` is what the test workflows report to (through an activity in the same process): each run's
input, and when it started and ended, so tests can assert what ran, with what, and never two at once.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from orchestrator.app_loader import UserApp
from orchestrator.core.lane_keys import lane_workflow_id
from orchestrator.engine.wiring import platform_components
from orchestrator.engine.worker import build_worker
from orchestrator.platform import Platform
from orchestrator.testing import terminate_leftovers
from tests.conftest import skips_time
from tests.timeouts import cancel_within, stop_within

with workflow.unsafe.imports_passed_through():
    from orchestrator.workflows.messages import RunInput


# Replaces platform activities by stand-ins with the same registered names (to inject failures).
Wrap = Callable[[list[Callable[..., Any]]], list[Callable[..., Any]]]


@dataclass
class RunRecord:
    input: dict[str, Any]
    started: float
    ended: float | None = None


@dataclass
class RunLog:
    runs: list[RunRecord] = field(default_factory=list)
    open: dict[str, RunRecord] = field(default_factory=dict)
    most_at_once: dict[str, int] = field(default_factory=dict)

    @activity.defn(name="test.run_started")
    async def run_started(self, run: RunInput) -> None:
        data = run.model_dump(mode="json")
        record = RunRecord(input=data, started=time.monotonic())
        assert run.execution_id is not None
        if run.execution_id in self.open or any(r.input["execution_id"] == run.execution_id for r in self.runs):
            return  # an activity retried: the same run
        self.runs.append(record)
        self.open[run.execution_id] = record
        lane = f"{run.listener}:{run.batch.lane}"
        at_once = sum(1 for r in self.open.values() if f"{r.input['listener']}:{r.input['batch']['lane']}" == lane)
        self.most_at_once[lane] = max(self.most_at_once.get(lane, 0), at_once)
        listener_total = sum(1 for r in self.open.values() if r.input["listener"] == run.listener)
        key = f"{run.listener}:*"
        self.most_at_once[key] = max(self.most_at_once.get(key, 0), listener_total)

    @activity.defn(name="test.run_ended")
    async def run_ended(self, execution_id: str) -> None:
        record = self.open.pop(execution_id, None)
        if record is not None:
            record.ended = time.monotonic()

    def event_ids(self, listener: str | None = None) -> list[int]:
        return [
            i
            for r in self.runs
            if listener is None or r.input["listener"] == listener
            for i in r.input["batch"]["event_ids"]
        ]


@workflow.defn(name="recorder")
class Recorder:
    """Reports its start and end; sleeps `input.sleep` seconds between (only when its batch holds the alias
    `input.sleep_for`, if that is given); fails when `input.fail` is set."""

    @workflow.run
    async def run(self, run: RunInput) -> str:
        timeout = timedelta(seconds=10)
        await workflow.execute_activity("test.run_started", run, start_to_close_timeout=timeout)
        options = run.input if isinstance(run.input, dict) else {}
        sleep_for = options.get("sleep_for")
        if options.get("sleep") and (sleep_for is None or any(m.get("alias") == sleep_for for m in run.batch.messages)):
            try:
                await workflow.sleep(float(options["sleep"]))
            except asyncio.CancelledError:
                # Cancelled from outside: its end is an end all the same (its slot is free from here on).
                await workflow.execute_activity("test.run_ended", run.execution_id, start_to_close_timeout=timeout)
                raise
        await workflow.execute_activity("test.run_ended", run.execution_id, start_to_close_timeout=timeout)
        if options.get("fail"):
            raise ApplicationError("asked to fail", non_retryable=True)
        return "done"


@dataclass
class Engine:
    platform: Platform
    client: Client
    log: RunLog
    task_queue: str

    async def command(self, command: str, **args: Any) -> dict[str, Any]:
        reply = await self.platform.command({"command": command, **args})
        assert reply["status"] == "success", reply
        return reply


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@asynccontextmanager
async def running_engine(
    platform: Platform,
    client: Client,
    *,
    workers: int = 1,
    workflows: Sequence[type] = (),
    wrap: Wrap | None = None,
    routers: bool = True,
) -> AsyncIterator[Engine]:
    """A worker (or several) with the platform's parts, the recorder, and a router each.

    `workflows` adds test workflows beside the recorder; `wrap` may replace platform activities by
    stand-ins with the same registered names (to inject failures); without `routers` the test routes
    itself (`orchestrator.engine.router.Router.route_session`).
    """
    task_queue = f"tq-{uuid.uuid4().hex[:12]}"
    platform.settings = platform.settings.model_copy(
        update={"task_queue": task_queue, "temporal_time_skipping": skips_time(client)}
    )
    platform.temporal = client
    log = RunLog()
    app = UserApp(name="tests", workflows=[Recorder, *workflows], activities=[log.run_started, log.run_ended])
    started: list[Worker] = []
    tasks: list[asyncio.Task[None]] = []
    try:
        for _ in range(workers):
            components = platform_components(platform, client, app)
            if components.registry is not None:
                await components.registry.say()
            activities = list(components.activities)
            worker = build_worker(
                client, platform.settings, app, components.workflows, wrap(activities) if wrap else activities
            )
            tasks.append(asyncio.create_task(worker.run()))
            started.append(worker)
            if routers:
                tasks.extend(asyncio.create_task(background()) for background in components.background_tasks)
        yield Engine(platform, client, log, task_queue)
    finally:
        # The recorder knows runs whose execution record may not be written yet.
        leftovers = [str(r.input["execution_id"]) for r in log.runs]
        await stop_within(stop_leftovers(platform, client, leftovers), "the test's leftover workflows")
        for worker in started:
            await stop_within(worker.shutdown(), "a test worker")
        await cancel_within(tasks, "the test's workers and routers")


async def stop_leftovers(platform: Platform, client: Client, known: Sequence[str] = ()) -> None:
    """Terminate the lanes and runs a test leaves behind (`orchestrator.testing.terminate_leftovers`).

    On the time-skipping server a workflow task waiting on a task queue nobody polls any more (a lane's idle
    timer, a sleeping run's timer) locks time skipping for every later test of the session.
    """
    pool = getattr(platform.store, "pool", None)
    if pool is None:
        return
    try:
        await terminate_leftovers(pool, client, known)
    except Exception:  # a test that closed its store or never migrated it: nothing to stop
        return


def replacing(name: str, stand_in: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Wrap:
    """A `running_engine(wrap=...)` that replaces the platform activity `name` by `stand_in(the real one)`."""

    def wrap(activities: list[Callable[..., Any]]) -> list[Callable[..., Any]]:
        def named(fn: Callable[..., Any]) -> str:
            return str(fn.__temporal_activity_definition.name)  # type: ignore[attr-defined]

        return [stand_in(fn) if named(fn) == name else fn for fn in activities]

    return wrap


def recorder_listener(name: str = "orchestrate", **overrides: Any) -> dict[str, Any]:
    """A listener on `missions/**` objects whose action is the recorder workflow."""
    body: dict[str, Any] = {
        "name": name,
        "filter": {"types": ["object.**"], "aliases": ["missions/**"]},
        "batch": {"window_seconds": 0.5, "max_events": 100},
        "action": {"type": "workflow", "workflow": "recorder", "input": {"events": "{{ batch.messages }}"}},
    }
    body.update(overrides)
    return body


async def write_many(engine: Engine, session_id: str, aliases: list[str]) -> list[int]:
    """Write one object per alias and return once the router has delivered them all.

    On the time-skipping server a test's next `env.sleep` jumps workflow time at once; without the wait a
    write the router takes up in its next round (rounds are 200 ms apart) could land after the window it
    was meant to share.
    """
    ids = []
    for alias in aliases:
        reply = await engine.command("write_object", session_id=session_id, alias=alias, value={"type": "m"})
        ids.append(reply["event_id"])
    await routed(engine, session_id, ids[-1])
    return ids


async def routed(engine: Engine, session_id: str, event_id: int) -> None:
    """Wait (in real time) until the router has signalled every lane up to `event_id` of the session."""

    async def passed() -> bool:
        async with engine.platform.store.transaction() as conn:
            position = await conn.fetchval(
                "SELECT routed_event_id FROM orchestrator.routing_cursors WHERE session_id = $1", session_id
            )
        return position is not None and int(position) >= event_id

    await eventually(passed, what=f"the router to pass event {event_id}")


async def new_session(engine: Engine) -> str:
    return str((await engine.command("open_session"))["session"]["id"])


async def lane_outcomes(engine: Engine, session_id: str, listener: str) -> list[dict[str, Any]]:
    reply = await engine.command("list_session_listeners", session_id=session_id)
    for item in reply["listeners"]:
        if item["name"] == listener:
            return list(item["recent_outcomes"])
    return []


async def lane_state(engine: Engine, session_id: str, listener: str, lane: str = "_") -> dict[str, Any]:
    """A lane as `list_session_listeners` shows it: `pending` (events waiting), `in_flight` (the runs holding
    its slots, a failed run waiting for its repeat included), `high_water` (the newest event routed to it) and
    `batches`; empty before the router first queued for it."""
    reply = await engine.command("list_session_listeners", session_id=session_id)
    for item in reply["listeners"]:
        for shown in item["lanes"] if item["name"] == listener else []:
            if shown["lane"] == lane:
                return {**shown, "in_flight": shown["runs_in_flight"], "high_water": shown["routed_through"]}
    return {"pending": 0, "in_flight": [], "high_water": 0, "batches": 0, "waiting_for_slot": False}


async def run_result(engine: Engine, session_id: str, listener: str, first_id: int, lane: str = "_") -> str | None:
    """How the run of the batch that starts at `first_id` ended, over all its repeats (the last attempt's
    status), or None while it still holds its slot (running, or waiting for a repeat)."""
    run_key = "run" + lane_workflow_id(session_id, listener, lane).removeprefix("lane") + f":{first_id}"
    if any(r["run_key"] == run_key for r in (await lane_state(engine, session_id, listener, lane))["in_flight"]):
        return None
    executions = (await engine.command("list_executions", session_id=session_id, listener=listener))["executions"]
    mine = [e for e in executions if e["id"].startswith(run_key.replace("run:", "exe:", 1) + ".")]
    if not mine or any(e["status"] == "running" for e in mine):
        return None
    return str(max(mine, key=lambda e: e["batch"]["retry"])["status"])


async def overlapping_holds(engine: Engine, session_id: str, listener: str) -> list[tuple[int, int]]:
    """Pairs of batches (first ids) of one lane of `listener` whose holds on their lane overlapped.

    A batch whose run took a slot holds its lane from its claim (`batches.created_at`) until the slot is given
    back (`released_at`, after its last attempt's end is recorded; still held: open-ended). This is the whole
    span a serial or keyed lane must not share, wider than the app workflow's own start and end.
    """
    async with engine.platform.store.transaction() as conn:
        rows = await conn.fetch(
            "SELECT a.first_id AS a, b.first_id AS b FROM orchestrator.batches a JOIN orchestrator.batches b"
            " ON a.lane_id = b.lane_id AND a.id < b.id AND a.retry = 0 AND b.retry = 0"
            " JOIN orchestrator.lanes l ON l.id = a.lane_id"
            " WHERE l.session_id = $1 AND l.listener = $2 AND a.verdict IS NULL AND b.verdict IS NULL"
            " AND b.created_at < coalesce(a.released_at, 'infinity')"
            " AND a.created_at < coalesce(b.released_at, 'infinity')",
            session_id,
            listener,
        )
    return [(int(r["a"]), int(r["b"])) for r in rows]
