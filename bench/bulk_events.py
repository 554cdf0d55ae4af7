"""Bulk writes end to end: single `write_object` requests against `emit_events` of 100 and of 1,000 per request.

Measured in one run on the Temporal dev server and an embedded PostgreSQL, with the API in a process of its
own and the writers in four more (keep-alive clients through the HTTP door), the worker and router in this
one. Each case feeds a serial listener (1 s window, up to 1,000 events a batch) whose run workflow runs two
activities (the last case: one local activity, the cheapest run there is), and prints: events/s from the
first write to the last batch's run starting, the writers' own pace, events/s from the first write to the
router queueing the last into the listener's lane, the door's CPU per event (the API process), and the delay
added beyond the window (p50, p99 per batch).

A last case (`drain`) times the lane alone: the listener paused while everything is written and routed, then
resumed; the run is one local activity.

Run: .venv/bin/python -m bench.bulk_events [--events 5000] [--bulk-events 50000] [--cases single,100,1000,light,drain]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg

from bench.batch_cost import two_activity_engine
from bench.burst import SPAWN, Starts, added_delays, bench_platform, engine, process_pool, write_through_http
from bench.common import CpuMeter, load_cpu_seconds, percentile, row
from bench.keep_alive import KeepAlive

WRITERS = 32
WRITER_PROCESSES = 4
FACT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def _post(url: str, bodies: list[dict[str, Any]], writers: int) -> tuple[float, float]:
    """POST every body through the door with `writers` keep-alive clients; answers the first start, last end."""

    async def run() -> tuple[float, float]:
        queue = list(reversed(bodies))
        began = time.time()

        async def writer() -> None:
            http = KeepAlive(url)
            try:
                while queue:
                    reply = await http.post("/v1/commands", queue.pop())
                    assert reply["status"] == "success", reply
            finally:
                await http.aclose()

        await asyncio.gather(*(writer() for _ in range(min(writers, len(bodies)))))
        return began, time.time()

    return asyncio.run(run())


async def emit_through_http(url: str, session: str, total: int, per_request: int) -> tuple[float, float]:
    """`emit_events` of `per_request` each, from the writer processes; answers the first start and last end."""
    bodies = [
        {
            "command": "emit_events",
            "session_id": session,
            "events": [{"type": "bench.fact", "data": {"n": n}} for n in range(start, min(start + per_request, total))],
        }
        for start in range(0, total, per_request)
    ]
    return await post_all(url, bodies)


async def post_all(url: str, bodies: list[dict[str, Any]]) -> tuple[float, float]:
    """POST every body through the door from the writer processes; answers the first start and last end."""
    processes = min(WRITER_PROCESSES, len(bodies))
    writers = max(WRITERS // processes, 1)
    async with process_pool(processes) as pool:
        loop = asyncio.get_running_loop()
        spans = await asyncio.gather(
            *(loop.run_in_executor(pool, _post, url, bodies[n::processes], writers) for n in range(processes))
        )
    return min(b for b, _ in spans), max(e for _, e in spans)


# The router's position in a session: the last event id it has queued from (one indexed read).
ROUTED_POSITION = "SELECT routed_event_id FROM orchestrator.routing_cursors WHERE session_id = $1"


async def routed_position(platform: Any, session: str) -> int:
    """The router's position in the session, read on the platform's own connection."""
    async with platform.store.transaction() as conn:
        position = await conn.fetchval(ROUTED_POSITION, session)
    return int(position or 0)


def _poll_positions(database_url: str, session: str, stop: Any, out: Any) -> None:
    """The router's position in the session over time (every 20 ms), polled from a process of its own so
    that the polling is not counted as the worker's CPU; sent to `out` once `stop` is set."""

    async def run() -> list[tuple[float, int]]:
        conn = await asyncpg.connect(database_url)
        out.put(None)  # started: the meter's window opens only now
        seen: list[tuple[float, int]] = []
        try:
            while not stop.is_set():
                position = await conn.fetchval(ROUTED_POSITION, session)
                seen.append((time.time(), int(position or 0)))
                await asyncio.sleep(0.02)
        finally:
            await conn.close()
        return seen

    out.put(asyncio.run(run()))


