"""Flow control under load: pause then resume against the same events live, and debounce under a steady stream.

On the Temporal dev server and an embedded PostgreSQL, with the API and the writers in processes of their own:
- pause/resume: 10,000 events written through the HTTP door to a listener that fires live, and the same to a
  listener paused in its session and resumed once every event is routed. Both are keyed over 10 keys with a 1 s
  window and max_events 100; printed: batches, events per batch, and the time from the resume to the last run.
  The resumed listener should cost about as many batches as the live one (at most: its lanes are full).
- debounce: a steady 20 writes/s for 30 s into one serial lane of a listener with `debounce_seconds` 2 and
  `max_wait_seconds` 5. The stream never falls quiet for 2 s, so each batch must fire when its first event
  has waited 5 s: printed, the first event's wait per batch (p50, min, max), and how long after the last write
  the final batch fired (the quiet period, 2 s).

Run: .venv/bin/python -m bench.flow_control [--events 10000] [--stream-seconds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from typing import Any

from temporalio.client import Client

from bench.burst import Starts, bench_platform, engine, write_through_http
from bench.common import percentile, row
from orchestrator.platform import Platform

KEYS = 10


def listener(name: str, **batch: Any) -> dict[str, Any]:
    return {
        "name": name,
        "filter": {"types": ["object.written"], "aliases": [f"{name}/**"]},
        "concurrency": {"mode": "keyed", "key": "alias", "max_parallel": KEYS},
        "batch": batch,
        "action": {"type": "workflow", "workflow": "bench_run"},
    }


async def command(platform: Platform, body: dict[str, Any]) -> dict[str, Any]:
    reply = await platform.command(body)
    assert reply["status"] == "success", reply
    return reply


async def routed(platform: Platform, session: str) -> None:
    """Until the router has taken every event of the session."""
    query = (
        "SELECT s.last_event_id > c.routed_event_id FROM orchestrator.sessions s JOIN orchestrator.routing_cursors c"
        " ON c.session_id = s.id"
        " WHERE s.id = $1"
    )
    behind = True
    while behind:  # the router is another task with nothing to wait on but its record
        behind = bool(await platform.store.pool.fetchval(query, session))
        await asyncio.sleep(0.1)


async def one_listener(
    platform: Platform, client: Client, api: str, body: dict[str, Any], events: int, paused: bool
) -> tuple[int, float]:
    """Write `events` to the listener (paused while writing, when asked); its batches, and the seconds from
    the resume (or the last write) to the last run's start."""
    starts = Starts(expected=events)
    platform.settings = platform.settings.model_copy(update={"task_queue": f"bench-{uuid.uuid4().hex[:8]}"})
    await command(platform, {"command": "save_listener", "listener": body})
    session = (await command(platform, {"command": "open_session"}))["session"]["id"]
    name = body["name"]
    async with engine(platform, client, starts):
        if paused:
            await command(platform, {"command": "pause_listener", "name": name, "session_id": session})
        aliases = [f"{name}/{n % KEYS}" for n in range(events)]
        await write_through_http(api, session, aliases)
        await routed(platform, session)
        released = time.time()
        if paused:
            assert not starts.runs, "a paused listener fired"
            await command(platform, {"command": "resume_listener", "name": name, "session_id": session})
        await asyncio.wait_for(starts.all_started.wait(), timeout=600)
    await command(platform, {"command": "delete_listener", "name": name})
    assert sum(len(ids) for _, ids in starts.runs) == events
    return len(starts.runs), max(t for t, _ in starts.runs) - released


async def pause_case(platform: Platform, client: Client, api: str, events: int) -> None:
    live, live_tail = await one_listener(
        platform, client, api, listener("live", window_seconds=1, max_events=100), events, paused=False
    )
    held, resume_tail = await one_listener(
        platform, client, api, listener("held", window_seconds=1, max_events=100), events, paused=True
    )
    print(f"pause/resume: {events:,} events over {KEYS} keys, window 1 s, max_events 100")
    row("batches, live", live, "batches")
    row("batches, paused then resumed", held, "batches")
    row("  resumed / live", held / live, "x")
    row("events per batch, live", events / live, "events")
    row("events per batch, resumed", events / held, "events")
    row("last write to last run started, live", live_tail, "s")
    row("resume to last run started", resume_tail, "s")


async def debounce_case(platform: Platform, client: Client, api: str, rate: float, seconds: float) -> None:
    events = int(rate * seconds)
    starts = Starts(expected=events)
    platform.settings = platform.settings.model_copy(update={"task_queue": f"bench-{uuid.uuid4().hex[:8]}"})
    body = listener("steady", debounce_seconds=2, max_wait_seconds=5, max_events=1000)
    body["concurrency"] = {"mode": "serial"}
    await command(platform, {"command": "save_listener", "listener": body})
    session = (await command(platform, {"command": "open_session"}))["session"]["id"]
    async with engine(platform, client, starts):
        _, last_write = await write_through_http(api, session, ["steady/x"] * events, writers=4, rate=rate)
        await asyncio.wait_for(starts.all_started.wait(), timeout=120)
    await command(platform, {"command": "delete_listener", "name": "steady"})
    written = await platform.store.list_events(session, limit=events + 10, types=["object.written"])
    commits = {e.id: e.created_at.timestamp() for e in written}
    waits = [t - min(commits[i] for i in ids) for t, ids in sorted(starts.runs)]
    print(f"debounce under a steady stream: {rate:g} writes/s for {seconds:g} s, debounce 2 s, max_wait 5 s")
    row("batches", len(waits), "batches")
    row("first event's wait, p50 (all but the last batch)", percentile(waits[:-1], 50), "s")
    row("first event's wait, min", min(waits[:-1]), "s")
    row("first event's wait, max", max(waits[:-1]), "s")
    row("last write to the final batch's run", max(t for t, _ in starts.runs) - last_write, "s")


async def main(events: int, stream_seconds: float) -> None:
    async with bench_platform() as b:
        await pause_case(b.platform, b.client, b.api, events)
        await debounce_case(b.platform, b.client, b.api, rate=20, seconds=stream_seconds)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--stream-seconds", type=float, default=30)
    args = parser.parse_args()
    asyncio.run(main(args.events, args.stream_seconds))
