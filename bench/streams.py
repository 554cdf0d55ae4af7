"""Connection listeners under load: 100 streams on one session while 5,000 writes commit.

The API (`orchestrator api`'s app) runs in a process of its own; the 100 SSE clients and the writers run in
this one, the writers with 8 keep-alive HTTP clients. Prints delivery from commit to SSE message (p50/p99
over every event and every stream), whether every stream got every event once, and the API process's CPU
per stream.

Run: .venv/bin/python -m bench.streams [--streams 100] [--writes 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import time

import httpx

from bench.burst import api_process, write_through_http
from bench.common import cpu_seconds, percentile, row, scratch_database
from orchestrator.config import Settings
from orchestrator.core.limits import Limits
from orchestrator.platform import Platform


async def listen(url: str, session: str, expected: int, got: dict[int, float], ready: asyncio.Event) -> None:
    """One connection listener: when each event arrived (wall clock), by id."""
    async with (
        httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(30, read=None)) as http,
        http.stream("GET", f"/v1/sessions/{session}/stream", params={"batch": json.dumps({"max_events": 1000})}) as r,
    ):
        ready.set()
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                now = time.time()
                for event in json.loads(line[6:])["events"]:
                    got[event["id"]] = now
                if len(got) >= expected:
                    return


async def main(streams: int, writes: int) -> None:
    settings = Settings(limits=Limits(activation_delay_seconds=0))
    async with scratch_database() as database_url:
        platform = await Platform.connect(settings, database_url)
        try:
            session = (await platform.command({"command": "open_session"}))["session"]["id"]
            async with api_process(database_url, settings) as url:
                api_pid = next(p.pid for p in multiprocessing.active_children() if p.pid is not None)
                received: list[dict[int, float]] = [{} for _ in range(streams)]
                ready = [asyncio.Event() for _ in range(streams)]
                tasks = [
                    asyncio.create_task(listen(url, session, writes, received[n], ready[n])) for n in range(streams)
                ]
                await asyncio.gather(*(r.wait() for r in ready))
                await asyncio.sleep(1)
                cpu_before = cpu_seconds(api_pid)
                began, ended = await write_through_http(url, session, [f"live/{n % 50}" for n in range(writes)], 8)
                await asyncio.wait_for(asyncio.gather(*tasks), 300)
                api_cpu = cpu_seconds(api_pid) - cpu_before
            events = await platform.store.list_events(session, limit=writes + 10)
            commits = {e.id: e.created_at.timestamp() for e in events}
        finally:
            await platform.close()
    delays = [at - commits[i] for got in received for i, at in got.items() if i in commits]
    complete = sum(1 for got in received if set(got) == set(commits))
    print(f"streams: {streams} connection listeners on one session, {writes:,} writes through the HTTP door")
    row("writes/s while the streams listened", writes / (ended - began), "writes/s")
    row("streams that got every event once", complete, f"of {streams}")
    row("commit to SSE message, p50", 1000 * percentile(delays, 50), "ms")
    row("commit to SSE message, p99", 1000 * percentile(delays, 99), "ms")
    row("API CPU per stream (writes and streams)", 1000 * api_cpu / streams, "ms")
    row("API CPU per stream per 1,000 events", 1000 * api_cpu / streams / (writes / 1000), "ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--writes", type=int, default=5000)
    args = parser.parse_args()
    asyncio.run(main(args.streams, args.writes))
