"""Bursts and trickles through the HTTP door into declared listeners, against the naive design and raw commits.

Measures, side by side in one run on the Temporal dev server (SQLite in WAL mode, one task-queue
partition) and an embedded PostgreSQL, with the API and the writers in processes of their own (as a user's
clients and the API are) and the worker and router in this one:
- raw: single-row PostgreSQL commits by 32 writers, the store's ceiling;
- naive: one workflow (running one trivial local activity) started per event, 4 in flight;
- serial and keyed bursts: 20,000 events written by 32 keep-alive HTTP clients to a serial listener
  (window 1 s, max_events 1000), then to a keyed listener (100 keys by alias, max_parallel 16): events/s from
  the first write to the last batch's run starting, the delay the platform adds beyond the window (from when a
  batch was due, its first commit plus the window or, for events a full batch left behind, the previous batch
  of its lane, to its run's start: p50 and p99 over batches), nudges (signals), workflow executions and
  history events per batch and per 1,000 events, and the Temporal server's CPU per batch;
- sparse keyed: 500 keys, 8 events/s for two minutes through the HTTP door, lanes ending when idle (20 s):
  added delay p50/p99 and how many events still wait 5 s after the last write;
- latency at window 0, one write a second: from a write's reply to an object action's write, and from the
  commit to the first activity of the run a workflow action starts (p50 of 30).

Run: .venv/bin/python -m bench.burst [--events 20000] [--naive-events 1000] [--cases raw,naive,serial,...]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import multiprocessing
import os
import random
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from bench.common import LOAD_PIDS, cpu_seconds, percentile, postmaster_pid, row, scratch_database
from bench.keep_alive import KeepAlive
from bench.workflows import BenchNaive, BenchRun
from orchestrator.app_loader import UserApp
from orchestrator.config import Settings
from orchestrator.core.limits import Limits
from orchestrator.dev.embedded import start_temporal
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.engine.wiring import platform_components
from orchestrator.engine.worker import build_worker, connect_temporal, sandbox_runner, settle_heap
from orchestrator.lanes.nudges import Nudger
from orchestrator.platform import Platform

WRITERS = 32
SPAWN = multiprocessing.get_context("spawn")


# The writers' processes, by how many: started once and kept for the benchmark's life (`shut_writers`).
_WRITER_POOLS: dict[int, concurrent.futures.ProcessPoolExecutor] = {}
# In a writer process: set once every process of its pool has started.
_ALL_STARTED: Any = None


def _started(ready: Any, all_started: Any) -> None:
    """A writer process's first step, once it has imported the benchmark: say so, and who it is."""
    global _ALL_STARTED
    _ALL_STARTED = all_started
    ready.put(os.getpid())


def _hold() -> None:
    """A first task that keeps its process busy until every process has started: a task given while none is
    idle spawns a process, and one that had finished would take the next instead."""
    _ALL_STARTED.wait(120)


@contextlib.asynccontextmanager
async def process_pool(processes: int) -> AsyncIterator[concurrent.futures.ProcessPoolExecutor]:
    """Spawned processes for the writers, every one started before the first is given work, and kept for the
    next block. A writer process imports the benchmark as it starts and unloads it as it exits, about a second
    of CPU each way: started with the first write, and shut down as the last ended, four of them ran beside
    the system measured (in `bench.bulk_events`, at 20 to 50% each for the lane's first 1.5 s of runs)."""
    pool = _WRITER_POOLS.get(processes)
    if pool is None:
        ready, all_started = SPAWN.Queue(), SPAWN.Event()
        pool = concurrent.futures.ProcessPoolExecutor(
            processes, mp_context=SPAWN, initializer=_started, initargs=(ready, all_started)
        )
        holds = [pool.submit(_hold) for _ in range(processes)]
        for _ in range(processes):
            LOAD_PIDS.add(await asyncio.to_thread(ready.get, True, 120))
        all_started.set()
        await asyncio.gather(*(asyncio.wrap_future(hold) for hold in holds))
        _WRITER_POOLS[processes] = pool
    try:
        yield pool
    except concurrent.futures.BrokenExecutor:
        # A writer died: the next block starts a pool of its own.
        _WRITER_POOLS.pop(processes, None)
        await asyncio.to_thread(pool.shutdown)
        raise


