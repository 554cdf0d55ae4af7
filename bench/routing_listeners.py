"""Routing against the number of listeners: the same writes beside 0, 200 and 1,000 listeners that match nothing.

Measured in one run on the Temporal dev server and an embedded PostgreSQL, with the API in a process of its own,
the writers in four more (keep-alive clients through the HTTP door), the worker and router in this one.

- `aliases`: 20,000 objects written with `write_objects` of 1,000 into one listener whose action writes an object
  (serial, 0.2 s window), beside N listeners of `object.**`, each on an alias tree of its own (`tenant{i}/**`):
  writes acknowledged/s, events/s routed (first write to the router's position passing the last), and end to
  end (first write to the listener's lane having taken the last).
- `where`: `emit_events` of 1,000 (50,000 events of `bench.fact`) into one serial listener whose run runs two
  activities, beside N listeners of `bench.fact` told apart by a `where` no event meets (`data.customer` eq
  their own): events/s from the first write to the last run started, and CPU per event of every part.
- `deleted` (not run by default): the `where` case's writes beside N listeners of `bench.fact` alone, which would
  take every event, deleted before the first write: a deleted listener leaves routing whole (0025).
- `versions` (not run by default): the `where` case's writes into its serial listener saved N times before its
  last version, the router's upkeep let prune the ended versions' probes first (0026).

Each figure is printed beside its ratio to the case with no other listener. The listeners of a case are deleted
before the next.

Run: .venv/bin/python -m bench.routing_listeners [--listeners 0,200,1000] [--cases aliases,where,deleted,versions]
     [--events 20000] [--bulk-events 50000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
import uuid
from typing import Any

from bench.batch_cost import two_activity_engine
from bench.bulk_events import emit_through_http, post_all, routed_position
from bench.burst import Bench, Starts, bench_platform, engine
from bench.common import CpuMeter, row

FACT = {"type": "object", "properties": {"n": {"type": "integer"}, "customer": {"type": "string"}}}


async def quiet_listeners(bench: Bench, count: int, shape: str) -> list[str]:
    """`count` listeners that match none of the benchmark's events (`deleted`: that match them all, and are
    deleted before they are written), saved in one go."""
    names: list[str] = []
    for i in range(count):
        if shape == "aliases":
            flt: dict[str, Any] = {"types": ["object.**"], "aliases": [f"tenant{i}/**"]}
        elif shape == "deleted":
            flt = {"types": ["bench.fact"]}
        else:
            flt = {"types": ["bench.fact"], "where": [{"path": "data.customer", "op": "eq", "value": f"c{i}"}]}
        name = f"quiet-{shape}-{i}"
        body = {"name": name, "filter": flt, "action": {"type": "workflow", "workflow": "bench_run"}}
        await bench.platform.store.save_listener(name, body, 0)
        names.append(name)
    if shape == "deleted":
        for name in names:
            await bench.platform.store.delete_listener(name)
        return []  # nothing left for the case to delete
    return names


async def wait_until(check: Any, within: float = 900.0) -> float:
    deadline = time.time() + within
    while time.time() < deadline:
        if await check():
            return time.time()
        await asyncio.sleep(0.02)
    raise TimeoutError


async def aliases_case(bench: Bench, count: int, events: int) -> dict[str, float]:
    platform = bench.platform
    platform.settings = platform.settings.model_copy(update={"task_queue": f"bench-{uuid.uuid4().hex[:8]}"})
    names = await quiet_listeners(bench, count, "aliases")
    view = {
        "name": "view",
        "filter": {"types": ["object.written"], "aliases": ["bench/**"]},
        "batch": {"window_seconds": 0.2, "max_events": 1000},
        "action": {"type": "object", "alias": "views/latest", "value": {"type": "view", "n": "{{ batch.count }}"}},
    }
    await platform.store.save_listener("view", view, 0)
    session = (await platform.command({"command": "open_session"}))["session"]["id"]
    bodies = [
        {
            "command": "write_objects",
            "session_id": session,
            "objects": [{"alias": f"bench/{n}", "value": {"type": "b"}} for n in range(start, start + 1000)],
        }
        for start in range(0, events, 1000)
    ]
    async with engine(platform, bench.client, Starts()):
        began, written = await post_all(bench.api, bodies)
        last = await platform.store.pool.fetchval(
            "SELECT max(id) FROM orchestrator.events WHERE session_id = $1 AND alias LIKE 'bench/%'", session
        )

        async def routed() -> bool:
            return bool(await routed_position(platform, session) >= last)

        async def taken() -> bool:
            fired = await platform.store.pool.fetchval(
                "SELECT fired_through FROM orchestrator.lanes WHERE session_id = $1 AND listener = 'view'", session
            )
            return bool((fired or 0) >= last)

        routed_at = await wait_until(routed)
        taken_at = await wait_until(taken)
    for name in [*names, "view"]:
        await platform.store.delete_listener(name)
    return {
        "writes acknowledged/s": events / (written - began),
        "events/s routed": events / (routed_at - began),
        "events/s end to end": events / (taken_at - began),
    }


async def where_case(bench: Bench, count: int, events: int, shape: str = "where") -> dict[str, float]:
    platform = bench.platform
    platform.settings = platform.settings.model_copy(update={"task_queue": f"bench-{uuid.uuid4().hex[:8]}"})
    # `versions`: no other listener; the serial one is saved `count` times before its last version, below.
    names = [] if shape == "versions" else await quiet_listeners(bench, count, shape)
    serial = {
        "name": "serial",
        "filter": {"types": ["bench.fact"]},
        "batch": {"window_seconds": 1, "max_events": 1000},
        "action": {"type": "workflow", "workflow": "bench_run_two"},
    }
    for i in range(count if shape == "versions" else 0):
        await platform.store.save_listener("serial", {**serial, "description": f"version {i}"}, 0)
    await platform.store.save_listener("serial", serial, 0)
    session = (await platform.command({"command": "open_session"}))["session"]["id"]
    starts = Starts(expected=events)

    async def one_version_probed() -> bool:
        query = "SELECT count(DISTINCT version) FROM orchestrator.listener_probes WHERE name = 'serial'"
        return bool(await platform.store.pool.fetchval(query) == 1)

    async with two_activity_engine(platform, bench.client, starts):
        with contextlib.suppress(TimeoutError):  # an engine that prunes nothing is measured as it is
            await wait_until(one_version_probed, within=30)
        meter = CpuMeter(bench.server_pid, bench.postgres_pid)
        meter.start()
        began, _ = await emit_through_http(bench.api, session, events, 1000)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(starts.all_started.wait(), timeout=900)
        cpu = meter.stop()
    for name in [*names, "serial"]:
        await platform.store.delete_listener(name)
    last = max(t for t, _ in starts.runs)
    figures = {"events/s end to end": events / (last - began)}
    figures["CPU per event, all parts (us)"] = 1_000_000 * sum(cpu.values()) / events
    for part, seconds in cpu.items():
        figures[f"  {part} (us)"] = 1_000_000 * seconds / events
    return figures


async def main(counts: list[int], cases: set[str], events: int, bulk_events: int) -> None:
    async with bench_platform() as bench:
        saved = await bench.platform.command({"command": "save_event_type", "name": "bench.fact", "schema": FACT})
        assert saved["status"] == "success", saved
        for shape, n in (
            ("aliases", events),
            ("where", bulk_events),
            ("deleted", bulk_events),
            ("versions", bulk_events),
        ):
            if shape not in cases:
                continue
            base: dict[str, float] = {}
            for count in counts:
                figures = await (
                    aliases_case(bench, count, n) if shape == "aliases" else where_case(bench, count, n, shape)
                )
                base = base or figures
                beside = {"deleted": "deleted listeners", "versions": "versions before its last"}.get(
                    shape, "quiet listeners"
                )
                print(f"{shape}: {n:,} events beside {count} {beside}")
                for name, value in figures.items():
                    unit = "us" if name.endswith("(us)") else "events/s"
                    ratio = value / base[name] if base.get(name) else 0.0
                    row(f"{name.removesuffix(' (us)')}  ({ratio:.2f}x of none)", value, unit)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listeners", default="0,200,1000")
    parser.add_argument("--cases", default="aliases,where")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--bulk-events", type=int, default=50_000)
    args = parser.parse_args()
    counts = [int(c) for c in args.listeners.split(",")]
    asyncio.run(main(counts, set(args.cases.split(",")), args.events, args.bulk_events))
