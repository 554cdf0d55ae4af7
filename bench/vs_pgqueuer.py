"""The platform's bulk case against a plain queue, back to back on one embedded PostgreSQL: CPU per event.

The yardstick is PgQueuer (Python and asyncpg, as the platform): 50,000 jobs enqueued in batches of 1,000 from
four processes (`Queries.enqueue` of lists) and taken by one `QueueManager` to a handler that does nothing.
The platform's side is `bench.bulk_events`' case: the same 50,000 as `emit_events` of 1,000 through the HTTP
door from four processes into a serial listener (1 s window, up to 1,000 events a batch), a run of two
activities per batch. The same four writer processes enqueue for both. Each side prints its rate (from the first
write to the last job handled, or the last batch's run started) and its CPU per event: every process of its
own (the writers included, so the machine's CPU but for the neighbours' work), split by part; then the ratios.
The whole machine's busy time from /proc/stat is printed too: alone on the machine it is the same figure, on a
machine shared with other work it counts theirs.

PgQueuer's jobs go to a database of their own on the same server. The sides alternate for `--rounds`, each
starting on a server at rest: both databases vacuumed and a checkpoint taken before it, outside its figures (else
the side that follows pays for the dead rows the other left, in its own queries and in autovacuum's: a second
round's PgQueuer once cost five times its first).

Run: .venv/bin/python -m bench.vs_pgqueuer [--events 50000] [--rounds 2] [--batch-size 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import asyncpg
import psutil

from bench.bulk_events import FACT, WRITER_PROCESSES, case
from bench.burst import SPAWN, bench_platform, process_pool
from bench.common import cpu_seconds, load_cpu_seconds, machine_busy_seconds, row

ENTRYPOINT = "noop"


@dataclass
class Side:
    rate: float
    cpu: dict[str, float]
    machine: float


def _consume(dsn: str, jobs: int, batch_size: int, ready: Any, done: Any, stop: Any) -> None:
    """PgQueuer's consumer, a process of its own: takes jobs to a handler that does nothing, says when the
    `jobs`-th was handled, and stops when told."""
    from pgqueuer import Job, Queries, QueueManager

    async def run() -> None:
        conn = await asyncpg.connect(dsn)
        manager = QueueManager(Queries.from_asyncpg_connection(conn))
        handled = 0

        @manager.entrypoint(ENTRYPOINT)
        async def noop(job: Job) -> None:
            nonlocal handled
            handled += 1
            if handled == jobs:
                done.put(time.time())

        async def stopper() -> None:
            await asyncio.to_thread(stop.wait)
            manager.shutdown.set()

        stopping = asyncio.create_task(stopper())
        ready.put(os.getpid())
        try:
            await manager.run(batch_size=batch_size, dequeue_timeout=timedelta(seconds=1))
            await stopping
        finally:
            await conn.close()

    asyncio.run(run())


def _enqueue(dsn: str, jobs: int, per_batch: int) -> tuple[float, float]:
    """In a writer process: enqueue `jobs` no-op jobs in batches of `per_batch`; answers the first start and
    the last end."""
    from pgqueuer import Queries

    async def run() -> tuple[float, float]:
        began = time.time()
        conn = await asyncpg.connect(dsn)
        try:
            queries = Queries.from_asyncpg_connection(conn)
            for start in range(0, jobs, per_batch):
                n = min(per_batch, jobs - start)
                await queries.enqueue([ENTRYPOINT] * n, [None] * n, [0] * n)
        finally:
            await conn.close()
        return began, time.time()

    return asyncio.run(run())


def _warm() -> None:
    """Hold a writer process a moment, once it has imported this module (and PgQueuer), so that each of the
    pool's processes takes one."""
    import pgqueuer  # noqa: F401

    time.sleep(0.5)


