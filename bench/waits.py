"""Runs that hear events, measured: the race a wait must never lose, what open waits cost routing, how soon a
waited-for event reaches its run, and how soon `cancel_on` cancels one.

Measured in one run on the Temporal dev server and an embedded PostgreSQL, the API in a process of its own, the
writers in four more, the worker and router in this one.

- `race`: N chats, each a request that starts a waiting run and its user's reply committed right after it,
  before the run (and its wait) begins: how many runs heard their reply (the wait counts from its batch).
- `routing`: `emit_events` of 1,000 (`bench.fact`) into one serial listener whose run runs two activities, with
  no open wait, then beside 10,000 open waits spread over 1,000 other sessions, then beside 10,000 open waits in
  the bulk's own session, each of `bench.fact` told apart by a `data.n` that no event has (the Inngest pattern,
  a wait matched against its run's own data). The waits are put in place through the store, as a run's would
  be (no run behind them: what is measured is routing). Events/s from the first write to the last run started,
  and the ratio to none.
- `latency`: M waiting runs, one at a time, each sent its reply while 1,000 events/s of other traffic go to ten
  other sessions: from the reply's write to the run hearing it (the start of the workflow task its wait answers
  in: the spec's "reaches its run") and to the run's next activity, p50 and p99.
- `cancel`: M slow keyed runs, each cancelled by the deletion of its key (`cancel_on`): from the deletion's write
  to the run's cleanup activity, p50 and p99.

Run: .venv/bin/python -m bench.waits [--cases race,routing,latency,cancel] [--chats 100] [--waits 10000]
     [--bulk-events 50000] [--runs 50]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from temporalio import activity

from bench.batch_cost import two_activity_engine
from bench.bulk_events import emit_through_http, post_all
from bench.burst import Bench, Starts, app_engine, bench_platform
from bench.common import percentile, row
from bench.routing_listeners import wait_until
from bench.workflows import BenchCancellable, BenchWaiter
from orchestrator.app_loader import UserApp
from orchestrator.core.waits import parse_wait
from orchestrator.store.waits import compiled_conditions

FACT = {"type": "object", "properties": {"n": {"type": "integer"}}}


class Heard:
    """What the runs reported, by chat: when (wall clock) the run's activity ran, the condition and the events;
    and when the run itself heard (`inside`: the start of the workflow task its wait answered in)."""

    def __init__(self) -> None:
        self.at: dict[str, tuple[float, Any, list[int]]] = {}
        self.inside: dict[str, float] = {}

    @activity.defn(name="bench.heard")
    async def heard(self, chat: str, matched: Any, event_ids: list[int], heard_at: float) -> None:
        self.at.setdefault(chat, (time.time(), matched, event_ids))
        self.inside.setdefault(chat, heard_at)

    async def until(self, chats: list[str], within: float = 300.0) -> None:
        deadline = time.time() + within
        while not all(c in self.at for c in chats):
            if time.time() > deadline:
                raise TimeoutError(f"{sum(c in self.at for c in chats)} of {len(chats)} heard")
            await asyncio.sleep(0.01)


@asynccontextmanager
async def waiting_engine(bench: Bench, heard: Heard) -> AsyncIterator[None]:
    bench.platform.settings = bench.platform.settings.model_copy(update={"task_queue": f"bench-{uuid.uuid4().hex[:8]}"})
    app = UserApp(name="bench", workflows=[BenchWaiter, BenchCancellable], activities=[heard.heard])
    async with app_engine(bench.platform, bench.client, app, say=True):
        yield


def chat_listener(name: str, workflow: str, **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "filter": {
            "types": ["thread.item_posted"],
            "aliases": ["chats/*"],
            "where": [{"path": "item.role", "op": "eq", "value": "request"}],
        },
        "concurrency": {"mode": "keyed", "key": "alias", "max_parallel": 16},
        "batch": {"max_events": 1},
        "action": {"type": "workflow", "workflow": workflow},
        **more,
    }


async def post(bench: Bench, session: str, chat: str, role: str) -> int:
    reply = await bench.platform.command(
        {
            "command": "post_thread_item",
            "session_id": session,
            "alias": chat,
            "item": {"type": "text", "role": role, "message": role},
        }
    )
    assert reply["status"] == "success", reply
    return int(reply["event_id"])


async def race_case(bench: Bench, chats: int) -> dict[str, float]:
    heard = Heard()
    await bench.platform.command({"command": "save_listener", "listener": chat_listener("race", "bench_waiter")})
    session = (await bench.platform.command({"command": "open_session"}))["session"]["id"]
    async with waiting_engine(bench, heard):
        replies = {}
        for n in range(chats):
            chat = f"chats/{n}"
            await post(bench, session, chat, "request")
            replies[chat] = await post(bench, session, chat, "user")
        await heard.until(list(replies))
    await bench.platform.command({"command": "delete_listener", "name": "race"})
    right = sum(1 for chat, event_id in replies.items() if heard.at[chat][1:] == (0, [event_id]))
    return {"chats": float(chats), "runs that heard their reply": float(right)}


async def open_waits(bench: Bench, sessions: list[str], total: int) -> None:
    """`total` open waits over `sessions`, on `bench.fact` events with a `data.n` none has (below zero)."""
    store = bench.platform.store
    for k in range(total):
        spec = parse_wait(
            {
                "conditions": [{"types": ["bench.fact"], "where": [{"path": "data.n", "op": "eq", "value": -1 - k}]}],
                "timeout_seconds": 3600.0,
            },
            {"bench.fact": FACT},
        )
        opened = await store.open_wait(
            {
                "session_id": sessions[k % len(sessions)],
                "execution_id": f"exe:bench-wait:{k}.0",
                "seq": 1,
                "kind": "wait",
                "listener": None,
                "after": 0,
                "max_events": 1,
                "timeout_seconds": spec.timeout_seconds,
                "conditions": [c.model_dump(mode="json") for c in spec.conditions],
                "compiled": compiled_conditions(spec.conditions),
            }
        )
        assert opened["state"] == "open", opened


async def bulk(bench: Bench, session: str, events: int) -> float:
    """The bulk into a serial listener of `bench.fact`; events/s from the first write to the last run started."""
    platform = bench.platform
    platform.settings = platform.settings.model_copy(update={"task_queue": f"bench-{uuid.uuid4().hex[:8]}"})
    serial = {
        "name": "serial",
        "filter": {"types": ["bench.fact"]},
        "batch": {"window_seconds": 1, "max_events": 1000},
        "action": {"type": "workflow", "workflow": "bench_run_two"},
    }
    await platform.store.save_listener("serial", serial, 0)
    starts = Starts(expected=events)
    async with two_activity_engine(platform, bench.client, starts):
        began, _ = await emit_through_http(bench.api, session, events, 1000)
        await asyncio.wait_for(starts.all_started.wait(), timeout=900)
    await platform.store.delete_listener("serial")
    return events / (max(t for t, _ in starts.runs) - began)


async def routing_case(bench: Bench, waits: int, events: int) -> dict[str, float]:
    platform = bench.platform

    async def opened() -> str:
        return str((await platform.command({"command": "open_session"}))["session"]["id"])

    figures: dict[str, float] = {}
    figures["no open wait"] = await bulk(bench, await opened(), events)
    others = [await opened() for _ in range(1000)]
    await open_waits(bench, others, waits)
    figures[f"{waits:,} waits in 1,000 other sessions"] = await bulk(bench, await opened(), events)
    own = await opened()
    await open_waits(bench, [own], waits)
    figures[f"{waits:,} waits in the bulk's own session"] = await bulk(bench, own, events)
    return figures


async def traffic(bench: Bench, sessions: list[str], per_second: int, stop: asyncio.Event) -> None:
    """`emit_events` of 100 to `sessions` in turn, `per_second` events a second, until `stop`."""
    n = 0
    while not stop.is_set():
        began = time.time()
        body = {
            "command": "emit_events",
            "session_id": sessions[n % len(sessions)],
            "events": [{"type": "bench.fact", "data": {"n": i}} for i in range(100)],
        }
        await post_all(bench.api, [body])
        n += 1
        await asyncio.sleep(max(100 / per_second - (time.time() - began), 0.0))


async def latency_case(bench: Bench, runs: int) -> dict[str, float]:
    heard = Heard()
    platform = bench.platform
    await platform.command({"command": "save_listener", "listener": chat_listener("latency", "bench_waiter")})
    session = (await platform.command({"command": "open_session"}))["session"]["id"]
    others = [(await platform.command({"command": "open_session"}))["session"]["id"] for _ in range(10)]
    stop = asyncio.Event()
    delays: list[float] = []
    inside: list[float] = []
    async with waiting_engine(bench, heard):
        load = asyncio.create_task(traffic(bench, others, 1000, stop))
        try:
            for n in range(runs):
                chat = f"chats/l{n}"
                await post(bench, session, chat, "request")

                async def waiting(chat: str = chat) -> bool:
                    found = await platform.store.pool.fetchval(
                        "SELECT count(*) FROM orchestrator.run_waits w JOIN orchestrator.executions x"
                        " ON x.id = w.execution_id WHERE x.lane = $1 AND w.state = 'open'",
                        chat,
                    )
                    return bool(found)

                await wait_until(waiting, within=60)
                sent = time.time()
                await post(bench, session, chat, "user")
                await heard.until([chat], within=60)
                delays.append(heard.at[chat][0] - sent)
                inside.append(heard.inside[chat] - sent)
        finally:
            stop.set()
            await load
    await platform.command({"command": "delete_listener", "name": "latency"})
    return {
        "reaches the run, p50 (ms)": 1000 * percentile(inside, 50),
        "reaches the run, p99 (ms)": 1000 * percentile(inside, 99),
        "the run's next activity, p50 (ms)": 1000 * percentile(delays, 50),
        "the run's next activity, p99 (ms)": 1000 * percentile(delays, 99),
    }


async def cancel_case(bench: Bench, runs: int) -> dict[str, float]:
    heard = Heard()
    platform = bench.platform
    listener = chat_listener(
        "cancelled",
        "bench_cancellable",
        cancel_on=[
            {
                "types": ["thread.item_posted"],
                "aliases": ["chats/*"],
                "key": "alias",
                "where": [{"path": "item.role", "op": "eq", "value": "cancel"}],
            }
        ],
    )
    listener["concurrency"]["max_parallel"] = 16
    await platform.command({"command": "save_listener", "listener": listener})
    session = (await platform.command({"command": "open_session"}))["session"]["id"]
    delays: list[float] = []
    async with waiting_engine(bench, heard):
        for n in range(runs):
            chat = f"chats/c{n}"
            await post(bench, session, chat, "request")

            async def running(chat: str = chat) -> bool:
                return bool(
                    await platform.store.pool.fetchval(
                        "SELECT count(*) FROM orchestrator.executions WHERE lane = $1 AND status = 'running'"
                        " AND started_event_id IS NOT NULL",
                        chat,
                    )
                )

            await wait_until(running, within=60)
            sent = time.time()
            await post(bench, session, chat, "cancel")
            await heard.until([chat], within=60)
            delays.append(heard.at[chat][0] - sent)
    await platform.command({"command": "delete_listener", "name": "cancelled"})
    return {"p50 (ms)": 1000 * percentile(delays, 50), "p99 (ms)": 1000 * percentile(delays, 99)}


async def main(cases: set[str], chats: int, waits: int, bulk_events: int, runs: int) -> None:
    async with bench_platform() as bench:
        bench.platform.settings = bench.platform.settings.model_copy(
            update={"limits": bench.platform.settings.limits.model_copy(update={"listener_parallel_runs": 128})}
        )
        saved = await bench.platform.command({"command": "save_event_type", "name": "bench.fact", "schema": FACT})
        assert saved["status"] == "success", saved
        if "race" in cases:
            figures = await race_case(bench, chats)
            print(f"race: a reply committed right after the request that starts its run, {chats} chats")
            row("runs that heard their reply", figures["runs that heard their reply"], f"of {chats}")
        if "routing" in cases:
            figures = await routing_case(bench, waits, bulk_events)
            base = figures["no open wait"]
            print(f"routing: {bulk_events:,} events of bench.fact, emit_events of 1,000, into a serial listener")
            for name, value in figures.items():
                row(f"{name}  ({value / base:.2f}x of none)", value, "events/s")
        if "latency" in cases:
            figures = await latency_case(bench, runs)
            print(
                f"latency: a waited-for reply's write to its run hearing it and to its next activity, {runs} runs,"
                " 1,000 events/s beside"
            )
            for name, value in figures.items():
                row(name.removesuffix(" (ms)"), value, "ms")
        if "cancel" in cases:
            figures = await cancel_case(bench, runs)
            print(f"cancel: a cancel_on event's write to its run's cleanup, {runs} runs")
            for name, value in figures.items():
                row(name.removesuffix(" (ms)"), value, "ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="race,routing,latency,cancel")
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--waits", type=int, default=10_000)
    parser.add_argument("--bulk-events", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(main(set(args.cases.split(",")), args.chats, args.waits, args.bulk_events, args.runs))