async def shut_writers() -> None:
    """Shut the writers' processes down, off the event loop: joining them on it stalled the worker and router
    that share this loop."""
    pools = list(_WRITER_POOLS.values())
    _WRITER_POOLS.clear()
    for pool in pools:
        await asyncio.to_thread(pool.shutdown)


@dataclass
class Starts:
    """When each run started (wall clock), with its batch: what the bench workflow reports."""

    runs: list[tuple[float, list[int]]] = field(default_factory=list)
    expected: int = 0
    all_started: asyncio.Event = field(default_factory=asyncio.Event)

    @activity.defn(name="bench.run_started")
    async def run_started(self, event_ids: list[int]) -> None:
        self.runs.append((time.time(), event_ids))
        if sum(len(ids) for _, ids in self.runs) >= self.expected:
            self.all_started.set()


@activity.defn(name="bench.noop")
async def noop(n: int) -> int:
    return n


# The API and the writers, each in a process of its own


def _serve(database_url: str, settings_json: str, ready: Any, stop: Any) -> None:
    async def run() -> None:
        settings = Settings.model_validate_json(settings_json)
        platform = await Platform.connect(settings, database_url)
        try:
            async with serve_api(create_app(platform, settings), "127.0.0.1", 0) as url:
                settle_heap()  # as `orchestrator api` does once serving
                ready.put(url)
                await asyncio.to_thread(stop.wait)
        finally:
            await platform.close()

    asyncio.run(run())


@contextlib.asynccontextmanager
async def api_process(database_url: str, settings: Settings) -> AsyncIterator[str]:
    """`orchestrator api` as a process of its own; yields its URL."""
    ready, stop = SPAWN.Queue(), SPAWN.Event()
    process = SPAWN.Process(target=_serve, args=(database_url, settings.model_dump_json(), ready, stop))
    process.start()
    try:
        yield await asyncio.to_thread(ready.get, True, 60)
    finally:
        stop.set()
        await asyncio.to_thread(process.join, 30)


# What a writer sends a command with: one reply per body.
Send = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


async def _paced_writes(
    session: str,
    aliases: list[str],
    writers: int,
    rate: float | None,
    sender: Callable[[], contextlib.AbstractAsyncContextManager[Send]],
) -> tuple[float, float]:
    """Write one object per alias, `writers` at a time, each with a sender of its own (at `rate` writes/s in all
    when given, each write at its time); answers when the first write began and the last ended."""
    queue = list(enumerate(aliases))
    queue.reverse()
    began = time.time()

    async def writer() -> None:
        async with sender() as send:
            while queue:
                n, alias = queue.pop()
                if rate is not None:
                    await asyncio.sleep(max(began + n / rate - time.time(), 0))
                body = {"command": "write_object", "session_id": session, "alias": alias, "value": {"type": "b"}}
                reply = await send(body)
                assert reply["status"] == "success", reply

    await asyncio.gather(*(writer() for _ in range(writers)))
    return began, time.time()


def _write(url: str, session: str, aliases: list[str], writers: int, rate: float | None) -> tuple[float, float]:
    """`_paced_writes` through the HTTP door, a keep-alive client a writer (lean ones, `bench.keep_alive`, so the
    load costs little CPU), in a process of its own."""

    @contextlib.asynccontextmanager
    async def client() -> AsyncIterator[Send]:
        http = KeepAlive(url)
        try:
            yield lambda body: http.post("/v1/commands", body)
        finally:
            await http.aclose()

    return asyncio.run(_paced_writes(session, aliases, writers, rate, client))


