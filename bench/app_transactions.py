"""Events in the application's own transactions: what they cost, and that none is lost or doubled under load.

`cost`: rows inserted per second into a plain table, into the same table captured (`capture_table`), and into
the plain table with an `emit` beside each row (`orchestrator.transactional`), side by side in one run on one
embedded PostgreSQL: `--writers` connections each committing one row per transaction for `--seconds`, the three
tables in turn (the captured events appended as the router appends them, beside the writers), `--rounds` times
(the figures are medians, each ratio of a round's figures, taken seconds apart), with all writers in one session
and then with a session each; then one statement of 10,000 rows, plain and captured.

`parts`: what each part of a captured row costs, measured by turning parts off in this scratch database (the
platform's function replaced for the run, then put back from its file): the row trigger alone (its events made
and dropped), then the read of the session's status, then the staged row (as shipped), appended after the commit
by a loop that does what the router does every round interval (0033_captured_staged.sql), beside the writers in
every case. Each against plain inserts measured just before it (the median of `--rounds` such pairs), in both
layouts.

`load`: on the Temporal dev server with the engine running, 32 writers commit rows with an emit beside each and
32 more write a captured table, for `--load-seconds`, across 4 sessions, each rolling back about 3 in 10 of its
transactions. Then: every committed change is an event exactly once in its session, no rolled-back one is, and
every event reaches a run of the listener exactly once.

Run: .venv/bin/python -m bench.app_transactions [--cases cost,parts,load] [--seconds 2] [--rounds 5]
     [--writers 8] [--load-seconds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import random
import statistics
import time
import uuid
from importlib import resources
from typing import Any

import asyncpg

from bench.burst import Starts, bench_platform, engine, process_pool
from bench.common import row, scratch_database
from orchestrator.config import Settings
from orchestrator.core.limits import Limits
from orchestrator.platform import Platform
from orchestrator.transactional import emit

TABLES = ("plain", "captured", "emitted")


async def _ok(platform: Platform, command: str, **args: Any) -> dict[str, Any]:
    reply = await platform.command({"command": command, **args})
    assert reply["status"] == "success", reply
    return reply


async def _prepare(platform: Platform, app: asyncpg.Pool) -> str:
    for table in TABLES:
        await app.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, session_id text NOT NULL, v integer)")
    await _ok(platform, "save_event_type", name="order.placed", schema={"type": "object"})
    await _ok(platform, "capture_table", table="captured", type_prefix="row", session_column="session_id")
    return str((await _ok(platform, "open_session"))["session"]["id"])


async def _insert_for(app: asyncpg.Pool, table: str, sessions: list[str], seconds: float, writers: int) -> int:
    ids = iter(range(1, 1 << 62))
    deadline = time.monotonic() + seconds
    done = 0

    async def writer(session: str) -> None:
        nonlocal done
        async with app.acquire() as conn:
            while time.monotonic() < deadline:
                n = next(ids)
                async with conn.transaction():
                    await conn.execute(f"INSERT INTO {table} VALUES ($1, $2, 1)", n, session)
                    if table == "emitted":
                        await emit(conn, session, "order.placed", {"order": n})
                done += 1

    await asyncio.gather(*(writer(sessions[n % len(sessions)]) for n in range(writers)))
    # A captured table is not truncated (its rows would leave no events): emptied row by row, as it allows.
    await app.execute(f"DELETE FROM {table}" if table == "captured" else f"TRUNCATE {table}")
    return done


def _ratio(label: str, value: float) -> None:
    print(f"  {label:<58} {value:>12.2f} x")


async def _sessions(platform: Platform, first: str, writers: int) -> list[tuple[str, list[str]]]:
    """The two layouts: every writer in one session, and a session for each writer."""
    apart = [first, *[str((await _ok(platform, "open_session"))["session"]["id"]) for _ in range(writers - 1)]]
    return [("one session", [first]), ("a session per writer", apart)]


async def _appender(platform: Platform, interval: float = 0.05) -> None:
    """What the router does for captured tables while they are written (0033_captured_staged.sql): every round
    interval, the staged events appended (`settle_staged`). Run beside the writers, so its cost is in the
    figures."""
    while True:
        await platform.store.settle_staged()
        await asyncio.sleep(interval)


async def cost(seconds: float, writers: int, rounds: int) -> None:
    async with scratch_database() as url:
        settings = Settings(limits=Limits(activation_delay_seconds=0))
        platform = await Platform.connect(settings, url)
        app = await asyncpg.create_pool(url, min_size=writers, max_size=writers)
        appender = asyncio.create_task(_appender(platform))
        try:
            session = await _prepare(platform, app)
            for label, sessions in await _sessions(platform, session, writers):
                # The tables in turn, round after round: each ratio is of figures taken seconds apart, so a machine
                # whose load moves (a shared one) moves both sides of it.
                rates: dict[str, list[float]] = collections.defaultdict(list)
                for _ in range(rounds):
                    for table in TABLES:
                        rates[table].append(await _insert_for(app, table, sessions, seconds, writers) / seconds)
                print(
                    f"cost: {writers} writers into {label}, one row per transaction, {seconds:g} s a table,"
                    f" {rounds} rounds (medians)"
                )
                labels = {
                    "plain": "plain inserts",
                    "captured": "captured inserts (an event each, by the trigger)",
                    "emitted": "plain inserts with an emit beside each (the helper)",
                }
                for table in TABLES:
                    row(labels[table], statistics.median(rates[table]), "rows/s")
                for table in ("captured", "emitted"):
                    each = [t / p for t, p in zip(rates[table], rates["plain"], strict=True)]
                    _ratio(f"{table} / plain", statistics.median(each))
                    print(f"    each round: {', '.join(f'{r:.2f}' for r in each)}")
            many: dict[str, float] = {}
            for table in ("plain", "captured"):
                began = time.perf_counter()
                await app.execute(f"INSERT INTO {table} SELECT n, $1, 1 FROM generate_series(1, 10000) n", session)
                many[table] = 10_000 / (time.perf_counter() - began)
            print("cost: one statement of 10,000 rows")
            row("plain", many["plain"], "rows/s")
            row("captured", many["captured"], "rows/s")
            _ratio("captured / plain", many["captured"] / many["plain"])
        finally:
            appender.cancel()
            await app.close()
            await platform.close()


# The parts of a captured row, each turned off by replacing a function of the platform's for the run.
_TRIGGER_ALONE = """
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_captured_emit(c orchestrator.captures, p_session text,
    p_events jsonb) RETURNS void LANGUAGE plpgsql AS $$ BEGIN END $$"""
_STATUS_READ = """
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_captured_emit(c orchestrator.captures, p_session text,
    p_events jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT s.status FROM orchestrator.sessions s WHERE s.id = p_session) IS DISTINCT FROM 'open' THEN
        RAISE EXCEPTION 'session_id: session % is not open', quote_literal(p_session);
    END IF;
