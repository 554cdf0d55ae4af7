"""A soak: a steady rate of writes for a set time into listeners of each mode, with retention set short.

Shows whether what the platform keeps, and how late it runs, stay flat once retention deletes as fast as the
writes add: on the Temporal dev server and an embedded PostgreSQL, with the API in a process of its own and
the writer in another (keep-alive clients through the HTTP door, at `--rate` writes/s spread over 200 aliases),
the worker, router and retention rounds in this one. One session, whose events are kept `--retention` seconds,
takes the writes into four listeners: serial, keyed by alias (16 key slots), parallel (4 slots), each of whose
runs reports its start, and a serial `distinct_by` object action (a status view). Every 30 s a small session is
opened, written to and closed with a closed retention of `--retention` seconds, so closed sessions are deleted
as they come due.

Every minute it prints the database's size, each table's live and dead rows and rows deleted since the last
minute, and the delay the platform added to the runs that started in that minute (p50 and p99: a run's start
less its batch's first commit and the 1 s window); at the end, the bytes kept per event kept, and how far the
size and the p99 moved from half-time to the end. It stops by itself after `--minutes` and a short drain.

Run: .venv/bin/python -m bench.soak [--minutes 30] [--rate 200] [--retention 300]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from temporalio import activity

from bench.burst import bench_platform, write_through_http
from bench.common import percentile, row
from bench.workflows import BenchSoakRun
from orchestrator.app_loader import UserApp
from orchestrator.engine.wiring import platform_components
from orchestrator.engine.worker import build_worker, settle_heap
from orchestrator.platform import Platform

KEYS = 200
WINDOW_SECONDS = 1.0
WRITERS = 8
SIDE_SESSION_SECONDS = 30.0
SIDE_SESSION_WRITES = 20
# After the last write, how long the soak waits for the last batches before its last figures.
DRAIN_SECONDS = 15.0
TABLES = (
    "events",
    "lane_queue",
    "batches",
    "outcomes",
    "executions",
    "thread_items",
    "objects",
    "lanes",
    "sessions",
    "session_retention",
)


def listeners() -> list[dict[str, Any]]:
    common = {"filter": {"types": ["object.written"], "aliases": ["bench/**"]}}
    batch = {"window_seconds": WINDOW_SECONDS, "max_events": 1000}
    run = {"type": "workflow", "workflow": "bench_soak_run"}
    return [
        {"name": "soak-serial", **common, "batch": batch, "action": run},
        {
            "name": "soak-keyed",
            **common,
            "concurrency": {"mode": "keyed", "key": "alias", "max_parallel": 16},
            "batch": batch,
            "action": run,
        },
        {
            "name": "soak-parallel",
            **common,
            "concurrency": {"mode": "parallel", "max_parallel": 4},
            "batch": batch,
            "action": run,
        },
        {
            "name": "soak-view",
            **common,
            "batch": {**batch, "distinct_by": "alias"},
            "action": {"type": "object", "alias": "views/soak", "value": {"type": "view", "n": "{{ batch.count }}"}},
        },
    ]


@dataclass
class Starts:
    """Runs as they start (wall clock), with their listener and their batch's events; taken a minute at a time."""

    runs: list[tuple[float, str, list[int]]] = field(default_factory=list)

    @activity.defn(name="bench.soak_started")
    async def soak_started(self, listener: str, event_ids: list[int]) -> None:
        self.runs.append((time.time(), listener, event_ids))

    def take(self) -> list[tuple[float, str, list[int]]]:
        taken, self.runs = self.runs, []
        return taken


async def added_delays(conn: asyncpg.Connection, runs: list[tuple[float, str, list[int]]]) -> list[float]:
    """Per run: its start less its batch's first commit and the window (events are read while still kept)."""
    firsts = [min(ids) for _, _, ids in runs if ids]
    commits = {
        r["id"]: float(r["at"])
        for r in await conn.fetch(
            "SELECT id, extract(epoch FROM created_at)::float8 AS at FROM orchestrator.events WHERE id = ANY"
            " ($1::bigint[])",
            firsts,
        )
    }
    return [t - commits[min(ids)] - WINDOW_SECONDS for t, _, ids in runs if ids and min(ids) in commits]


async def table_rows(conn: asyncpg.Connection) -> dict[str, tuple[int, int, int]]:
    """Per table: live rows, dead rows, rows deleted in all (the statistics' view of them)."""
    rows = await conn.fetch(
        "SELECT relname, n_live_tup, n_dead_tup, n_tup_del FROM pg_stat_user_tables WHERE relname = ANY ($1)",
        list(TABLES),
    )
    return {r["relname"]: (int(r["n_live_tup"]), int(r["n_dead_tup"]), int(r["n_tup_del"])) for r in rows}


async def side_sessions(platform: Platform, retention: float, stop: asyncio.Event) -> None:
    """Small sessions opened, written to and closed, to be deleted once their closed retention is past."""
    while not stop.is_set():
        opened = await platform.command({"command": "open_session", "retention": {"closed_session_seconds": retention}})
        sid = opened["session"]["id"]
        for n in range(SIDE_SESSION_WRITES):
            body = {"command": "write_object", "session_id": sid, "alias": f"side/{n}", "value": {"type": "s"}}
            await platform.command(body)
        await platform.command({"command": "close_session", "session_id": sid})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), SIDE_SESSION_SECONDS)