@dataclass
class Positions:
    """The router's positions over a block (filled in as it ends), and the process polling them: not the
    platform, so not metered (its start, an interpreter importing the bench, once cost 30 us an event)."""

    seen: list[tuple[float, int]]
    pid: int | None


@contextlib.asynccontextmanager
async def router_positions(database_url: str, session: str) -> AsyncIterator[Positions]:
    """The router's position over the block (`_poll_positions`), from once the poller has started."""
    stop, out = SPAWN.Event(), SPAWN.Queue()
    poller = SPAWN.Process(target=_poll_positions, args=(database_url, session, stop, out), daemon=True)
    poller.start()
    await asyncio.to_thread(out.get, True, 60)
    seen: list[tuple[float, int]] = []
    try:
        yield Positions(seen, poller.pid)
    finally:
        stop.set()
        seen.extend(await asyncio.to_thread(out.get, True, 60))
        await asyncio.to_thread(poller.join, 10)


@dataclass
class Figures:
    """What a case measured: events/s from the first write to the last run started, and the CPU seconds of
    each part over that time (the platform's parts, and the writers', the load)."""

    rate: float
    cpu: dict[str, float]


async def case(bench: Any, label: str, events: int, per_request: int | None, light: bool = False) -> Figures:
    """One case; `light`: the run workflow is one local activity (`bench_run`), not two activities."""
    platform = bench.platform
    starts = Starts(expected=events)
    platform.settings = platform.settings.model_copy(update={"task_queue": f"bench-{uuid.uuid4().hex[:8]}"})
    name = f"bulk_{per_request or 1}{'_light' if light else ''}"
    types = ["object.written"] if per_request is None else ["bench.fact"]
    body = {
        "name": name,
        "filter": {"types": types, **({"aliases": ["bench/**"]} if per_request is None else {})},
        "batch": {"window_seconds": 1, "max_events": 1000},
        "action": {"type": "workflow", "workflow": "bench_run" if light else "bench_run_two"},
    }
    reply = await platform.command({"command": "save_listener", "listener": body})
    assert reply["status"] == "success", reply
    session = (await platform.command({"command": "open_session"}))["session"]["id"]
    running = engine if light else two_activity_engine
    async with running(platform, bench.client, starts), router_positions(bench.database_url, session) as polled:
        meter = CpuMeter(bench.server_pid, bench.postgres_pid, not_platform={polled.pid})
        meter.start()
        writers = load_cpu_seconds()
        if per_request is None:
            aliases = [f"bench/{n % 100}" for n in range(events)]
            began, written_at = await write_through_http(
                bench.api, session, aliases, writers=WRITERS, processes=WRITER_PROCESSES
            )
        else:
            began, written_at = await emit_through_http(bench.api, session, events, per_request)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(starts.all_started.wait(), timeout=900)
        cpu = meter.stop()
        writers = load_cpu_seconds() - writers
    await platform.command({"command": "delete_listener", "name": name})
    written = await platform.store.list_events(session, limit=events + 10, types=types)
    commits = {e.id: e.created_at.timestamp() for e in written}
    routed_last = min(t for t, position in polled.seen if position >= max(commits))
    added = added_delays(starts.runs, commits, dict.fromkeys(commits, "_"), 1.0)
    delivered = sum(len(ids) for _, ids in starts.runs)
    last = max(t for t, _ in starts.runs)
    print(f"{label}: {events:,} events, {len(starts.runs)} batches, {delivered:,} delivered")
    row("events/s, first write to last run started", events / (last - began), "events/s")
    row("events/s written (the writers' own pace)", events / (written_at - began), "events/s")
    row("events/s routed into the listener's lane", events / (routed_last - began), "events/s")
    row("the door's CPU per event (the API process)", 1_000_000 * cpu["API"] / events, "us")
    row("CPU per event, all parts", 1_000_000 * sum(cpu.values()) / events, "us")
    for part, seconds in cpu.items():
        row(f"  {part}", 1_000_000 * seconds / events, "us")
    row("added delay beyond the window, p50 (per batch)", 1000 * percentile(added, 50), "ms")
    row("added delay beyond the window, p99 (per batch)", 1000 * percentile(added, 99), "ms")
    return Figures(events / (last - began), {**cpu, "writers": writers})


