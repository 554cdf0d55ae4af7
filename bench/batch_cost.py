"""What a batch costs, side by side with a naive design whose every workflow runs the same two activities.

Measured in one run on the Temporal dev server (SQLite in WAL mode, one task-queue partition) and an embedded
PostgreSQL that counts its statements (`pg_stat_statements`), with the API in a process of its own and the
writers in four more (32 keep-alive clients through the HTTP door), the worker and router in this one:
- naive: 32 writers, each committing its event (`write_object`, the platform's write), starting one
  workflow of two activities for it and waiting for its end before its next event: workflows/s, runs/s
  (first write to last run's first activity, as a listener's are counted), each event's commit to its run's
  first activity (p50, p99), and Temporal's work per workflow (starts, workflow tasks, activities);
- keyed (100 keys, 16 key slots, 1 s window) and serial (1 s window) bursts, whose run workflow runs two
  activities: events/s from the first write to the last batch's run starting, batches/s over the same span
  and against the naive workflows/s, the delay added beyond the window (p50, p99 over batches; a batch is due
  at its first commit plus the window, or, for events a full batch left behind, when its lane's previous run
  started), each event's commit to its run's first activity (p50, p99), PostgreSQL statements per batch (every
  statement but the API's writes, by `pg_stat_statements`), nudges and history events per batch, Temporal's
  work per batch by kind (starts, workflow tasks, activities, local activities, timers, signals; the lanes'
  workflows and the runs apart), and the engine's own CPU per batch: its process (worker and router)
  and PostgreSQL's work for its connections (told apart from the API's by the process at the other end of
  each backend's socket), the Temporal server and PostgreSQL's own processes less the same writes made alone
  (into a session no listener takes from), all less a run of two activities alone (16 at a time, no write,
  measured just before and just after the case). The API and PostgreSQL's work for it are the writes; how
  much more they cost beside the engine than alone is printed apart;
- keyed against naive, with both cases: the naive design measured again after each keyed round, and each round
  set beside the naive just before and just after it: runs/s, keyed over naive, and the p50 of each event's
  commit to its run started, keyed less naive;
- keyed_each (and keyed_one, the same with `max_events: 1` and no window, the spec's "answer each request" shape):
  the same, with every event a key of its own (as many keys as the naive design's events, 32 slots
  as its 32 in flight), so each batch is one event and both designs write and run alike, event for event (32
  writers making the platform's write in this process, as the naive design's do; `--writes http`: through the
  door from the writers' processes, which the naive's writes are not): what is left between them is the engine's
  part of a run (the keyed case's batches carry about 24 events, and 24
  writes, each); then both fed the same arrivals, open loop, at 0.7 of the lesser rate each held: the p50 of
  each event's commit to its run started, keyed less naive (the added latency at one load);
- alternate: keyed one-event batches and the naive design in blocks that take turns on one dev server, one engine
  running throughout, the order turning each pair: each pair's runs/s once every slot is busy (and with the
  block's start counted) and its CPU a run by part, counted until the Temporal server is quiet; the medians of
  the pairs (the dev server's CPU a run drifts within a run and moves between runs more than the engine's part);
- windows: a trickle (one write every 2.5 s) into a listener with a 1 s and then a 0.3 s window: how long after
  its window closed each batch's run started (p50, p90).

Run: .venv/bin/python -m bench.batch_cost [--events 5000] [--naive-events 1000]
[--cases naive,keyed,keyed_each,keyed_one,alternate,serial,windows] [--rounds 1] [--pace 20] [--writes same|http]
[--pairs 8] [--block 200] (with more rounds, the engine's CPU per batch is summed up over them: median, least, most;
`--pace`: the open loop's events/s, to compare two builds at one load)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from bench.burst import (
    Starts,
    added_delays,
    app_engine,
    bench_platform,
    history_events,
    noop,
    write_in_process,
    write_through_http,
)
from bench.common import CpuMeter, cpu_seconds, percentile, row, statement_counts
from bench.workflows import BenchNaiveTwo, BenchRunTwo
from orchestrator.app_loader import UserApp
from orchestrator.engine.worker import sandbox_runner
from orchestrator.lanes.nudges import Nudger
from orchestrator.platform import Platform

WRITERS = 32
WRITER_PROCESSES = 4
# The API's own statements (a write through the door is one; its gate asks whether keys exist and takes rate
# tokens), left out of what the engine costs.
API_STATEMENTS = (
    "orchestrator_write_object",
    "orchestrator_post_thread_item",
    "FROM orchestrator.api_keys",
    "orchestrator_take_tokens",
)


@contextlib.asynccontextmanager
async def two_activity_engine(platform: Platform, client: Client, starts: Starts) -> Any:
    app = UserApp(name="bench", workflows=[BenchRunTwo], activities=[starts.run_started, noop])
    async with app_engine(platform, client, app) as components:
        yield components


@dataclass
class Naive:
    """What the naive design measured: workflows/s (first start to last end), runs/s as a listener's are
    counted (first write to last run's first activity), each event's commit to its run's first activity, and
    the CPU seconds per workflow by part."""

    rate: float
    runs_per_second: float
    latencies: list[float]
    cpu: dict[str, float]
    # When each run started (its first activity).
    started: list[float] = field(default_factory=list)


async def naive_case(
    bench: Any,
    events: int,
    in_flight: int,
    write: bool = True,
    closed: bool = False,
    rate: float | None = None,
    say: bool = True,
    settle: bool = False,
) -> Naive:
    """One workflow per event, started as the event is written, each running two activities. `rate`: the events
    arrive at that pace, each written and its run started at its time whatever the others do. `closed`: each of
    the `in_flight` writers waits for its run's end before it takes its next event (runs in flight bounded, as
    a listener's slots bound them; started and not awaited, runs queue up on Temporal and each waits longer
    the longer the burst). Without `write`, the workflows alone: what an application's run of two activities
    costs, the part of a batch that is not the engine's. Without `say`, nothing printed; with `settle`, the CPU
    counted until the Temporal server is quiet (`temporal_quiet`)."""
    platform, client = bench.platform, bench.client
    task_queue = f"naive-{uuid.uuid4().hex[:8]}"
    done: list[float] = []
    started: dict[int, float] = {}
    finished = asyncio.Event()

    @activity.defn(name="bench.noop")
    async def naive_started(n: int) -> int:
        """The naive run's first activity: its start, as a listener's run reports its own (`Starts`)."""
        started.setdefault(n, time.time())
        return n

    @activity.defn(name="bench.naive_done")
    async def naive_done(n: int) -> int:
        done.append(time.time())
        if len(done) >= events:
            finished.set()
        return n

    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[BenchNaiveTwo],
        activities=[naive_started, naive_done],
        workflow_runner=sandbox_runner(),
    )
    session = (await platform.command({"command": "open_session"}))["session"]["id"]
    gate = asyncio.Semaphore(in_flight)

    async def one(n: int) -> None:
        if rate is not None:
            await asyncio.sleep(max(began + n / rate - time.time(), 0.0))
        async with gate:
            if write:
                await platform.command(
                    {"command": "write_object", "session_id": session, "alias": f"naive/{n}", "value": {"type": "b"}}
                )
            handle = await client.start_workflow(
                BenchNaiveTwo.run, n, id=f"naive-{task_queue}-{n}", task_queue=task_queue
            )
            if closed:
                await handle.result()

    meter = CpuMeter(bench.server_pid, bench.postgres_pid)
    async with worker:
        meter.start()
        began = time.time()
        await asyncio.gather(*(one(n) for n in range(events)))
        await asyncio.wait_for(finished.wait(), 600)
        if settle:
            await temporal_quiet(bench.server_pid)
        cpu = meter.stop()
    per_second = events / (max(done) - began)
    runs_per_second = events / (max(started.values()) - began)
    latencies: list[float] = []
    if write:
        written = await platform.store.list_events(session, limit=events + 10, types=["object.written"])
        commits = {int((e.alias or "").rsplit("/", 1)[-1]): e.created_at.timestamp() for e in written}
        latencies = [started[n] - commits[n] for n in started if n in commits]
    cpu_per_event = {part: seconds / events for part, seconds in cpu.items()}
    measured = Naive(per_second, runs_per_second, latencies, cpu_per_event, list(started.values()))
    if not say:
        return measured
    label = "one per event" if write else "with no write (a run alone)"
    at_a_time = f"{in_flight} in flight" if closed else f"{in_flight} started at a time"
    if rate is not None:
        at_a_time = f"arriving at {rate:.1f} events/s"
    print(f"naive: {events:,} workflows, {label}, two activities each, {at_a_time}")
    row("workflows/s, first start to last end", per_second, "/s")
    row("runs/s, first write to last run started", runs_per_second, "/s")
    if latencies:
        row("commit to its run started, p50 (per event)", 1000 * percentile(latencies, 50), "ms")
        row("commit to its run started, p99 (per event)", 1000 * percentile(latencies, 99), "ms")
        sample = min(events, 100)
        for (_, kind), count in sorted((await temporal_actions(client, task_queue, sample)).items()):
            row(f"Temporal per workflow: {kind}", count / sample, "/run")
    row("CPU per workflow, all parts", 1000 * sum(cpu.values()) / events, "ms")
    for part, seconds in cpu.items():
        row(f"  {part}", 1000 * seconds / events, "ms")
    return measured


# History events that Temporal Cloud bills as actions, or that a worker spends a task on, by what they are.
ACTION_EVENTS = {
    "WORKFLOW_EXECUTION_STARTED": "workflow starts",
    "WORKFLOW_TASK_COMPLETED": "workflow tasks",
    "ACTIVITY_TASK_SCHEDULED": "activities",
    "MARKER_RECORDED": "local activities (markers)",
    "TIMER_STARTED": "timers",
    "WORKFLOW_EXECUTION_SIGNALED": "signals",
}


async def temporal_actions(client: Client, task_queue: str, limit: int | None = None) -> dict[tuple[str, str], int]:
    """Per (lane or run, kind): how many of each history event that costs an action or a workflow task, over
    every workflow on the task queue (each history read whole), or the first `limit`."""
    counts: dict[tuple[str, str], int] = {}
    async for execution in client.list_workflows(f"TaskQueue = '{task_queue}'", limit=limit):
        whose = "lane" if execution.workflow_type == "OrchestratorLane" else "run"
        handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
        async for event in handle.fetch_history_events():
            name = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
            if name in ACTION_EVENTS:
                key = (whose, ACTION_EVENTS[name])
                counts[key] = counts.get(key, 0) + 1
    return counts


def listener(name: str, **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "filter": {"types": ["object.written"], "aliases": ["bench/**"]},
        "batch": {"window_seconds": 1, "max_events": 1000},
        "action": {"type": "workflow", "workflow": "bench_run_two"},
        **more,
    }


def engine_statements(
    before: dict[str, tuple[int, float]], after: dict[str, tuple[int, float]]
) -> tuple[int, list[tuple[int, float, str]]]:
    """Statements the engine ran between two counts (the API's writes left out), and the most frequent with
    their milliseconds (wall time: a wait for a lock counts)."""
    ran: dict[str, tuple[int, float]] = {}
    for q, (n, ms) in after.items():
        calls, took = before.get(q, (0, 0.0))
        if n > calls:
            ran[q] = (n - calls, ms - took)
    mine = {q: ran[q] for q in ran if not any(a in q for a in API_STATEMENTS) and "pg_stat_statements" not in q}
    top = sorted(((n, ms, q) for q, (n, ms) in mine.items()), reverse=True)[:8]
    return sum(n for n, _ in mine.values()), top


async def write(
    bench: Any, session: str, aliases: list[str], in_process: bool, rate: float | None = None
) -> tuple[float, float]:
    """The writers' writes: through the HTTP door from their own processes, or `in_process` with the platform's
    write in this one, as the naive design's; answers when the first began and the last ended."""
    if in_process:
        return await write_in_process(bench.platform, session, aliases, writers=WRITERS, rate=rate)
    return await write_through_http(bench.api, session, aliases, writers=WRITERS, processes=WRITER_PROCESSES, rate=rate)


async def writes_alone(bench: Any, events: int, keys: int, in_process: bool) -> CpuMeter:
    """The meter over the same writes into a session no listener takes from (the engine running: its router's
    rounds find nothing to take): what a batch's writes cost, not the engine."""
    session = (await bench.platform.command({"command": "open_session"}))["session"]["id"]
    meter = CpuMeter(bench.server_pid, bench.postgres_pid)
    meter.start()
    await write(bench, session, [f"alone/{n % keys}" for n in range(events)], in_process)
    await asyncio.sleep(1)  # the router's last rounds
    meter.stop()
    return meter


@dataclass
class LanesCost:
    """What a lanes case measured: its CPU meter, the same writes' made alone, and how many batches it ran."""

    lanes: CpuMeter
    writes: CpuMeter
    batches: int
    # Whether its writes were made in this process (the engine's), not through the door.
    in_process: bool = False
    runs_per_second: float = 0.0
    # Each event's commit to its batch's run's first activity.
    latencies: list[float] = field(default_factory=list)


def engine_parts(cost: LanesCost, run_alone: dict[str, float]) -> dict[str, float]:
    """The engine's CPU seconds per batch, by part. The API and PostgreSQL's work for it are the writes, left
    out; the engine's process and PostgreSQL's work for its connections are the engine's, less what a run alone
    costs there; the Temporal server and PostgreSQL's own processes serve both, so the same writes made alone
    and a run alone are taken from them."""
    cpu, own, batches = cost.lanes.used, cost.lanes.postgres_by_client, cost.batches
    alone, alone_own = cost.writes.used, cost.writes.postgres_by_client
    rest = "the server's own and exited backends"
    # Writes made in this process cost it and its connections what they cost the API through the door.
    mine = cost.writes.used["worker and router"] if cost.in_process else 0.0
    my_connections = alone_own["engine's connections"] if cost.in_process else 0.0
    return {
        "Temporal server": (cpu["Temporal server"] - alone["Temporal server"]) / batches - run_alone["Temporal server"],
        "worker and router": (cpu["worker and router"] - mine) / batches - run_alone["worker and router"],
        "PostgreSQL, the engine's connections": (own["engine's connections"] - my_connections) / batches
        - run_alone["PostgreSQL"],
        "PostgreSQL, the server's own": (own[rest] - alone_own[rest]) / batches,
    }


def writes_grown(cost: LanesCost) -> float:
    """CPU seconds per batch the writes cost beyond the same writes made alone (the API and PostgreSQL's work for
    it): they wait for the session's lock behind the engine's statements, and the machine is busier."""
    api = cost.lanes.used["API"] - cost.writes.used["API"]
    theirs = "API's connections"
    return (api + cost.lanes.postgres_by_client[theirs] - cost.writes.postgres_by_client[theirs]) / cost.batches


def print_engine(cost: LanesCost, run_alone: dict[str, float]) -> float:
    """Prints the engine's CPU per batch by part; answers it in seconds."""
    row("a run alone (two activities, no write), before and after", 1000 * sum(run_alone.values()), "ms")
    parts = engine_parts(cost, run_alone)
    engine = sum(parts.values())
    row("the engine's CPU per batch (no writes, less a run alone)", 1000 * engine, "ms")
    for part, seconds in parts.items():
        row(f"  {part}", 1000 * seconds, "ms")
    row("  not in it: the writes' own cost grown beside the engine", 1000 * writes_grown(cost), "ms")
    return engine


async def lanes_case(
    bench: Any,
    label: str,
    body: dict[str, Any],
    events: int,
    keys: int,
    naive: float | None,
    rate: float | None = None,
    in_process: bool = False,
) -> LanesCost:
    """`naive`: the naive design's workflows/s; `rate`: the writers' pace in events/s (None: as fast as they go);
    `in_process`: the writes made in this process, as the naive design's are, not through the door. Answers what
    it measured, for the engine's part."""
    platform, client = bench.platform, bench.client
    starts = Starts(expected=events)
    platform.settings = platform.settings.model_copy(update={"task_queue": f"bench-{uuid.uuid4().hex[:8]}"})
    reply = await platform.command({"command": "save_listener", "listener": body})
    assert reply["status"] == "success", reply
    session = (await platform.command({"command": "open_session"}))["session"]["id"]
    async with two_activity_engine(platform, client, starts):
        writes = await writes_alone(bench, events, keys, in_process)
        aliases = [f"bench/{n % keys}" for n in range(events)]
        signals_before = Nudger.sent_total
        await statement_counts(bench.database_url, reset=True)
        before = await statement_counts(bench.database_url)
        meter = CpuMeter(bench.server_pid, bench.postgres_pid)
        meter.start()
        began, written_at = await write(bench, session, aliases, in_process, rate)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(starts.all_started.wait(), timeout=900)
        cpu = meter.stop()
        after = await statement_counts(bench.database_url)
        signals = Nudger.sent_total - signals_before
        # Let the last runs end before the history is read.
        await asyncio.sleep(2)
    await platform.command({"command": "delete_listener", "name": body["name"]})
    written = await platform.store.list_events(session, limit=events + 10, types=["object.written"])
    commits = {e.id: e.created_at.timestamp() for e in written}
    lanes = {e.id: (e.alias or "_") if keys > 1 else "_" for e in written}
    added = added_delays(starts.runs, commits, lanes, float(body["batch"]["window_seconds"]))
    latencies = [t - commits[i] for t, ids in starts.runs for i in ids if i in commits]
    batches = len(starts.runs)
    last = max(t for t, _ in starts.runs)
    statements, top = engine_statements(before, after)
    executions, history = await history_events(client, platform.settings.task_queue)
    delivered = sum(len(ids) for _, ids in starts.runs)
    print(f"{label}: {events:,} events, {batches} batches, {delivered:,} delivered")
    row("events/s, first write to last run started", events / (last - began), "events/s")
    if naive:
        row("  times the naive design's workflows/s", events / (last - began) / naive, "x")
    row("events/s written (the writers' own pace)", events / (written_at - began), "events/s")
    row("batches/s, first write to last run started", batches / (last - began), "batches/s")
    if naive:
        row("  times the naive design's workflows/s", batches / (last - began) / naive, "x")
    row("added delay beyond the window, p50 (per batch)", 1000 * percentile(added, 50), "ms")
    row("added delay beyond the window, p99 (per batch)", 1000 * percentile(added, 99), "ms")
    row("commit to its run started, p50 (per event)", 1000 * percentile(latencies, 50), "ms")
    row("commit to its run started, p99 (per event)", 1000 * percentile(latencies, 99), "ms")
    row("PostgreSQL statements per batch (the API's writes left out)", statements / batches, "statements")
    row("nudges (signals) per batch", signals / batches, "signals")
    engine_cpu = {part: seconds for part, seconds in cpu.items() if part != "API"}
    row("CPU per batch, all parts but the API", 1000 * sum(engine_cpu.values()) / batches, "ms")
    for part, seconds in cpu.items():
        row(f"  {part}", 1000 * seconds / batches, "ms")
    for whom, seconds in meter.postgres_by_client.items():
        row(f"    PostgreSQL, {whom}", 1000 * seconds / batches, "ms")
    alone = 1000 * sum(writes.used.values()) / batches
    row("the writes alone (the same, no listener taking them), per batch", alone, "ms")
    for part, seconds in writes.used.items():
        row(f"  {part}", 1000 * seconds / batches, "ms")
    for whom, seconds in writes.postgres_by_client.items():
        row(f"    PostgreSQL, {whom}", 1000 * seconds / batches, "ms")
    row("workflow executions per batch", executions / batches, "runs")
    row("history events per batch, all workflows", history / batches, "events")
    print("  Temporal per batch, the lanes' workflows and the runs apart:")
    for (whose, kind), count in sorted((await temporal_actions(client, platform.settings.task_queue)).items()):
        row(f"  {whose}s: {kind}", count / batches, "/batch")
    async with platform.store.transaction() as conn:
        held = await conn.fetch(
            "SELECT extract(epoch FROM released_at - created_at)::float8 AS held FROM orchestrator.batches"
            " WHERE session_id = $1 AND released_at IS NOT NULL",
            session,
        )
    holds = [float(r["held"]) for r in held]
    row("a batch held its slot (taken to its run's end recorded), p50", 1000 * percentile(holds, 50), "ms")
    print("  the engine's most frequent statements (calls and wall-time milliseconds per batch):")
    for calls, ms, query in top:
        print(f"    {calls / batches:>6.2f}/batch {ms / batches:>7.2f} ms  {' '.join(query.split())[:90]}")
    return LanesCost(meter, writes, batches, in_process, batches / (last - began), latencies)


async def windows_case(bench: Any, window: float, writes: int = 16, every: float = 2.5) -> None:
    platform, client = bench.platform, bench.client
    starts = Starts(expected=writes)
    platform.settings = platform.settings.model_copy(update={"task_queue": f"bench-{uuid.uuid4().hex[:8]}"})
    name = f"trickle_{int(window * 1000)}"
    body = listener(name, batch={"window_seconds": window, "max_events": 1000})
    await platform.command({"command": "save_listener", "listener": body})
    session = (await platform.command({"command": "open_session"}))["session"]["id"]
    async with two_activity_engine(platform, client, starts):
        await asyncio.sleep(1)
        for n in range(writes):
            await platform.command(
                {"command": "write_object", "session_id": session, "alias": f"bench/{n}", "value": {"type": "t"}}
            )
            await asyncio.sleep(every)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(starts.all_started.wait(), timeout=30)
    await platform.command({"command": "delete_listener", "name": name})
    written = await platform.store.list_events(session, limit=writes + 10, types=["object.written"])
    commits = {e.id: e.created_at.timestamp() for e in written}
    late = [t - (min(commits[i] for i in ids) + window) for t, ids in starts.runs]
    print(f"windows: {writes} writes one every {every:g} s, window {window:g} s")
    row("run started after the window closed, p50", 1000 * percentile(late, 50), "ms")
    row("run started after the window closed, p90", 1000 * percentile(late, 90), "ms")


def summarize(label: str, engine: list[float]) -> None:
    """The engine's CPU per batch over the rounds of a case: a difference of figures that each move with the
    machine, so one round says little."""
    figures = sorted(engine)
    if len(figures) > 1:
        print(f"{label}: the engine's CPU per batch over {len(figures)} rounds")
        row("  median", 1000 * statistics.median(figures), "ms")
        row("  least", 1000 * figures[0], "ms")
        row("  most", 1000 * figures[-1], "ms")


def ratio_row(label: str, value: float) -> None:
    print(f"  {label:<58} {value:>12.2f} x")


def versus_naive(label: str, keyed: list[LanesCost], naives: list[Naive]) -> None:
    """Each keyed round beside the naive design (32 in flight) measured just before and just after it in the
    same run: runs/s (first write to last run started) and the p50 of each event's commit to its run's first
    activity, the naive's the mean of the two."""
    print(f"{label} against the naive design, 32 in flight, measured before and after each round")
    for n, cost in enumerate(keyed):
        around = naives[n : n + 2]
        naive_rate = statistics.mean(m.runs_per_second for m in around)
        naive_p50 = statistics.mean(percentile(m.latencies, 50) for m in around)
        p50 = percentile(cost.latencies, 50)
        row(f"round {n + 1}: naive runs/s (before, after)", naive_rate, "/s")
        row(f"round {n + 1}: keyed runs/s", cost.runs_per_second, "/s")
        ratio_row(f"round {n + 1}:   keyed / naive", cost.runs_per_second / naive_rate)
        # What each run cost the machine, every part counted (the naive's writes and starts are made in this
        # process, the keyed's writes by the API and its connections): the ratio of runs/s on a machine each had
        # to itself, CPU bound, whatever else ran beside this benchmark.
        naive_cpu = statistics.mean(sum(m.cpu.values()) for m in around)
        keyed_cpu = sum(cost.lanes.used.values()) / cost.batches
        row(f"round {n + 1}: CPU per run, naive, all parts", 1000 * naive_cpu, "ms")
        row(f"round {n + 1}: CPU per run, keyed, all parts", 1000 * keyed_cpu, "ms")
        ratio_row(f"round {n + 1}:   runs per CPU second, keyed / naive", naive_cpu / keyed_cpu)
        row(f"round {n + 1}: naive commit to run started, p50", 1000 * naive_p50, "ms")
        row(f"round {n + 1}: keyed commit to run started, p50", 1000 * p50, "ms")
        row(f"round {n + 1}:   keyed less naive", 1000 * (p50 - naive_p50), "ms")


@dataclass
class Block:
    """One block of an alternation: runs/s once every slot is busy and CPU seconds a run, all parts."""

    runs_per_second: float
    # Runs/s from the block's first write to its last run started, its start counted.
    whole: float
    # CPU seconds a run by part (the Temporal server, this process, PostgreSQL, the API).
    cpu: dict[str, float]

    @property
    def cpu_per_run(self) -> float:
        return sum(self.cpu.values())


async def runs_ended(platform: Platform, session: str) -> None:
    """Until every batch of the session has its run's end recorded (its slot released)."""
    async with asyncio.timeout(120):
        while True:
            async with platform.store.transaction() as conn:
                open_batches = await conn.fetchval(
                    "SELECT count(*) FROM orchestrator.batches WHERE session_id = $1 AND released_at IS NULL", session
                )
            if not open_batches:
                return
            await asyncio.sleep(0.05)


async def temporal_quiet(server_pid: int, busy: float = 0.04, longest: float = 15.0) -> None:
    """Until the Temporal server used less than `busy` of a core over half a second (what a block left it to do,
    such as its workflows' last tasks and their histories' writes, counted to the block), or `longest` seconds."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(longest):
            while True:
                before = cpu_seconds(server_pid)
                await asyncio.sleep(0.5)
                if cpu_seconds(server_pid) - before < busy * 0.5:
                    return


async def keyed_block(bench: Any, session: str, starts: Starts, block: int, count: int) -> Block:
    """`count` events, each a key of its own, written as the naive design's are (32 writers in this process) into
    a running engine: as fast as they go, to the last run's end recorded."""
    starts.runs.clear()
    starts.expected = count
    starts.all_started.clear()
    meter = CpuMeter(bench.server_pid, bench.postgres_pid)
    meter.start()
    began, _ = await write(bench, session, [f"bench/{block}-{n}" for n in range(count)], in_process=True)
    await asyncio.wait_for(starts.all_started.wait(), 300)
    await runs_ended(bench.platform, session)
    await temporal_quiet(bench.server_pid)
    cpu = meter.stop()
    started = [t for t, _ in starts.runs]
    cpu_per_run = {part: seconds / count for part, seconds in cpu.items()}
    return Block(steady_rate(started), count / (max(started) - began), cpu_per_run)


def steady_rate(started: list[float]) -> float:
    """Runs/s once every slot is busy: from the run that filled the last slot to the last run. A block's first
    runs wait for their window (keyed) or for nothing (naive): its start says how the design begins, not how fast
    it goes."""
    times = sorted(started)
    return (len(times) - WRITERS) / (times[-1] - times[WRITERS - 1])


async def alternate(bench: Any, pairs: int, count: int) -> None:
    """Keyed one-event batches against the naive design in short blocks that take turns on one dev server, one
    engine running throughout: the Temporal server's CPU a run drifts within a run and moves by a third between
    runs, more than the engine's part, so each keyed block is set beside the naive block next to it. The order
    turns each pair (naive first, then keyed first) so that a drift favours neither."""
    platform, client = bench.platform, bench.client
    limits = platform.settings.limits
    platform.settings = platform.settings.model_copy(
        update={
            "task_queue": f"bench-{uuid.uuid4().hex[:8]}",
            "limits": limits.model_copy(update={"listener_parallel_runs": WRITERS}),
        }
    )
    body = listener("cost_alternate", concurrency={"mode": "keyed", "key": "alias", "max_parallel": WRITERS})
    reply = await platform.command({"command": "save_listener", "listener": body})
    assert reply["status"] == "success", reply
    session = (await platform.command({"command": "open_session"}))["session"]["id"]
    starts = Starts()
    print(f"keyed one-event batches against the naive design: {pairs} pairs of blocks of {count} runs, in turns")
    ratios: list[float] = []
    whole_ratios: list[float] = []
    cpu_ratios: list[float] = []
    # Keyed less naive, CPU seconds a run by part, each pair.
    more: list[dict[str, float]] = []
    async with two_activity_engine(platform, client, starts):
        # A first keyed block and a first naive one, not counted: the engine's and the worker's first starts.
        await keyed_block(bench, session, starts, -1, count // 2)
        await naive_case(bench, count // 2, WRITERS, closed=True, say=False)
        for pair in range(pairs):
            measured: dict[str, Block] = {}
            for design in ("naive", "keyed") if pair % 2 == 0 else ("keyed", "naive"):
                if design == "keyed":
                    measured[design] = await keyed_block(bench, session, starts, pair, count)
                else:
                    naive = await naive_case(bench, count, WRITERS, closed=True, say=False, settle=True)
                    measured[design] = Block(steady_rate(naive.started), naive.runs_per_second, naive.cpu)
            keyed, naive_block = measured["keyed"], measured["naive"]
            ratios.append(keyed.runs_per_second / naive_block.runs_per_second)
            whole_ratios.append(keyed.whole / naive_block.whole)
            cpu_ratios.append(naive_block.cpu_per_run / keyed.cpu_per_run)
            more.append({part: keyed.cpu[part] - naive_block.cpu[part] for part in keyed.cpu})
            print(
                f"  pair {pair + 1:>2}: runs/s naive {naive_block.runs_per_second:6.1f} keyed"
                f" {keyed.runs_per_second:6.1f} ({ratios[-1]:.2f}x); CPU a run naive"
                f" {1000 * naive_block.cpu_per_run:5.1f} ms keyed {1000 * keyed.cpu_per_run:5.1f} ms"
                f" ({cpu_ratios[-1]:.2f}x runs a CPU second); with its start {whole_ratios[-1]:.2f}x"
            )
            for design, block in measured.items():
                parts = ", ".join(f"{part} {1000 * seconds:.1f}" for part, seconds in block.cpu.items())
                print(f"           {design}: {parts} ms")
    await platform.command({"command": "delete_listener", "name": body["name"]})
    platform.settings = platform.settings.model_copy(update={"limits": limits})
    ratio_row("keyed / naive runs/s, median of the pairs", statistics.median(ratios))
    ratio_row("keyed / naive runs/s, least", min(ratios))
    ratio_row("keyed / naive runs/s, most", max(ratios))
    ratio_row("keyed / naive runs/s, the blocks' start counted, median", statistics.median(whole_ratios))
    ratio_row("runs a CPU second, keyed / naive, median of the pairs", statistics.median(cpu_ratios))
    for part in more[0]:
        row(f"  CPU a run, keyed less naive, median: {part}", 1000 * statistics.median(m[part] for m in more), "ms")


async def main(
    events: int,
    naive_events: int,
    cases: set[str],
    rounds: int = 1,
    paced: float | None = None,
    writes: str = "same",
    pairs: int = 8,
    block: int = 200,
) -> None:
    # One event a batch against the naive design: its writes made as the naive's are (in this process), unless
    # `writes` is `http`, where they go through the door from the writers' processes as the bursts' do.
    each_in_process = writes == "same"
    async with bench_platform(statements=True) as bench:
        print(f"batch cost: dev server + embedded PostgreSQL, the bursts' writers through the HTTP door ({bench.api})")
        how = "in this process, as the naive design's" if each_in_process else "through the HTTP door"
        print(f"one event a batch (keyed_each, keyed_one): its writes {how}")
        naives: list[Naive] = []
        if "naive" in cases:
            # 32 writers, each starting its event's run and waiting for its end before its next event.
            naives.append(await naive_case(bench, naive_events, WRITERS, closed=True))
        naive = naives[0].rate if naives else None

        async def run_alone() -> dict[str, float]:
            await asyncio.sleep(3)  # the Temporal server's tail of what ran before
            return (await naive_case(bench, naive_events // 2, 16, write=False)).cpu

        async def lanes_round_of(
            label: str,
            body: dict[str, Any],
            count: int,
            keys: int,
            rate: float | None = None,
            in_process: bool = False,
        ) -> tuple[float, LanesCost]:
            # What the application's run costs, 16 at a time (a keyed listener's slots): not the engine's part.
            # Measured each round just before the case and just after it: the machine's load moves both.
            before = await run_alone()
            cost = await lanes_case(bench, label, body, count, keys, naive, rate, in_process)
            after = await run_alone()
            return print_engine(cost, {part: (before[part] + after[part]) / 2 for part in before}), cost

        async def lanes_round(label: str, body: dict[str, Any], keys: int) -> tuple[float, LanesCost]:
            return await lanes_round_of(label, body, events, keys)

        if "keyed" in cases:
            keyed = listener("cost_keyed", concurrency={"mode": "keyed", "key": "alias", "max_parallel": 16})
            label = "keyed (100 keys, 16 slots, 1 s window)"
            measured = []
            for _ in range(rounds):
                measured.append(await lanes_round(label, keyed, 100))
                if naives:
                    # The naive design again after each round: a round is set beside the naive measured just
                    # before and just after it, the machine's load moving between them.
                    await asyncio.sleep(3)
                    naives.append(await naive_case(bench, naive_events, WRITERS, closed=True))
            summarize(label, [engine for engine, _ in measured])
            if naives:
                versus_naive(label, [cost for _, cost in measured], naives)

        async def one_event_a_batch(each: dict[str, Any], label: str) -> None:
            limits = bench.platform.settings.limits
            # The deployment's cap on a listener's runs in flight (16 by default) raised to the naive's 32.
            bench.platform.settings = bench.platform.settings.model_copy(
                update={"limits": limits.model_copy(update={"listener_parallel_runs": WRITERS})}
            )
            # As fast as the writers go: what the machine holds, beside the naive design just before and after.
            each_measured: list[LanesCost] = []
            for _ in range(rounds):
                _, cost = await lanes_round_of(label, each, naive_events, naive_events, None, each_in_process)
                each_measured.append(cost)
                if naives:
                    await asyncio.sleep(3)
                    naives.append(await naive_case(bench, naive_events, WRITERS, closed=True))
            if naives:
                versus_naive(label, each_measured, naives[-len(each_measured) - 1 :])
                # The added latency at one load: both designs fed the same arrivals, open loop, at 0.7 of the
                # lesser of what each held (the naive's closed loop never queues, a burst into slots does).
                held = min(min(c.runs_per_second for c in each_measured), naives[-1].runs_per_second)
                pace = paced or round(0.7 * held, 1)
                naive_paced = await naive_case(bench, naive_events, naive_events, rate=pace)
                _, keyed_paced = await lanes_round_of(
                    f"{label}, arriving at {pace:.1f} events/s", each, naive_events, naive_events, pace, each_in_process
                )
                naive_p50 = percentile(naive_paced.latencies, 50)
                keyed_p50 = percentile(keyed_paced.latencies, 50)
                print(f"{label} against the naive design, both arriving at {pace:.1f} events/s (open loop)")
                row("naive commit to run started, p50", 1000 * naive_p50, "ms")
                row("keyed commit to run started, p50", 1000 * keyed_p50, "ms")
                row("  keyed less naive", 1000 * (keyed_p50 - naive_p50), "ms")
                row("naive runs/s", naive_paced.runs_per_second, "/s")
                row("keyed runs/s", keyed_paced.runs_per_second, "/s")
            bench.platform.settings = bench.platform.settings.model_copy(update={"limits": limits})

        keyed = {"mode": "keyed", "key": "alias", "max_parallel": WRITERS}
        if "keyed_each" in cases:
            # One event a batch: every event a key of its own, as many slots as the naive design has workflows in
            # flight, the events as many as the naive's. Both then write and run alike, event for event, so what
            # is left between them is the engine's part of a run.
            label = f"keyed, one event a batch ({naive_events:,} keys, {WRITERS} slots, 1 s window)"
            await one_event_a_batch(listener("cost_keyed_each", concurrency=keyed), label)
        if "keyed_one" in cases:
            # The same with the spec's own shape for a run per request ("answer each request on its own thread":
            # keyed by alias, max_events 1): a batch is full at its first event, so it is cut at once, no window.
            label = f"keyed, max_events 1 ({naive_events:,} keys, {WRITERS} slots, no window)"
            body = listener("cost_keyed_one", concurrency=keyed, batch={"window_seconds": 0, "max_events": 1})
            await one_event_a_batch(body, label)
        if "alternate" in cases:
            await alternate(bench, pairs, block)
        if "serial" in cases:
            label = "serial (1 s window)"
            summarize(label, [(await lanes_round(label, listener("cost_serial"), 1))[0] for _ in range(rounds)])
        if "windows" in cases:
            for window in (1.0, 0.3):
                await windows_case(bench, window)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5_000)
    parser.add_argument("--naive-events", type=int, default=1_000)
    parser.add_argument("--cases", default="naive,keyed,serial,windows")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the keyed and serial cases")
    parser.add_argument("--pace", type=float, help="the open loop's events/s (by default 0.7 of the lesser held)")
    parser.add_argument(
        "--writes",
        choices=["same", "http"],
        default="same",
        help="keyed_each and keyed_one: their writes made as the naive design's (same: the platform's write in"
        " this process) or through the HTTP door from the writers' processes",
    )
    parser.add_argument("--pairs", type=int, default=8, help="alternate: pairs of blocks, one of each design")
    parser.add_argument("--block", type=int, default=200, help="alternate: runs in a block")
    args = parser.parse_args()
    cases = set(args.cases.split(","))
    asyncio.run(
        main(args.events, args.naive_events, cases, args.rounds, args.pace, args.writes, args.pairs, args.block)
    )