END $$"""


def _shipped(*functions: str) -> str:
    """The platform's own bodies of these functions, from their files."""
    folder = resources.files("orchestrator.store") / "functions"
    return ";\n".join((folder / f"{name}.sql").read_text() for name in functions)


def _parts() -> tuple[tuple[str, str], ...]:
    """Each part on top of those before it: its label, and the SQL that makes it so."""
    return (
        ("the row trigger alone (its events made, then dropped)", _TRIGGER_ALONE),
        ("+ the session's status read", _STATUS_READ),
        ("+ the staged row, appended after (as shipped)", _shipped("orchestrator_captured_emit")),
    )


async def parts(seconds: float, writers: int, rounds: int) -> None:
    async with scratch_database() as url:
        settings = Settings(limits=Limits(activation_delay_seconds=0))
        platform = await Platform.connect(settings, url)
        app = await asyncpg.create_pool(url, min_size=writers, max_size=writers)
        appender = asyncio.create_task(_appender(platform))
        try:
            layouts = await _sessions(platform, await _prepare(platform, app), writers)
            figures: dict[tuple[str, str], tuple[float, float]] = {}
            steps = _parts()
            for label, change in steps:
                await app.execute(change)
                for layout, sessions in layouts:
                    captured, ratios = [], []
                    for _ in range(rounds):
                        plain = await _insert_for(app, "plain", sessions, seconds, writers) / seconds
                        captured.append(await _insert_for(app, "captured", sessions, seconds, writers) / seconds)
                        ratios.append(captured[-1] / plain)
                    figures[(label, layout)] = (statistics.median(captured), statistics.median(ratios))
            for layout, _ in layouts:
                print(f"parts: {writers} writers into {layout}, one row per transaction, {seconds:g} s each (medians)")
                for label, _ in steps:
                    rate, ratio = figures[(label, layout)]
                    print(f"  {label:<58} {rate:>9,.0f} rows/s {ratio:>5.2f}x plain")
        finally:
            appender.cancel()
            await app.close()
            await platform.close()