async def write_through_http(
    url: str,
    session: str,
    aliases: list[str],
    writers: int = WRITERS,
    rate: float | None = None,
    processes: int = 1,
) -> tuple[float, float]:
    """Write one object per alias through the HTTP door, `writers` keep-alive clients spread over `processes`
    processes (each writing every `processes`-th alias); answers when the first write began and the last ended."""
    async with process_pool(processes) as pool:
        loop = asyncio.get_running_loop()
        share = None if rate is None else rate / processes
        spans = await asyncio.gather(
            *(
                loop.run_in_executor(
                    pool, _write, url, session, aliases[n::processes], max(writers // processes, 1), share
                )
                for n in range(processes)
            )
        )
        return min(b for b, _ in spans), max(e for _, e in spans)


async def write_in_process(
    platform: Platform, session: str, aliases: list[str], writers: int = WRITERS, rate: float | None = None
) -> tuple[float, float]:
    """`_paced_writes` with the platform's write in this process (`platform.command`, as an application that holds
    its platform writes, and as the naive design's writers do)."""
    return await _paced_writes(session, aliases, writers, rate, lambda: contextlib.nullcontext(platform.command))


# The engine in this process


@contextlib.asynccontextmanager
async def engine(platform: Platform, client: Client, starts: Starts) -> AsyncIterator[Any]:
    app = UserApp(name="bench", workflows=[BenchRun], activities=[starts.run_started])
    async with app_engine(platform, client, app) as components:
        yield components


@contextlib.asynccontextmanager
async def app_engine(platform: Platform, client: Client, app: UserApp, say: bool = False) -> AsyncIterator[Any]:
    """The platform's engine with `app` in this process, as a worker process runs it (`say`: its workflows
    registered first, as a worker says them, for the checks that refuse a workflow no worker has)."""
    components = platform_components(platform, client, app)
    if say and components.registry is not None:
        await components.registry.say()
    worker = build_worker(client, platform.settings, app, components.workflows, components.activities)
    settle_heap()  # as the platform's worker process does once started
    tasks = [asyncio.create_task(worker.run()), *(asyncio.create_task(t()) for t in components.background_tasks)]
    try:
        yield components
    finally:
        await worker.shutdown()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def history_events(client: Client, task_queue: str) -> tuple[int, int]:
    """How many workflow executions (runs) ran on the task queue, and their history events in all (a run
    still open, a lane, is described: visibility has its length only once it closes)."""
    runs = events = 0
    async for execution in client.list_workflows(f"TaskQueue = '{task_queue}'"):
        runs += 1
        length = execution.history_length or 0
        if execution.close_time is None:
            handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
            length = (await handle.describe()).raw_description.workflow_execution_info.history_length
        events += length
    return runs, events


def added_delays(
    runs: list[tuple[float, list[int]]], commits: dict[int, float], lanes: dict[int, str], window: float
) -> list[float]:
    """Per batch: its run's start less when it was due (its first commit plus the window or, for what a full
    batch left behind, the previous batch of its lane's start)."""
    added: list[float] = []
    previous: dict[str, float] = {}
    for t, ids in sorted(runs):
        lane = lanes[ids[0]]
        due = max(min(commits[i] for i in ids) + window, previous.get(lane, 0.0))
        added.append(t - due)
        previous[lane] = t
    return added


async def lanes_case(
    platform: Platform,
    client: Client,
    server_pid: int | None,
    url: str,
    label: str,
    listener: dict[str, Any],
    events: int,
    keys: int,
    naive: float | None,
) -> None:
    starts = Starts(expected=events)
    task_queue = f"bench-{uuid.uuid4().hex[:8]}"
    platform.settings = platform.settings.model_copy(update={"task_queue": task_queue})
    reply = await platform.command({"command": "save_listener", "listener": listener})
    assert reply["status"] == "success", reply
    session = (await platform.command({"command": "open_session"}))["session"]["id"]
    async with engine(platform, client, starts):
        aliases = [f"bench/{n % keys}" for n in range(events)]
        signals_before = Nudger.sent_total
        cpu_before = cpu_seconds(server_pid), cpu_seconds()
        began, written_at = await write_through_http(url, session, aliases)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(starts.all_started.wait(), timeout=900)
        server_cpu, worker_cpu = (cpu_seconds(server_pid) - cpu_before[0], cpu_seconds() - cpu_before[1])
        signals = Nudger.sent_total - signals_before
    await platform.command({"command": "delete_listener", "name": listener["name"]})
    delivered = sum(len(ids) for _, ids in starts.runs)
    last = max(t for t, _ in starts.runs)
    written = await platform.store.list_events(session, limit=events + 10, types=["object.written"])
    commits = {e.id: e.created_at.timestamp() for e in written}
    lanes = {e.id: (e.alias or "_") if keys > 1 else "_" for e in written}
    added = added_delays(starts.runs, commits, lanes, float(listener["batch"]["window_seconds"]))
    batches = len(starts.runs)
    executions, history = await history_events(client, task_queue)
    rate = events / (last - began)
    print(f"{label}: {events:,} events, {batches} batches, {delivered:,} delivered")
    row("events/s, first write to last run started", rate, "events/s")
    if naive:
        row("  times the naive design", rate / naive, "x")
    row("events/s written (the writers' own pace)", events / (written_at - began), "events/s")
    row("added delay beyond the window, p50 (per batch)", 1000 * percentile(added, 50), "ms")
    row("added delay beyond the window, p99 (per batch)", 1000 * percentile(added, 99), "ms")
    row("signals (nudges) per batch", signals / batches, "signals")
    row("signals per 1,000 events", 1000 * signals / events, "signals")
    row("workflow executions per batch", executions / batches, "runs")
    row("history events per batch, all workflows", history / batches, "events")
    row("history events per 1,000 events", 1000 * history / events, "events")
    row("Temporal server CPU per batch", 1000 * server_cpu / batches, "ms")
    row("Temporal server CPU per 1,000 events", 1000 * server_cpu / events, "s")
    row("worker and router CPU per 1,000 events", 1000 * worker_cpu / events, "s")


async def sparse_case(platform: Platform, client: Client, url: str, keys: int, rate: float, seconds: float) -> None:
    """A responder keyed by chat: many keys, few events each, lanes ending when idle."""
    starts = Starts()
    events = int(rate * seconds)
    starts.expected = events
    task_queue = f"bench-{uuid.uuid4().hex[:8]}"
    platform.settings = platform.settings.model_copy(update={"task_queue": task_queue, "lane_idle_exit_seconds": 20})
    listener = {
        "name": "sparse_keyed",
        "filter": {"types": ["object.written"], "aliases": ["chat/**"]},
        "concurrency": {"mode": "keyed", "key": "alias", "max_parallel": 16},
        "batch": {"window_seconds": 1, "max_events": 1000},
        "action": {"type": "workflow", "workflow": "bench_run"},
    }
    await platform.command({"command": "save_listener", "listener": listener})
    session = (await platform.command({"command": "open_session"}))["session"]["id"]
    rng = random.Random(7)
    aliases = [f"chat/{rng.randrange(keys)}" for _ in range(events)]
    async with engine(platform, client, starts):
        _, written_at = await write_through_http(url, session, aliases, writers=8, rate=rate)
        await asyncio.sleep(max(written_at + 5 - time.time(), 0))
        waiting = events - sum(len(ids) for _, ids in starts.runs)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(starts.all_started.wait(), timeout=120)
    await platform.command({"command": "delete_listener", "name": "sparse_keyed"})
    platform.settings = platform.settings.model_copy(update={"lane_idle_exit_seconds": 300})
    written = await platform.store.list_events(session, limit=events + 10, types=["object.written"])
    commits = {e.id: e.created_at.timestamp() for e in written}
    lanes = {e.id: e.alias or "_" for e in written}
    added = added_delays(starts.runs, commits, lanes, 1.0)
    print(f"sparse keyed: {events:,} events over {keys} keys at {rate:g}/s for {seconds:g} s, lanes idle after 20 s")
    row("added delay beyond the window, p50 (per batch)", 1000 * percentile(added, 50), "ms")
    row("added delay beyond the window, p99 (per batch)", 1000 * percentile(added, 99), "ms")
    row("events still waiting 5 s after the last write", waiting, "events")


async def latency_case(platform: Platform, client: Client, url: str, writes: int = 30) -> None:
    """Window 0, one write a second: write reply to the object action's write, commit to the run's activity."""
    starts = Starts()
    task_queue = f"bench-{uuid.uuid4().hex[:8]}"
    platform.settings = platform.settings.model_copy(update={"task_queue": task_queue})
    echo = {
        "name": "latency_object",
        "filter": {"types": ["object.written"], "aliases": ["ping/*"]},
        "batch": {"window_seconds": 0},
        "action": {"type": "object", "alias": "pong/last", "value": {"type": "pong", "of": "{{ batch.last_id }}"}},
    }
    run = {
        "name": "latency_run",
        "filter": {"types": ["object.written"], "aliases": ["ping/*"]},
        "batch": {"window_seconds": 0},
        "action": {"type": "workflow", "workflow": "bench_run"},
    }
    for body in (echo, run):
        await platform.command({"command": "save_listener", "listener": body})
    session = (await platform.command({"command": "open_session"}))["session"]["id"]
    replies: dict[int, float] = {}
    async with engine(platform, client, starts), httpx.AsyncClient(base_url=url) as http:
        await asyncio.sleep(1)
        for n in range(writes):
            body = {"command": "write_object", "session_id": session, "alias": f"ping/{n}", "value": {"type": "p"}}
            reply = (await http.post("/v1/commands", json=body)).json()
            replies[int(reply["event_id"])] = time.time()
            await asyncio.sleep(1)
        await asyncio.sleep(2)
    for name in ("latency_object", "latency_run"):
        await platform.command({"command": "delete_listener", "name": name})
    events = await platform.store.list_events(session, limit=1000)
    commits = {e.id: e.created_at.timestamp() for e in events}
    to_write: list[float] = []
    answered = await answered_pings(platform, session)
    for ping, pong_at in answered.items():
        if ping in replies:
            to_write.append(pong_at - replies[ping])
    to_run = [t - commits[ids[0]] for t, ids in starts.runs if ids[0] in commits]
    print(f"latency at window 0, {writes} writes one a second")
    row("write reply to the object action's write, p50", 1000 * percentile(to_write, 50), "ms")
    row("commit to the run's first activity, p50", 1000 * percentile(to_run, 50), "ms")


async def answered_pings(platform: Platform, session: str) -> dict[int, float]:
    """For each ping, when the pong that answers it was committed (the action's write is keyed by its batch)."""
    # The object action's writes carry no copy of their value in the event; the outcome of each batch does.
    async with platform.store.transaction() as conn:
        rows = await conn.fetch(
            "SELECT o.last_id AS ping, extract(epoch FROM e.created_at)::float8 AS at FROM orchestrator.outcomes o"
            " JOIN orchestrator.events e ON e.session_id = o.session_id AND e.source->>'listener' = o.listener"
            " AND e.idempotency_key LIKE '%:' || o.first_id || ':' || o.last_id"
            " WHERE o.session_id = $1 AND o.listener = 'latency_object' AND o.status = 'success'",
            session,
        )
    return {int(r["ping"]): float(r["at"]) for r in rows}


# The references


async def raw_case(database_url: str, rows: int, writers: int = WRITERS) -> float:
    """Single-row commits by `writers` connections: the store's own ceiling for one event per commit."""
    conn = await asyncpg.connect(database_url)
    await conn.execute("CREATE TABLE IF NOT EXISTS bench_raw (id bigserial PRIMARY KEY, body jsonb)")
    await conn.close()
    pool = await asyncpg.create_pool(database_url, min_size=writers, max_size=writers)
    try:
        left = rows
        began = time.time()

        async def writer() -> None:
            nonlocal left
            async with pool.acquire() as c:
                while left > 0:
                    left -= 1
                    await c.execute("INSERT INTO bench_raw (body) VALUES ($1)", '{"type": "b"}')

        await asyncio.gather(*(writer() for _ in range(writers)))
        return rows / (time.time() - began)
    finally:
        await pool.close()


async def naive_case(platform: Platform, client: Client, events: int) -> float:
    """One workflow per event: each write is followed by starting a workflow for it, 4 in flight."""
    task_queue = f"naive-{uuid.uuid4().hex[:8]}"
    worker = Worker(
        client, task_queue=task_queue, workflows=[BenchNaive], activities=[noop], workflow_runner=sandbox_runner()
    )
    session = (await platform.command({"command": "open_session"}))["session"]["id"]
    gate = asyncio.Semaphore(4)

    async def one(n: int) -> None:
        async with gate:
            await platform.command(
                {"command": "write_object", "session_id": session, "alias": f"naive/{n}", "value": {"type": "b"}}
            )
            await client.execute_workflow(BenchNaive.run, n, id=f"naive-{task_queue}-{n}", task_queue=task_queue)

    async with worker:
        began = time.time()
        await asyncio.gather(*(one(n) for n in range(events)))
        return events / (time.time() - began)


def burst_listener(name: str, **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "filter": {"types": ["object.written"], "aliases": ["bench/**"]},
        "batch": {"window_seconds": 1, "max_events": 1000},
        "action": {"type": "workflow", "workflow": "bench_run"},
        **more,
    }


@dataclass
class Bench:
    """The platform a benchmark drives: a dev server, a scratch database, and the API in its own process."""

    platform: Platform
    client: Client
    server_pid: int | None
    database_url: str
    api: str
    postgres_pid: int | None = None


@contextlib.asynccontextmanager
async def bench_platform(statements: bool = False) -> AsyncIterator[Bench]:
    """The platform a benchmark drives; with `statements`, PostgreSQL counts every statement it runs
    (`pg_stat_statements`)."""
    with tempfile.TemporaryDirectory(prefix="bench-temporal-") as folder:
        server = await start_temporal(Path(folder), ui=False)
        try:
            client = await connect_temporal(server.address, "default")
            async with scratch_database(statements=statements) as url:
                settings = Settings(
                    limits=Limits(activation_delay_seconds=0, listener_fires_per_minute=100_000),
                    search_attributes=False,
                )
                platform = await Platform.connect(settings, url, temporal=client)
                try:
                    async with api_process(url, settings) as api:
                        yield Bench(platform, client, server.pid, url, api, await postmaster_pid(url))
                finally:
                    await platform.close()
        finally:
            await shut_writers()
            with contextlib.suppress(Exception):
                await server.stop()


async def main(events: int, naive_events: int, cases: set[str]) -> None:
    async with bench_platform() as b:
        await run_cases(b.platform, b.client, b.server_pid, b.database_url, b.api, events, naive_events, cases)


async def run_cases(
    platform: Platform,
    client: Client,
    server_pid: int | None,
    database_url: str,
    api: str,
    events: int,
    naive_events: int,
    cases: set[str],
) -> None:
    print(f"burst: dev server + embedded PostgreSQL, writers through the HTTP door ({api}), {events:,} events")
    naive = None
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("raw", lambda: raw_case(database_url, events)),
        ("naive", lambda: naive_case(platform, client, naive_events)),
    ]
    for name, step in steps:
        if name in cases:
            value = await step()
            print(f"{name}:")
            row("single-row commits/s, 32 writers" if name == "raw" else "events/s, one workflow each", value, "/s")
            naive = value if name == "naive" else naive
    if "serial" in cases:
        await lanes_case(platform, client, server_pid, api, "serial", burst_listener("burst_serial"), events, 1, naive)
    if "keyed" in cases:
        keyed = burst_listener("burst_keyed", concurrency={"mode": "keyed", "key": "alias", "max_parallel": 16})
        await lanes_case(platform, client, server_pid, api, "keyed (100 keys, 16 slots)", keyed, events, 100, naive)
    if "sparse" in cases:
        await sparse_case(platform, client, api, keys=500, rate=8, seconds=120)
    if "latency" in cases:
        await latency_case(platform, client, api)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--naive-events", type=int, default=1_000)
    parser.add_argument(
        "--cases",
        default="raw,naive,serial,keyed,sparse,latency",
        help="which of raw,naive,serial,keyed,sparse,latency",
    )
    args = parser.parse_args()
    asyncio.run(main(args.events, args.naive_events, set(args.cases.split(","))))