async def drain(bench: Any, events: int) -> None:
    """The lane's own pace: the listener paused while `emit_events` of 1,000 are written and routed, then
    resumed, and timed from the resume to the last batch's run starting (runs of one local activity). What
    the end-to-end cases add to it is the machine's two cores shared with the writers, the door and the
    router."""
    platform = bench.platform
    starts = Starts(expected=events)
    platform.settings = platform.settings.model_copy(update={"task_queue": f"bench-{uuid.uuid4().hex[:8]}"})
    name = "bulk_drain"
    body = {
        "name": name,
        "filter": {"types": ["bench.fact"]},
        "batch": {"window_seconds": 1, "max_events": 1000},
        "action": {"type": "workflow", "workflow": "bench_run"},
    }
    assert (await platform.command({"command": "save_listener", "listener": body}))["status"] == "success"
    session = (await platform.command({"command": "open_session"}))["session"]["id"]
    assert (await platform.command({"command": "pause_listener", "name": name}))["status"] == "success"
    async with engine(platform, bench.client, starts):
        await emit_through_http(bench.api, session, events, 1000)
        last_id = max(e.id for e in await platform.store.list_events(session, limit=events + 10, types=["bench.fact"]))
        for _ in range(18_000):  # 15 minutes at most
            if await routed_position(platform, session) >= last_id:
                break
            await asyncio.sleep(0.05)
        meter = CpuMeter(bench.server_pid, bench.postgres_pid)
        meter.start()
        resumed = time.time()
        assert (await platform.command({"command": "resume_listener", "name": name}))["status"] == "success"
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(starts.all_started.wait(), timeout=900)
        cpu = meter.stop()
    await platform.command({"command": "delete_listener", "name": name})
    last = max(t for t, _ in starts.runs)
    print(f"a serial lane's own pace, everything routed first: {events:,} events, {len(starts.runs)} batches")
    row("events/s, resume to last run started", events / (last - resumed), "events/s")
    row("a batch's cycle (1,000 events)", 1000 * (last - resumed) / len(starts.runs), "ms")
    for part, seconds in cpu.items():
        row(f"  CPU per event, {part}", 1_000_000 * seconds / events, "us")


async def main(events: int, bulk_events: int, cases: set[str]) -> None:
    async with bench_platform() as bench:
        saved = await bench.platform.command({"command": "save_event_type", "name": "bench.fact", "schema": FACT})
        assert saved["status"] == "success", saved
        print(f"bulk events: dev server + embedded PostgreSQL, writers through the HTTP door ({bench.api})")
        if "single" in cases:
            await case(bench, "single write_object requests (32 clients)", events, None)
        if "100" in cases:
            await case(bench, "emit_events of 100 per request", bulk_events, 100)
        if "1000" in cases:
            await case(bench, "emit_events of 1,000 per request", bulk_events, 1000)
        if "light" in cases:
            await case(bench, "emit_events of 1,000, a run of one local activity", bulk_events, 1000, light=True)
        if "drain" in cases:
            await drain(bench, bulk_events)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5_000)
    parser.add_argument("--bulk-events", type=int, default=50_000)
    parser.add_argument("--cases", default="single,100,1000,light,drain")
    args = parser.parse_args()
    asyncio.run(main(args.events, args.bulk_events, set(args.cases.split(","))))
