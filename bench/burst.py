"""A burst of events through the command surface into declared listeners, against the naive design.

Measures, side by side in one run on the Temporal dev server (SQLite in WAL mode, one task-queue
partition) and an embedded PostgreSQL:
- lanes: 20,000 events written by 8 writers (in a process of their own, as the API is) to a serial listener
  (window 1 s, max_events 1000), then to a keyed listener (100 keys by alias, max_parallel 16); events/s
  from the first write to the last batch's run starting, the writers' own pace, the delay the platform adds
  beyond the window (from when a batch was due, its first commit plus the window or, for events a full
  batch left behind, the previous batch of its lane, to its run's start: p50 and p99 over batches), the
  commit-to-run-start delay of every event, signals and workflow executions per 1,000 events, and the CPU
  time the Temporal server and the worker process spent per 1,000 events;
- naive: one workflow (running one trivial local activity) started per event, 4 in flight.

Run: .venv/bin/python -m bench.burst [--events 20000] [--naive-events 1000] [--cases naive,serial,keyed]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import multiprocessing
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

from bench.common import cpu_seconds, percentile, row, scratch_database
from orchestrator.app_loader import UserApp
from orchestrator.config import Settings
from orchestrator.core.limits import Limits
from orchestrator.embedded import start_temporal
from orchestrator.engine_wiring import platform_components
from orchestrator.platform import Platform
from orchestrator.worker import build_worker, connect_temporal, sandbox_runner

with workflow.unsafe.imports_passed_through():
    from workflows.messages import RunInput


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


@workflow.defn(name="bench_run")
class BenchRun:
    @workflow.run
    async def run(self, run: RunInput) -> None:
        await workflow.execute_local_activity(
            "bench.run_started", run.batch.event_ids, start_to_close_timeout=timedelta(seconds=10)
        )


@workflow.defn(name="bench_naive")
class BenchNaive:
    @workflow.run
    async def run(self, n: int) -> int:
        return int(
            await workflow.execute_local_activity(
                "bench.noop", n, start_to_close_timeout=timedelta(seconds=10), result_type=int
            )
        )


@activity.defn(name="bench.noop")
async def noop(n: int) -> int:
    return n


def write_burst(
    database_url: str, settings: Settings, session: str, aliases: list[str], writers: int
) -> tuple[float, float]:
    """Write one object per alias with `writers` concurrent writers, from a process of their own.

    As in a deployment, the writers (the API) and the worker are separate processes: sharing one event
    loop, every write would wait behind the worker's activities and signals and the burst would measure
    that loop rather than the platform. Answers when the first write began and the last ended.
    """
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_write_burst, database_url, settings.model_dump_json(), session, aliases, writers).result()


def _write_burst(
    database_url: str, settings_json: str, session: str, aliases: list[str], writers: int
) -> tuple[float, float]:
    return asyncio.run(
        _write_burst_async(database_url, Settings.model_validate_json(settings_json), session, aliases, writers)
    )


async def _write_burst_async(
    database_url: str, settings: Settings, session: str, aliases: list[str], writers: int
) -> tuple[float, float]:
    platform = await Platform.connect(settings, database_url)
    try:
        queue = list(enumerate(aliases))
        began = time.time()

        async def writer() -> None:
            while queue:
                n, alias = queue.pop()
                reply = await platform.command(
                    {"command": "write_object", "session_id": session, "alias": alias, "value": {"type": "b", "n": n}}
                )
                assert reply["status"] == "success", reply

        await asyncio.gather(*(writer() for _ in range(writers)))
        return began, time.time()
    finally:
        await platform.close()


async def lanes_case(
    platform: Platform,
    client: Client,
    server_pid: int | None,
    starts: Starts,
    label: str,
    listener: dict[str, Any],
    events: int,
    keys: int,
) -> None:
    components = platform_components(platform, client, UserApp(name="bench", workflows=[BenchRun]))
    assert components.router is not None
    worker = build_worker(
        client,
        platform.settings,
        UserApp(name="bench", workflows=[BenchRun], activities=[starts.run_started]),
        components.workflows,
        components.activities,
    )
    reply = await platform.command({"command": "save_listener", "listener": listener})
    assert reply["status"] == "success", reply
    session = (await platform.command({"command": "open_session"}))["session"]["id"]
    starts.runs.clear()
    starts.expected = events
    tasks = [asyncio.create_task(worker.run()), asyncio.create_task(components.router.run())]
    try:
        aliases = [f"bench/{n % keys}" for n in range(events)]
        cpu_before = cpu_seconds(server_pid), cpu_seconds()
        began, written_at = await asyncio.to_thread(
            write_burst, platform.database_url, platform.settings, session, aliases, 8
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(starts.all_started.wait(), timeout=600)
        server_cpu, worker_cpu = (cpu_seconds(server_pid) - cpu_before[0], cpu_seconds() - cpu_before[1])
        delivered = sum(len(ids) for _, ids in starts.runs)
        last = max(t for t, _ in starts.runs)
        written = await platform.store.list_events(session, limit=events + 10, types=["object.written"])
        commits = {e.id: e.created_at.timestamp() for e in written}
        lanes_of = {e.id: (e.alias if keys > 1 else "_") for e in written}
        window = float(listener["batch"]["window_seconds"])
        # A batch is due when its first event's window closes, or, for what a full batch left behind (those
        # events keep their window), when the batch before it started: the added delay is the time after that.
        added: list[float] = []
        previous: dict[str | None, float] = {}
        for t, ids in sorted(starts.runs):
            lane = lanes_of[ids[0]]
            due = max(min(commits[i] for i in ids) + window, previous.get(lane, 0.0))
            added.append(t - due)
            previous[lane] = t
        per_event = [t - commits[i] for t, ids in starts.runs for i in ids]
        lanes = len({a for a in aliases}) if keys > 1 else 1
        executions = lanes + 2 * len(starts.runs)  # each lane, and per batch a run workflow and the app's run
        print(f"{label}: {events:,} events, {len(starts.runs)} batches, {delivered:,} delivered")
        row("events/s, first write to last run started", events / (last - began), "events/s")
        row("events/s written (the burst's own pace)", events / (written_at - began), "events/s")
        row("runs started after the last write", sum(1 for t, _ in starts.runs if t > written_at), "runs")
        row("added delay beyond the window, p50 (per batch)", 1000 * percentile(added, 50), "ms")
        row("added delay beyond the window, p99 (per batch)", 1000 * percentile(added, 99), "ms")
        row("commit to run start, p50 (per event)", 1000 * percentile(per_event, 50), "ms")
        row("commit to run start, p99 (per event)", 1000 * percentile(per_event, 99), "ms")
        row("signals per 1,000 events", 1000 * components.router.signals / events, "signals")
        row("workflow executions per 1,000 events", 1000 * executions / events, "executions")
        row("Temporal server CPU per 1,000 events", 1000 * server_cpu / events, "s")
        row("worker and router CPU per 1,000 events", 1000 * worker_cpu / events, "s")
        return None
    finally:
        await worker.shutdown()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


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


async def main(events: int, naive_events: int, cases: set[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-temporal-") as folder:
        server = await start_temporal(Path(folder), ui=False)
        try:
            client = await connect_temporal(server.address, "default")
            async with scratch_database() as url:
                settings = Settings(
                    task_queue=f"bench-{uuid.uuid4().hex[:8]}",
                    limits=Limits(activation_delay_seconds=0, listener_fires_per_minute=100_000),
                )
                platform = await Platform.connect(settings, url, temporal=client)
                try:
                    print(f"burst: dev server + embedded PostgreSQL, {events:,} events per lane case")
                    if "naive" in cases:
                        naive = await naive_case(platform, client, naive_events)
                        print(f"naive: {naive_events:,} events, one workflow each")
                        row("events/s", naive, "events/s")
                    serial = {
                        "name": "burst_serial",
                        "filter": {"types": ["object.written"], "aliases": ["bench/**"]},
                        "batch": {"window_seconds": 1, "max_events": 1000},
                        "action": {"type": "workflow", "workflow": "bench_run"},
                    }
                    if "serial" in cases:
                        await lanes_case(platform, client, server.pid, Starts(), "serial", serial, events, 1)
                    await platform.command({"command": "delete_listener", "name": "burst_serial"})
                    keyed = {
                        "name": "burst_keyed",
                        "filter": {"types": ["object.written"], "aliases": ["bench/**"]},
                        "concurrency": {"mode": "keyed", "key": "alias", "max_parallel": 16},
                        "batch": {"window_seconds": 1, "max_events": 1000},
                        "action": {"type": "workflow", "workflow": "bench_run"},
                    }
                    if "keyed" in cases:
                        await lanes_case(platform, client, server.pid, Starts(), "keyed (100 keys)", keyed, events, 100)
                finally:
                    await platform.close()
        finally:
            with contextlib.suppress(Exception):
                await server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--naive-events", type=int, default=1_000)
    parser.add_argument("--cases", default="naive,serial,keyed", help="which of naive,serial,keyed to run")
    args = parser.parse_args()
    asyncio.run(main(args.events, args.naive_events, set(args.cases.split(","))))