@dataclass
class Minute:
    minute: int
    size: int
    p50: float
    p99: float


async def report_minute(
    conn: asyncpg.Connection, starts: Starts, minute: int, deleted_before: dict[str, int]
) -> tuple[Minute, dict[str, int]]:
    size = int(await conn.fetchval("SELECT pg_database_size(current_database())"))
    delays = await added_delays(conn, starts.take())
    tables = await table_rows(conn)
    p50, p99 = percentile(delays, 50), percentile(delays, 99)
    print(
        f"minute {minute}: database {size / 2**20:,.1f} MiB; {len(delays)} runs started, added delay"
        f" p50 {p50:.2f} s, p99 {p99:.2f} s"
    )
    for name in TABLES:
        live, dead, deleted = tables.get(name, (0, 0, 0))
        print(
            f"  {name:<20} live {live:>10,}  dead {dead:>9,}  deleted this minute"
            f" {deleted - deleted_before.get(name, 0):>9,}"
        )
    return Minute(minute, size, p50, p99), {name: counts[2] for name, counts in tables.items()}


async def bytes_per_event(conn: asyncpg.Connection) -> tuple[dict[str, int], int]:
    """What each of the platform's tables holds (with its indexes and TOAST), and the events they keep."""
    rows = await conn.fetch(
        "SELECT relname, pg_total_relation_size(relid) AS bytes FROM pg_stat_user_tables"
        " WHERE schemaname = 'orchestrator' ORDER BY bytes DESC"
    )
    kept = int(await conn.fetchval("SELECT count(*) FROM orchestrator.events"))
    return {r["relname"]: int(r["bytes"]) for r in rows}, kept


def flatness(minutes: list[Minute]) -> None:
    """How far the size and the p99 moved from half-time (or minute 10, whichever is sooner) to the end."""
    start = min(10, max(len(minutes) // 2, 1))
    steady = [m for m in minutes if m.minute >= start]
    if len(steady) < 2:
        return
    sizes = [m.size for m in steady]
    p99s = [m.p99 for m in steady if m.p99 == m.p99]
    print(f"from minute {start} to {steady[-1].minute}:")
    row("database size, largest over smallest", 100 * (max(sizes) / min(sizes) - 1), "%")
    if p99s and min(p99s) > 0:
        row("added delay p99, largest over smallest", 100 * (max(p99s) / min(p99s) - 1), "%")


async def main(minutes: float, rate: float, retention: float) -> None:
    async with bench_platform() as bench:
        platform, client = bench.platform, bench.client
        platform.settings = platform.settings.model_copy(update={"task_queue": f"soak-{uuid.uuid4().hex[:8]}"})
        starts = Starts()
        app = UserApp(name="soak", workflows=[BenchSoakRun], activities=[starts.soak_started])
        for body in listeners():
            reply = await platform.command({"command": "save_listener", "listener": body})
            assert reply["status"] == "success", reply
        opened = await platform.command({"command": "open_session", "retention": {"event_seconds": retention}})
        session = opened["session"]["id"]
        components = platform_components(platform, client, app)
        worker = build_worker(client, platform.settings, app, components.workflows, components.activities)
        settle_heap()  # as the platform's worker process does once started
        tasks = [asyncio.create_task(worker.run()), *(asyncio.create_task(t()) for t in components.background_tasks)]
        stop = asyncio.Event()
        tasks.append(asyncio.create_task(side_sessions(platform, retention, stop)))
        conn = await asyncpg.connect(bench.database_url)
        print(
            f"soak: {minutes:g} min at {rate:g} writes/s over {KEYS} aliases through the HTTP door ({bench.api}),"
            f" retention {retention:g} s; listeners serial, keyed, parallel (runs) and a distinct_by object action"
        )
        try:
            aliases = [f"bench/{n % KEYS}" for n in range(int(minutes * 60 * rate))]
            writing = asyncio.create_task(write_through_http(bench.api, session, aliases, WRITERS, rate))
            began = time.monotonic()
            end = began + minutes * 60 + DRAIN_SECONDS
            reports: list[Minute] = []
            deleted: dict[str, int] = {}
            while (next_minute := began + 60 * (len(reports) + 1)) <= end:
                await asyncio.sleep(max(next_minute - time.monotonic(), 0))
                report, deleted = await report_minute(conn, starts, len(reports) + 1, deleted)
                reports.append(report)
            await writing
            await asyncio.sleep(max(end - time.monotonic(), 0))
            stop.set()
            sizes, kept = await bytes_per_event(conn)
            print("at the end:")
            row("events kept", kept, "")
            row("bytes kept per event kept (every table, indexes and TOAST)", sum(sizes.values()) / max(kept, 1), "B")
            for name, size in list(sizes.items())[:8]:
                row(f"  {name}", size / max(kept, 1), "B")
            row("events the retention keeps at this rate (rate times retention)", rate * retention, "")
            flatness(reports)
        finally:
            stop.set()
            await conn.close()
            await worker.shutdown()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=200.0, help="writes per second")
    parser.add_argument("--retention", type=float, default=300.0, help="seconds events and closed sessions are kept")
    args = parser.parse_args()
    asyncio.run(main(args.minutes, args.rate, args.retention))
