"""The engine's own CPU per keyed batch with Temporal left out: a figure that does not move with the server.

`bench.batch_cost` gives the engine's share as the whole keyed case less the same writes made alone and less a
run alone, three totals that each move 10 to 20% with the machine, the Temporal server's most of all. Here the
engine runs in this process without Temporal: the real router (its rounds, its pacing) and the real lane driver
on the real store, with a lane's workflow and a run stood in for by timers: a nudge drives its lane when the
news it carries says (as the lane workflow's `orchestrator.fire` does), and a run ends `--run-seconds` after
its start (as its end's local activity does, handing its slot on). The writes come as in `bench.batch_cost`:
32 keep-alive clients in four processes through the HTTP door of an API process of its own.

Printed per batch: this process's CPU (the router, the driver, and the stand-ins, which do next to nothing)
and PostgreSQL's work for this process's connections and for its own processes; the API's and PostgreSQL's
work for the writes apart. Not in it: what Temporal adds to a batch (the run's start call, the end's local
activity and the activation that takes its result, a lane workflow's task now and then), about 2 ms of the
worker's CPU by a side-by-side run of two activities with and without a local activity at its end.

Run: .venv/bin/python -m bench.engine_alone [--events 5000] [--keys 100] [--run-seconds 0.9] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from bench.batch_cost import WRITER_PROCESSES, WRITERS, listener
from bench.burst import api_process, write_through_http
from bench.common import CpuMeter, postmaster_pid, row, scratch_database
from orchestrator.activities.writes import StoreWriter
from orchestrator.config import Settings
from orchestrator.core.lane_clock import LaneNews
from orchestrator.core.lane_snapshot import LaneAddress
from orchestrator.core.limits import Limits
from orchestrator.engine.router import Router
from orchestrator.lanes.driver import LaneDriver
from orchestrator.platform import Platform
from orchestrator.workflows.messages import RunInput, RunTag

# How long a round waits, at most, for its last runs to end.
DRAIN_SECONDS = 600


class Lanes:
    """The lane workflows and the runs, as timers: what the driver is told to do, done when it is due."""

    def __init__(self, run_seconds: float) -> None:
        self.run_seconds = run_seconds
        self.driver: LaneDriver | None = None
        self.started = 0
        self.sent = 0  # the router's `signals`
        self._locks: dict[LaneAddress, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def _later(self, seconds: float, work: Any) -> None:
        async def run() -> None:
            await asyncio.sleep(seconds)
            await work()

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- the nudger's side: a lane workflow steps its lane when its news is due -----------------------------

    async def nudge_quietly(self, address: LaneAddress, news: LaneNews) -> None:
        self.sent += 1
        if news.due_in is not None:
            self._later(news.due_in, lambda: self._fire(address))

    async def _fire(self, address: LaneAddress) -> None:
        assert self.driver is not None
        async with self._locks.setdefault(address, asyncio.Lock()):
            drive = await self.driver.drive(address)
            if drive.handed:
                await self.driver.hand_on(drive.handed)
        news = drive.news()
        if news.due_in is not None:
            self._later(news.due_in, lambda: self._fire(address))

    # -- the starter's side: a run ends when its time is up, and reports it ----------------------------------

    async def start(self, tag: RunTag, run_input: RunInput, priority: Any) -> None:
        self.started += 1

        async def end() -> None:
            assert self.driver is not None
            await self.driver.end(tag, "completed", None)

        self._later(self.run_seconds, end)

    async def stop(self, execution_id: str, reason: str) -> None:
        return None

    async def cancel(self, execution_id: str) -> bool:
        return False

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def keyed_round(url: str, api: str, settings: Settings, events: int, keys: int, run_seconds: float) -> float:
    """One keyed burst through the engine; prints its figures and answers the engine's CPU seconds per batch."""
    platform = await Platform.connect(settings, url)
    lanes = Lanes(run_seconds)
    try:
        name = f"alone_{int(time.time() * 1000)}"
        body = listener(name, concurrency={"mode": "keyed", "key": "alias", "max_parallel": 16})
        reply = await platform.command({"command": "save_listener", "listener": body})
        assert reply["status"] == "success", reply
        session = (await platform.command({"command": "open_session"}))["session"]["id"]
        driver = LaneDriver(platform.store.lanes, settings, lanes, StoreWriter(platform.store, settings), lanes)
        lanes.driver = driver
        router = Router(platform.store, platform.store.lanes, None, platform.direct_url, settings)  # type: ignore[arg-type]
        router.nudger = lanes  # type: ignore[assignment]
        routing = asyncio.create_task(router.run())
        await asyncio.sleep(0.5)  # the router listens before the first write
        meter = CpuMeter(None, await postmaster_pid(url))
        meter.start()
        began, _ = await write_through_http(
            api, session, [f"bench/{n % keys}" for n in range(events)], writers=WRITERS, processes=WRITER_PROCESSES
        )
        written = time.time() - began
        for _ in range(int(DRAIN_SECONDS / 0.1)):  # until every event is taken and every run has ended
            busy = await platform.store.pool.fetchval(
                "SELECT EXISTS (SELECT 1 FROM orchestrator.lane_queue q JOIN orchestrator.lanes l ON l.id ="
                " q.lane_id WHERE l.session_id = $1)"
                " OR EXISTS (SELECT 1 FROM orchestrator.executions WHERE session_id = $1 AND status = 'running')",
                session,
            )
            if not busy:
                break
            await asyncio.sleep(0.1)
        cpu = meter.stop()
        routing.cancel()
        await asyncio.gather(routing, return_exceptions=True)
        # The next round's listener alone takes its writes.
        await platform.command({"command": "delete_listener", "name": name})
    finally:
        await lanes.close()
        await platform.close()
    batches = lanes.started
    by_client = meter.postgres_by_client
    engine = {
        "this process (router and driver)": cpu["worker and router"],
        "PostgreSQL, the engine's connections": by_client["engine's connections"],
        "PostgreSQL, the server's own and exited backends": by_client["the server's own and exited backends"],
    }
    print(f"keyed ({keys} keys, 16 slots, 1 s window, runs of {run_seconds:g} s): {events:,} events, {batches} batches")
    row("events/s written (the writers' own pace)", events / written, "events/s")
    row("events per batch", events / batches, "events")
    row("the engine's CPU per batch, Temporal left out", 1000 * sum(engine.values()) / batches, "ms")
    for part, seconds in engine.items():
        row(f"  {part}", 1000 * seconds / batches, "ms")
    row(
        "not in it: the writes (the API and its connections)",
        1000 * (cpu["API"] + by_client["API's connections"]) / batches,
        "ms",
    )
    return sum(engine.values()) / batches


async def main(events: int, keys: int, run_seconds: float, rounds: int) -> None:
    settings = Settings(
        limits=Limits(activation_delay_seconds=0, listener_fires_per_minute=100_000), search_attributes=False
    )
    async with scratch_database() as url, api_process(url, settings) as api:
        print(f"engine alone: embedded PostgreSQL, no Temporal, writers through the HTTP door ({api})")
        figures = [await keyed_round(url, api, settings, events, keys, run_seconds) for _ in range(rounds)]
    if rounds > 1:
        print(f"the engine's CPU per keyed batch, Temporal left out, over {rounds} rounds")
        row("  median", 1000 * statistics.median(figures), "ms")
        row("  least", 1000 * min(figures), "ms")
        row("  most", 1000 * max(figures), "ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--run-seconds", type=float, default=0.9)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.events, args.keys, args.run_seconds, args.rounds))