async def pgqueuer_database(bench_url: str, name: str = "pgqueuer") -> str:
    """A database of PgQueuer's own (`name`) beside the platform's, its schema installed."""
    from pgqueuer import AsyncpgDriver, Queries

    admin = await asyncpg.connect(bench_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    head, query = bench_url.split("?", 1) if "?" in bench_url else (bench_url, "")
    dsn = head.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")
    conn = await asyncpg.connect(dsn)
    try:
        await Queries(AsyncpgDriver(conn)).install()
    finally:
        await conn.close()
    return dsn


async def at_rest(*dsns: str) -> None:
    """Each database vacuumed (its dead rows gone, its statistics current), then a checkpoint: what a side
    measures next is its own work, not what the one before left behind."""
    for dsn in dsns:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute("VACUUM (ANALYZE)")
        finally:
            await conn.close()
    conn = await asyncpg.connect(dsns[0])
    try:
        await conn.execute("CHECKPOINT")
    finally:
        await conn.close()
    await asyncio.sleep(1)


def _postgres_seconds(postmaster: int) -> float:
    """The PostgreSQL server's CPU seconds so far: its postmaster, its live backends and those that exited."""
    server = psutil.Process(postmaster)
    times = server.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for backend in server.children():
        try:
            times = backend.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


async def pgqueuer_side(bench: Any, dsn: str, jobs: int, per_batch: int, batch_size: int) -> Side:
    ready, done, stop = SPAWN.Queue(), SPAWN.Queue(), SPAWN.Event()
    consumer = SPAWN.Process(target=_consume, args=(dsn, jobs, batch_size, ready, done, stop), daemon=True)
    consumer.start()
    consumer_pid = await asyncio.to_thread(ready.get, True, 60)
    async with process_pool(WRITER_PROCESSES) as pool:
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(pool, _warm) for _ in range(WRITER_PROCESSES)))
        await asyncio.sleep(1)  # the consumer's first polls settle
        start = (
            cpu_seconds(consumer_pid),
            load_cpu_seconds(),
            _postgres_seconds(bench.postgres_pid),
            machine_busy_seconds(),
        )
        share = jobs // WRITER_PROCESSES
        spans = await asyncio.gather(
            *(
                loop.run_in_executor(pool, _enqueue, dsn, share + (jobs % WRITER_PROCESSES if n == 0 else 0), per_batch)
                for n in range(WRITER_PROCESSES)
            )
        )
        handled_at = await asyncio.to_thread(done.get, True, 900)
        end = (
            cpu_seconds(consumer_pid),
            load_cpu_seconds(),
            _postgres_seconds(bench.postgres_pid),
            machine_busy_seconds(),
        )
    stop.set()
    await asyncio.to_thread(consumer.join, 30)
    began = min(b for b, _ in spans)
    cpu = {
        "consumer": end[0] - start[0],
        "PostgreSQL": end[2] - start[2],
        "writers": end[1] - start[1],
    }
    return Side(jobs / (handled_at - began), cpu, end[3] - start[3])


async def platform_side(bench: Any, events: int) -> Side:
    busy = machine_busy_seconds()
    figures = await case(bench, "the platform: emit_events of 1,000 into a serial listener", events, 1000)
    return Side(figures.rate, figures.cpu, machine_busy_seconds() - busy)


def report(label: str, side: Side, events: int) -> None:
    print(f"{label}:")
    row("per second", side.rate, "events/s")
    row("CPU per event, every process of its own", 1_000_000 * sum(side.cpu.values()) / events, "us")
    for part, seconds in side.cpu.items():
        row(f"  {part}", 1_000_000 * seconds / events, "us")
    row("the whole machine's busy time per event (neighbours too)", 1_000_000 * side.machine / events, "us")


def ratio(label: str, value: float) -> None:
    print(f"  {label:<58} {value:>12.2f} x")


async def main(events: int, rounds: int, per_batch: int, batch_size: int) -> None:
    async with bench_platform() as bench:
        saved = await bench.platform.command({"command": "save_event_type", "name": "bench.fact", "schema": FACT})
        assert saved["status"] == "success", saved
        dsn = await pgqueuer_database(bench.database_url)
        print(f"vs PgQueuer: {events:,} events a side, writers in {WRITER_PROCESSES} processes, {os.cpu_count()} cores")
        for n in range(rounds):
            await at_rest(bench.database_url, dsn)
            queue = await pgqueuer_side(bench, dsn, events, per_batch, batch_size)
            report(f"round {n + 1}, PgQueuer (batches of {per_batch:,}, batch_size {batch_size})", queue, events)
            await at_rest(bench.database_url, dsn)
            platform = await platform_side(bench, events)
            report(f"round {n + 1}, the platform", platform, events)
            own = sum(platform.cpu.values()) / sum(queue.cpu.values())
            print(f"round {n + 1}, the platform against PgQueuer:")
            ratio("rate", platform.rate / queue.rate)
            ratio("CPU per event, every process of its own", own)
            ratio("the whole machine's busy time (neighbours too)", platform.machine / queue.machine)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--per-batch", type=int, default=1_000, help="jobs a PgQueuer enqueue")
    parser.add_argument("--batch-size", type=int, default=10, help="jobs a PgQueuer dequeue (its default)")
    args = parser.parse_args()
    asyncio.run(main(args.events, args.rounds, args.per_batch, args.batch_size))