def _write_load(url: str, sessions: list[str], seconds: float) -> tuple[dict[str, dict[int, str]], int]:
    """32 writers emitting beside their rows and 32 into the captured table, about 3 in 10 rolled back; answers
    the committed rows' sessions by table, and how many transactions rolled back."""

    async def run() -> tuple[dict[str, dict[int, str]], int]:
        committed: dict[str, dict[int, str]] = {"orders": {}, "tickets": {}}
        rolled_back = 0
        ids = iter(range(1, 1 << 62))
        deadline = time.monotonic() + seconds
        app = await asyncpg.create_pool(url, min_size=16, max_size=64)

        async def writer(table: str, seed: int) -> None:
            nonlocal rolled_back
            rng = random.Random(seed)
            while time.monotonic() < deadline:
                n, session = next(ids), rng.choice(sessions)
                try:
                    async with app.acquire() as conn, conn.transaction():
                        await conn.execute(f"INSERT INTO {table} VALUES ($1, $2)", n, session)
                        if table == "orders":
                            await emit(conn, session, "order.placed", {"order": n})
                        if rng.random() < 0.3:
                            raise LookupError("rolled back")
                    committed[table][n] = session
                except LookupError:
                    rolled_back += 1

        try:
            await asyncio.gather(*(writer(t, n) for t in ("orders", "tickets") for n in range(32)))
        finally:
            await app.close()
        return committed, rolled_back

    return asyncio.run(run())


async def load(seconds: float) -> None:
    async with bench_platform() as bench:
        platform = bench.platform
        platform.settings = platform.settings.model_copy(update={"task_queue": f"bench-{uuid.uuid4().hex[:8]}"})
        app = await asyncpg.create_pool(bench.database_url, min_size=1, max_size=2)
        try:
            await app.execute("CREATE TABLE orders (id bigint PRIMARY KEY, session_id text NOT NULL)")
            await app.execute("CREATE TABLE tickets (id bigint PRIMARY KEY, session_id text NOT NULL)")
            await _ok(platform, "save_event_type", name="order.placed", schema={"type": "object"})
            await _ok(platform, "capture_table", table="tickets", type_prefix="ticket", session_column="session_id")
            body = {
                "name": "changes",
                "filter": {"types": ["order.placed", "ticket.created"]},
                "batch": {"window_seconds": 1, "max_events": 1000},
                "action": {"type": "workflow", "workflow": "bench_run"},
            }
            await _ok(platform, "save_listener", listener=body)
            sessions = [str((await _ok(platform, "open_session"))["session"]["id"]) for _ in range(4)]
            starts = Starts(expected=1 << 62)
            async with engine(platform, bench.client, starts):
                # The writers in a process of their own: the application is not the platform's worker.
                async with process_pool(1) as pool:
                    began = time.monotonic()
                    future = pool.submit(_write_load, bench.database_url, sessions, seconds)
                    committed, rolled_back = await asyncio.wrap_future(future)
                    wrote = time.monotonic() - began
                events: dict[int, tuple[str, str, int]] = {}
                for session in sessions:
                    after = 0
                    mine = ["order.placed", "ticket.created"]
                    while page := await platform.store.list_events(session, after=after, limit=1000, types=mine):
                        for e in page:
                            kind = "orders" if e.type == "order.placed" else "tickets"
                            data = e.data or {}
                            row_id = int(data["order"] if kind == "orders" else data["_id"])
                            events[e.id] = (kind, session, row_id)
                        after = page[-1].id
                last_commit = time.monotonic()
                starts.expected = len(events)
                if sum(len(r) for _, r in starts.runs) >= len(events):
                    starts.all_started.set()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(starts.all_started.wait(), timeout=120)
                caught_up = time.monotonic() - last_commit
        finally:
            await app.close()
        found = collections.Counter((kind, row_id) for kind, _, row_id in events.values())
        wrong_session = sum(1 for kind, session, row_id in events.values() if committed[kind].get(row_id) != session)
        changes = {(kind, n) for kind in committed for n in committed[kind]}
        delivered = collections.Counter(i for _, batch in starts.runs for i in batch)
        print(f"load: 64 writers (32 emit beside their rows, 32 into a captured table) for {seconds:g} s, 4 sessions")
        row("transactions committed", len(changes), "")
        row("transactions rolled back", rolled_back, "")
        row("committed changes per second", len(changes) / wrote, "/s")
        row("committed changes without their event", len(changes - set(found)), "")
        row("events of a rolled-back change", len(set(found) - changes), "")
        row("changes with more than one event", sum(1 for c in found.values() if c > 1), "")
        row("events in another session than their row's", wrong_session, "")
        row("events that reached no run", len(set(events) - set(delivered)), "")
        row("events that reached more than one run", sum(1 for c in delivered.values() if c > 1), "")
        row("runs", len(starts.runs), "")
        row("seconds from the last commit to every event in a run", caught_up, "s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="cost,parts,load")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--load-seconds", type=float, default=30.0)
    args = parser.parse_args()
    cases = set(args.cases.split(","))
    if "cost" in cases:
        asyncio.run(cost(args.seconds, args.writers, args.rounds))
    if "parts" in cases:
        asyncio.run(parts(args.seconds, args.writers, args.rounds))
    if "load" in cases:
        asyncio.run(load(args.load_seconds))


if __name__ == "__main__":
    main()
