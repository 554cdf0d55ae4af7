"""A listener's own throttle (`throttle`) at its limit under a burst, on the Temporal dev server and an embedded
PostgreSQL, the worker and router in this process.

- `limit`: E events written at once to K keys of a keyed listener (`max_events` 1, `max_parallel` 16) whose
  throttle lets N runs go per S seconds, whatever the key: runs per S seconds from the first start to the last
  (the limit is N), the most in any window of S seconds (never more than N), how long past its turn each run
  started (its turn: S seconds after the start N before it; p50, p99, max), and whether every event reached a run
  once. A lane held by the throttle waits on its own timer, which wakes it a second early on this server and
  waits out the rest (docs/architecture.md).
- `per_key`: the burst over K/4 keys with the throttle per key (`key: alias`): the most runs of one key in any
  window (N at most), of all keys together (K/4 times N at most), and the time from the burst to the last start
  beside the least the throttle allows (a key's lane runs one run at a time besides).
- `read`: PostgreSQL alone, a lane's read (`orchestrator_lane_snapshot`) of 1,000 waiting events of a listener
  with no throttle, one throttle for the listener, one per alias (read from its column) and one per
  `data.rev` (a path into the event's data, walked per event; an object's events carry its rev, not its value):
  ms a read, p50 of 50.

Run: .venv/bin/python -m bench.throttle [--cases limit,per_key,read] [--events 120] [--keys 40] [--runs 5]
     [--per-seconds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from bench.burst import Bench, Starts, app_engine, bench_platform
from bench.common import percentile, row
from bench.workflows import BenchRun
from orchestrator.app_loader import UserApp


@asynccontextmanager
async def engine(bench: Bench, starts: Starts) -> AsyncIterator[None]:
    bench.platform.settings = bench.platform.settings.model_copy(update={"task_queue": f"bench-{uuid.uuid4().hex[:8]}"})
    app = UserApp(name="bench", workflows=[BenchRun], activities=[starts.run_started])
    async with app_engine(bench.platform, bench.client, app, say=True):
        yield


def most_in_a_window(starts: list[float], seconds: float) -> int:
    ordered = sorted(starts)
    return max((sum(1 for t in ordered[n:] if t < at + seconds - 1e-6) for n, at in enumerate(ordered)), default=0)


def lateness(starts: list[float], runs: int, seconds: float, written: float) -> list[float]:
    """How long past its turn each start came: its turn is when the batch was written, or `seconds` after the
    start `runs` before it, whichever is later."""
    ordered = sorted(starts)
    return [t - max(written, ordered[n - runs] + seconds if n >= runs else written) for n, t in enumerate(ordered)]


async def counted(bench: Bench, session: str, listener: str) -> list[tuple[float, list[str]]]:
    """The listener's counted batches: when each was taken (the database's clock), and its keys."""
    rows = await bench.platform.store.pool.fetch(
        "SELECT extract(epoch FROM created_at)::float8 AS at, throttle_keys FROM orchestrator.batches"
        " WHERE session_id = $1 AND listener = $2 AND counted ORDER BY created_at",
        session,
        listener,
    )
    return [(float(r["at"]), list(r["throttle_keys"])) for r in rows]


async def write_all(bench: Bench, session: str, objects: list[tuple[str, dict[str, Any]]]) -> None:
    """The objects written in one command (one statement): a burst."""
    reply = await bench.platform.command(
        {
            "command": "write_objects",
            "session_id": session,
            "objects": [{"alias": alias, "value": value} for alias, value in objects],
        }
    )
    assert reply["status"] == "success", reply


async def burst_case(bench: Bench, name: str, events: int, keys: int, runs: int, per: float, keyed: bool) -> Any:
    platform = bench.platform
    throttle: dict[str, Any] = {"per_seconds": per, "runs": runs, **({"key": "alias"} if keyed else {})}
    body = {
        "name": name,
        "filter": {"types": ["object.written"], "aliases": ["items/*"]},
        "concurrency": {"mode": "keyed", "key": "alias", "max_parallel": 16},
        "batch": {"max_events": 1},
        "action": {"type": "workflow", "workflow": "bench_run"},
        "throttle": throttle,
    }
    saved = await platform.command({"command": "save_listener", "listener": body})
    assert saved["status"] == "success", saved
    session = (await platform.command({"command": "open_session"}))["session"]["id"]
    starts = Starts(expected=events)
    async with engine(bench, starts):
        written = time.time()
        await write_all(bench, session, [(f"items/{n % keys}", {"type": "item", "n": n}) for n in range(events)])
        await asyncio.wait_for(starts.all_started.wait(), timeout=events / runs * per * (keys if keyed else 1) + 120)
    await platform.command({"command": "delete_listener", "name": name})
    taken = sorted(i for _, ids in starts.runs for i in ids)
    assert len(taken) == len(set(taken)) == events, f"{len(taken)} events ran, {len(set(taken))} once, of {events}"
    return written, await counted(bench, session, name)


async def limit_case(bench: Bench, events: int, keys: int, runs: int, per: float) -> dict[str, float]:
    written, batches = await burst_case(bench, "burst", events, keys, runs, per, keyed=False)
    at = [t for t, _ in batches]
    late = lateness(at, runs, per, written)
    span = at[-1] - at[0]
    return {
        "runs": float(len(at)),
        f"runs per {per:g} s, first start to last": (len(at) - runs) / span * per if span else float("nan"),
        f"most in any {per:g} s": float(most_in_a_window(at, per)),
        "past its turn p50 (ms)": 1000 * percentile(late, 50),
        "past its turn p99 (ms)": 1000 * percentile(late, 99),
        "past its turn max (ms)": 1000 * max(late),
        "burst to last start (s)": at[-1] - written,
    }


async def per_key_case(bench: Bench, events: int, keys: int, runs: int, per: float) -> dict[str, float]:
    written, batches = await burst_case(bench, "by_key", events, keys, runs, per, keyed=True)
    by_key: dict[str, list[float]] = {}
    for t, ks in batches:
        for k in ks:
            by_key.setdefault(k, []).append(t)
    at = [t for t, _ in batches]
    each = -(-events // keys)
    return {
        "keys": float(len(by_key)),
        f"most of one key in any {per:g} s": float(max(most_in_a_window(v, per) for v in by_key.values())),
        f"most of all keys in any {per:g} s": float(most_in_a_window(at, per)),
        "burst to last start (s)": at[-1] - written,
        "the throttle's least for it (s)": (-(-each // runs) - 1) * per,
    }


async def read_case(bench: Bench) -> dict[str, float]:
    """A lane's read of 1,000 waiting events, by its listener's throttle: none, one for the listener, per a path."""
    platform = bench.platform
    figures: dict[str, float] = {}
    shapes: dict[str, dict[str, Any] | None] = {
        "no throttle": None,
        "one throttle for the listener": {"per_seconds": 60, "runs": 5},
        "a throttle per alias": {"per_seconds": 60, "runs": 5, "key": "alias"},
        "a throttle per data.rev": {"per_seconds": 60, "runs": 5, "key": "data.rev"},
    }
    for n, (label, throttle) in enumerate(shapes.items()):
        name = f"read{n}"
        body: dict[str, Any] = {
            "name": name,
            "filter": {"types": ["object.written"], "aliases": [f"reads{n}/*"]},
            "batch": {"window_seconds": 300, "max_events": 1000},
            "action": {"type": "workflow", "workflow": "bench_run"},
        }
        if throttle is not None:
            body["throttle"] = throttle
        saved = await platform.command({"command": "save_listener", "listener": body})
        assert saved["status"] == "success", saved
        session = (await platform.command({"command": "open_session"}))["session"]["id"]
        await write_all(
            bench, session, [(f"reads{n}/{k}", {"type": "read", "customer": f"c{k % 50}"}) for k in range(1000)]
        )
        await platform.store.lanes.route_page(session, 1000, 16)
        times = []
        async with platform.store.pool.acquire() as conn:
            for _ in range(50):
                began = time.perf_counter()
                await conn.fetchval("SELECT orchestrator.orchestrator_lane_snapshot($1, $2, '_', 5000)", session, name)
                times.append(time.perf_counter() - began)
        figures[label] = 1000 * percentile(times, 50)
        await platform.command({"command": "delete_listener", "name": name})
    return figures


async def main(cases: set[str], events: int, keys: int, runs: int, per: float) -> None:
    async with bench_platform() as bench:
        if "limit" in cases:
            figures = await limit_case(bench, events, keys, runs, per)
            print(f"limit: {events} events at once over {keys} keys, throttle {runs} per {per:g} s for the listener")
            for label, value in figures.items():
                row(label.removesuffix(" (ms)").removesuffix(" (s)"), value, "ms" if "(ms)" in label else "")
        if "per_key" in cases:
            figures = await per_key_case(bench, events, keys // 4 or 1, runs, per)
            print(f"per_key: {events} events at once over {keys // 4 or 1} keys, throttle {runs} per {per:g} s a key")
            for label, value in figures.items():
                row(label.removesuffix(" (ms)").removesuffix(" (s)"), value, "ms" if "(ms)" in label else "")
        if "read" in cases:
            print("read: a lane's snapshot of 1,000 waiting events, p50 of 50 (PostgreSQL alone)")
            for label, value in (await read_case(bench)).items():
                row(label, value, "ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="limit,per_key,read")
    parser.add_argument("--events", type=int, default=120)
    parser.add_argument("--keys", type=int, default=40)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--per-seconds", type=float, default=2.0)
    args = parser.parse_args()
    asyncio.run(main(set(args.cases.split(",")), args.events, args.keys, args.runs, args.per_seconds))
