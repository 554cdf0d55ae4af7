"""Walls on the way to many sessions and many events a second, each measured on its own.

- `poll`: the router's slow poll for sessions behind their routed position, at 1,000, 10,000 and 100,000
  sessions (1% behind): the statement's time until 0030 and now, what the polls of `--routers` routers cost
  every 2 s, what the rounds a poll hands out cost; and, with 1,500 more behind at once, how many polls (that
  route nothing) reach the session behind with the greatest id.

- `wakeups`: `--writes` single appends at a steady pace into sessions no listener takes from, one committing
  transaction (one notification) each, beside 0 and each of `--idle-routers` routers (each with a pool of its
  own, in this process, the wake-up shards shared out between them first): rounds per notification, and what
  each router adds per notification, in this process's CPU and PostgreSQL's.
- `retention`: `--retained` events of 60 days ago (a small `data` each) in 100 sessions, all routed, trimmed
  as the workers do (`orchestrator_trim_session`, 1,000 rows a statement) and the table vacuumed after: wall
  and CPU time and WAL per event deleted; beside it the same rows in a table of their own with the same
  indexes, dropped whole, as a partition of a time-partitioned table would be.
- `actions` (its own Temporal dev server): `--batches` batches of a serial listener whose action is a workflow
  (a run of two activities) and as many of one whose action writes an object, each batch ten writes a window
  apart; then every history on the task queue read back, counted by what Temporal Cloud bills as an action
  (a start, a signal, a signal-with-start once, a timer, an activity attempt, the local activities of one
  workflow task once, a child's start twice, a search attribute upsert, an update) and by workflow task,
  per batch.
- `notify_lock`: whether a notifying commit in one database waits for one in another database of the same
  server. A commit in the benchmark's database that notified is held at its commit (it waits for a synchronous
  standby that does not exist); meanwhile, in a second database, a plain commit and a notifying one are timed,
  and `pg_locks` shows who waits for what; then the first commit is let go.

Run: .venv/bin/python -m bench.walls [--cases poll,wakeups,retention,actions,notify_lock] [--sessions 1000,10000,100000]
     [--routers 8] [--writes 2000] [--idle-routers 1,4,16] [--retained 200000] [--batches 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import asyncpg
from asyncpg import Record
from asyncpg.pool import PoolConnectionProxy

from bench.common import CpuMeter, cpu_seconds, postmaster_pid, scratch_database
from orchestrator.config import Settings
from orchestrator.core import wake_shards
from orchestrator.engine.router import Router
from orchestrator.platform import Platform
from orchestrator.store.engine_records import EngineRecords

# The statement the poll ran until 0030 (`EngineRecords.sessions_behind`).
OLD_POLL = (
    "SELECT s.id FROM orchestrator.sessions s JOIN orchestrator.routing_cursors c ON c.session_id = s.id"
    " WHERE s.last_event_id > c.routed_event_id LIMIT $1"
)
POLL_LIMIT = 1000
TIMINGS = 7


async def populate(pool: asyncpg.Pool, sessions: int, behind: int) -> list[str]:
    """`sessions` idle sessions, then one event in each of `behind` of them (random ones): answers those."""
    await pool.execute(
        "INSERT INTO orchestrator.sessions (id) SELECT 'ses_' || md5('walls' || g) FROM generate_series(1, $1) g",
        sessions,
    )
    await pool.execute("INSERT INTO orchestrator.routing_cursors (session_id) SELECT id FROM orchestrator.sessions")
    await make_behind(pool, behind)
    await pool.execute("VACUUM ANALYZE orchestrator.sessions, orchestrator.routing_cursors")
    return [r["id"] for r in await pool.fetch("SELECT id FROM orchestrator.sessions WHERE last_event_id > 0")]


async def make_behind(pool: asyncpg.Pool, count: int, among: list[str] | None = None) -> None:
    """One more event in `count` random sessions (or in each of `among`), not routed."""
    await pool.execute(
        "WITH picked AS (SELECT id FROM orchestrator.sessions WHERE $2::text[] IS NULL OR id = ANY($2)"
        "                ORDER BY random() LIMIT $1),"
        " e AS (INSERT INTO orchestrator.events (id, session_id, type)"
        "       SELECT nextval('orchestrator.event_ids'), id, 'bench.idle' FROM picked RETURNING id, session_id)"
        " UPDATE orchestrator.sessions s SET last_event_id = e.id FROM e WHERE e.session_id = s.id",
        count,
        among,
    )


class Timer:
    """Statements on one connection of their own: wall time and the backend's CPU time, so that a figure taken
    on a loaded machine still says what the statement itself costs."""

    def __init__(self, conn: PoolConnectionProxy[Record], backend: int) -> None:
        self.conn = conn
        self.backend = backend

    @classmethod
    async def on(cls, pool: asyncpg.Pool) -> Timer:
        conn = await pool.acquire()
        return cls(conn, int(await conn.fetchval("SELECT pg_backend_pid()")))

    async def time(self, statement: str, *args: object, calls: int = TIMINGS) -> tuple[float, float, int]:
        """The statement's median wall time over `calls` calls and its mean CPU time (ms), and the rows it
        answered the last time."""
        times, found = [], 0
        cpu = cpu_seconds(self.backend)
        for _ in range(calls):
            began = time.perf_counter()
            found = len(await self.conn.fetch(statement, *args))
            times.append(1000 * (time.perf_counter() - began))
        return statistics.median(times), 1000 * (cpu_seconds(self.backend) - cpu) / calls, found

    async def each(self, statement: str, values: list[str]) -> tuple[float, float]:
        """Wall and CPU time (ms) of the statement once for each value, one after another."""
        cpu, began = cpu_seconds(self.backend), time.perf_counter()
        for value in values:
            await self.conn.fetchval(statement, value)
        return 1000 * (time.perf_counter() - began), 1000 * (cpu_seconds(self.backend) - cpu)


async def poll_case(url: str, counts: list[int], routers: int) -> None:
    print(f"poll: sessions behind; each statement's median wall time over {TIMINGS} calls and its mean CPU")
    settings = Settings()
    for sessions in counts:
        platform = await Platform.connect(settings, url)
        pool = platform.store.pool
        timer = await Timer.on(pool)
        try:
            await pool.execute("TRUNCATE orchestrator.sessions, orchestrator.events, orchestrator.routing_poll CASCADE")
            few = max(sessions // 100, 10)
            await populate(pool, sessions, few)
            print(f"{sessions:,} sessions, {few:,} behind (wall ms, CPU ms)")
            old = await timer.time(OLD_POLL, POLL_LIMIT)
            pair(f"the poll until 0030 ({old[2]} found)", old)
            new = await timer.time(NEW_POLL, 0.0, POLL_LIMIT)
            pair(f"the poll in order, in turn ({new[2]} found)", new)
            skip = await timer.time(NEW_POLL, 3600.0, POLL_LIMIT)
            pair(f"a router whose turn it is not ({skip[2]} found)", skip)
            pair(f"{routers} routers' polls every 2 s, until 0030", (routers * old[0], routers * old[1]))
            pair(
                f"{routers} routers' polls every 2 s, in turn",
                (new[0] + (routers - 1) * skip[0], new[1] + (routers - 1) * skip[1]),
            )
            # What a poll hands a router: a round for each session found. Until 0030 every router got the same
            # ones: the first routed them, the others' rounds found nothing to read.
            behind = [r["id"] for r in await pool.fetch(OLD_POLL, POLL_LIMIT)]
            pair(f"rounds of the {len(behind)} found, one event each", await timer.each(ROUND, behind))
            pair("the same rounds again, nothing left to read", await timer.each(ROUND, behind))
            if sessions <= 1500:
                continue
            # Many behind at once (a busy deployment: those routed by their notifications) and one more past
            # them: do polls that route nothing reach it?
            await make_behind(pool, 1500)
            lost = await pool.fetchval(
                "SELECT id FROM orchestrator.sessions WHERE last_event_id = 0 ORDER BY id DESC LIMIT 1"
            )
            await make_behind(pool, 1, [lost])
            await pool.execute("UPDATE orchestrator.routing_poll SET after = ''")
            total = await pool.fetchval(
                "SELECT count(*) FROM orchestrator.sessions s JOIN orchestrator.routing_cursors c"
                " ON c.session_id = s.id WHERE s.last_event_id > c.routed_event_id"
            )
            print(f"  {total:,} behind at once, one of them with the greatest id: polls until it is found")
            print(f"    until 0030: {await polls_to_reach(pool, lost, old=True)}")
            print(f"    in order, in turn: {await polls_to_reach(pool, lost, old=False)}")
        finally:
            await pool.release(timer.conn)
            await platform.close()


def pair(label: str, figures: tuple[float, ...]) -> None:
    print(f"  {label:<58} {figures[0]:>10,.1f} {figures[1]:>10,.1f}")


async def polls_to_reach(pool: asyncpg.Pool, session: str, old: bool, most: int = 10) -> str:
    for n in range(1, most + 1):
        if old:
            found = [r["id"] for r in await pool.fetch(OLD_POLL, POLL_LIMIT)]
        else:
            found = [r["id"] for r in await pool.fetch(NEW_POLL, 0.0, POLL_LIMIT)]
        if session in found:
            return str(n)
    return f"more than {most} (never, while the others stay behind)"


ROUND = "SELECT orchestrator.orchestrator_route_page($1, 2000, 16)"
NEW_POLL = "SELECT orchestrator.orchestrator_sessions_behind($1, $2) AS id"


APPEND = "SELECT orchestrator.orchestrator_append($1, 'bench.idle', NULL, NULL, NULL, '{}', 0, NULL, NULL, NULL, NULL)"
WAKE_SESSIONS = 500
WAKE_RATE = 400  # writes a second: each in a session no write touched for over a second, so no round is shared


async def wakeups_case(url: str, writes: int, counts: list[int]) -> None:
    print(f"wakeups: {writes:,} appends at {WAKE_RATE}/s, one notification each, beside idle routers")
    settings = Settings(database_pool_size=2)
    platform = await Platform.connect(settings, url)
    writer = await platform.store.pool.acquire()
    postgres = await postmaster_pid(url)
    try:
        await platform.store.pool.execute(
            "TRUNCATE orchestrator.sessions, orchestrator.events, orchestrator.routing_poll CASCADE"
        )
        await populate(platform.store.pool, WAKE_SESSIONS, 0)
        sessions = [r["id"] for r in await platform.store.pool.fetch("SELECT id FROM orchestrator.sessions")]
        base: tuple[float, float] | None = None
        for count in [0, *counts]:
            routers = [await idle_router(url, settings) for _ in range(count)]
            tasks = [asyncio.create_task(router.run()) for router, _ in routers]
            await settled([router for router, _ in routers])
            meter = CpuMeter(None, postgres)
            meter.start()
            began = time.perf_counter()
            for n in range(writes):
                await writer.fetchval(APPEND, sessions[n % len(sessions)])
                if (wait := began + (n + 1) / WAKE_RATE - time.perf_counter()) > 0:
                    await asyncio.sleep(wait)
            await asyncio.sleep(0.5)  # the last wake-ups
            used = meter.stop()
            here, server = 1e6 * used["worker and router"] / writes, 1e6 * used["PostgreSQL"] / writes
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            rounds = sum(router.rounds for router, _ in routers)
            for _, store in routers:
                await store.close()
            print(f"{count} routers: {rounds / writes:.2f} rounds a notification")
            pair("CPU per notification, this process and PostgreSQL (us)", (here, server))
            if base is None:
                base = (here, server)
            elif count:
                pair("  each router's share (us)", ((here - base[0]) / count, (server - base[1]) / count))
    finally:
        await platform.store.pool.release(writer)
        await platform.close()


async def settled(routers: list[CountingRouter], within: float = 15.0) -> None:
    """Until the routers hold every wake-up shard between them, each some (`core/wake_shards.py`)."""
    deadline = time.monotonic() + within
    while routers and time.monotonic() < deadline:
        if wake_shards.shared_out([r.listener.held if r.listener is not None else set() for r in routers]):
            return
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.2)


class CountingRouter(Router):
    """A router that counts its rounds (the nudges it would send go nowhere: no listener takes anything)."""

    rounds = 0

    async def route_session(self, session_id: str) -> int:
        self.rounds += 1
        return await super().route_session(session_id)


async def idle_router(url: str, settings: Settings) -> tuple[CountingRouter, EngineRecords]:
    store = await EngineRecords.open(url, pool_size=2)
    return CountingRouter(store, store.lanes, None, url, settings), store  # type: ignore[arg-type]


RETAINED_SESSIONS = 100


async def retention_case(url: str, events: int) -> None:
    print(f"retention: {events:,} events of 60 days ago in {RETAINED_SESSIONS} sessions (wall, CPU, WAL)")
    platform = await Platform.connect(Settings(), url)
    pool = platform.store.pool
    timer = await Timer.on(pool)
    try:
        await pool.execute("TRUNCATE orchestrator.sessions, orchestrator.events, orchestrator.routing_poll CASCADE")
        await populate(pool, RETAINED_SESSIONS, 0)
        sessions = [r["id"] for r in await pool.fetch("SELECT id FROM orchestrator.sessions")]
        await pool.execute(
            "INSERT INTO orchestrator.events (id, session_id, type, data, created_at)"
            " SELECT nextval('orchestrator.event_ids'), ($1::text[])[1 + g % cardinality($1::text[])], 'bench.fact',"
            "        jsonb_build_object('n', g, 'customer', 'c' || g % 97), now() - interval '60 days'"
            " FROM generate_series(1, $2) g",
            sessions,
            events,
        )
        await pool.execute(
            "UPDATE orchestrator.sessions s SET last_event_id = m.id FROM (SELECT session_id, max(id) AS id"
            " FROM orchestrator.events GROUP BY 1) m WHERE m.session_id = s.id;"
            "UPDATE orchestrator.routing_cursors c SET routed_event_id = s.last_event_id FROM orchestrator.sessions s"
            " WHERE s.id = c.session_id;"
            "CREATE TABLE orchestrator.bench_partition (LIKE orchestrator.events INCLUDING ALL);"
            "INSERT INTO orchestrator.bench_partition SELECT * FROM orchestrator.events"
        )
        await pool.execute("VACUUM ANALYZE orchestrator.events, orchestrator.bench_partition")
        wal = await wal_at(pool)
        trims = 0
        cpu, began = cpu_seconds(timer.backend), time.perf_counter()
        for session in sessions:
            while True:
                trims += 1
                done = await timer.conn.fetchval(
                    "SELECT orchestrator.orchestrator_trim_session($1, 1000, 86400, 86400)", session
                )
                if not done["more"]:
                    break
        figures = (1e6 * (time.perf_counter() - began) / events, 1e6 * (cpu_seconds(timer.backend) - cpu) / events)
        left = await pool.fetchval("SELECT count(*) FROM orchestrator.events")
        triple(
            f"trimmed, per event ({trims} statements, {left} left), us", (*figures, (await wal_at(pool) - wal) / events)
        )
        wal = await wal_at(pool)
        cpu, began = cpu_seconds(timer.backend), time.perf_counter()
        await timer.conn.execute("VACUUM orchestrator.events")
        figures = (1e6 * (time.perf_counter() - began) / events, 1e6 * (cpu_seconds(timer.backend) - cpu) / events)
        triple("the vacuum after it, per event, us", (*figures, (await wal_at(pool) - wal) / events))
        wal = await wal_at(pool)
        cpu, began = cpu_seconds(timer.backend), time.perf_counter()
        await timer.conn.execute("DROP TABLE orchestrator.bench_partition")
        took = (1000 * (time.perf_counter() - began), 1000 * (cpu_seconds(timer.backend) - cpu))
        triple("the same rows dropped as one table, in all, ms", (*took, await wal_at(pool) - wal))
    finally:
        await pool.release(timer.conn)
        await platform.close()


async def wal_at(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn"))


def triple(label: str, figures: tuple[float, float, float]) -> None:
    print(f"  {label:<62} {figures[0]:>8,.1f} {figures[1]:>8,.1f} {figures[2]:>8,.0f} B")


# A commit that wrote (one that did not waits for no standby) and notified. The other database's commits wait
# for no standby (`synchronous_commit = local`).
WRITE_AND_NOTIFY = "BEGIN; INSERT INTO walls_written VALUES (1); SELECT pg_notify('walls', '{}'); COMMIT"


async def notify_lock_case(url: str) -> None:
    print("notify_lock: a notifying commit held in one database, commits in another database of the same server")
    admin = await asyncpg.connect(url, database="postgres")
    await admin.execute("DROP DATABASE IF EXISTS walls_other")
    await admin.execute("CREATE DATABASE walls_other")
    for database in (None, "walls_other"):
        conn = await asyncpg.connect(url, database=database)
        await conn.execute("CREATE TABLE IF NOT EXISTS walls_written (n int)")
        await conn.close()
    await admin.execute("ALTER SYSTEM SET synchronous_standby_names = 'walls_nobody'")
    await admin.execute("SELECT pg_reload_conf()")
    await asyncio.sleep(0.5)  # the servers' processes read the setting again
    held = await asyncpg.connect(url)
    other = await asyncpg.connect(url, database="walls_other")
    try:
        await held.execute("SET synchronous_commit = on")
        await other.execute("SET synchronous_commit = local")
        # Waits at its commit for a standby, holding whatever its commit took.
        holding = asyncio.create_task(held.execute(WRITE_AND_NOTIFY.format("held")))
        await asyncio.sleep(0.5)
        print(f"  the first commit, after 0.5 s: {'done' if holding.done() else 'waiting'}")
        began = time.perf_counter()
        await other.execute("INSERT INTO walls_written VALUES (1)")
        print(f"  a plain commit in the other database: {1000 * (time.perf_counter() - began):.1f} ms")
        began = time.perf_counter()
        notifying = asyncio.create_task(other.execute(WRITE_AND_NOTIFY.format("other")))
        await asyncio.sleep(1.0)
        locks = await admin.fetch(
            "SELECT l.granted, d.datname FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
            " JOIN pg_database d ON d.oid = a.datid"
            " WHERE l.locktype = 'object' AND l.database = 0 AND l.classid = 'pg_database'::regclass AND l.objid = 0"
        )
        for lock in locks:
            print(f"  the lock on database 0: {'held' if lock['granted'] else 'waited for'} from {lock['datname']}")
        print(f"  a notifying commit in the other database, after 1 s: {'done' if notifying.done() else 'waiting'}")
        await admin.execute("SELECT pg_cancel_backend($1)", held.get_server_pid())  # the held commit goes on
        await holding
        await notifying
        print(f"  ... done once the first was let go, {1000 * (time.perf_counter() - began):.0f} ms after it began")
    finally:
        await admin.execute("ALTER SYSTEM RESET synchronous_standby_names")
        await admin.execute("SELECT pg_reload_conf()")
        await held.close()
        await other.close()
        await admin.execute("DROP DATABASE IF EXISTS walls_other")
        await admin.close()


WRITES_A_BATCH = 10
ACTION_LISTENERS = {
    "walls_run": {"type": "workflow", "workflow": "bench_run_two"},
    "walls_object": {
        "type": "object",
        "alias": "views/walls",
        "value": {"type": "digest", "through": "{{ batch.last_id }}"},
    },
}


async def actions_case(batches: int) -> None:
    from bench.batch_cost import two_activity_engine
    from bench.burst import Starts, bench_platform

    print(f"actions: {batches} batches of each action, {WRITES_A_BATCH} writes each, histories counted")
    async with bench_platform() as bench:
        platform = bench.platform
        async with two_activity_engine(platform, bench.client, Starts(expected=batches * WRITES_A_BATCH)):
            session = (await platform.command({"command": "open_session"}))["session"]["id"]
            for name, action in ACTION_LISTENERS.items():
                body = {
                    "name": name,
                    "filter": {"types": ["object.written"], "aliases": [f"{name}/**"]},
                    "batch": {"window_seconds": 1, "max_events": 1000},
                    "action": action,
                }
                reply = await platform.command({"command": "save_listener", "listener": body})
                assert reply["status"] == "success", reply
            for b in range(batches):
                for name in ACTION_LISTENERS:
                    for n in range(WRITES_A_BATCH):
                        value = {"type": "bench", "n": n}
                        command = {"command": "write_object", "session_id": session, "alias": f"{name}/{b}/{n}"}
                        reply = await platform.command({**command, "value": value})
                        assert reply["status"] == "success", reply
                await asyncio.sleep(1.5)
            store = platform.store
            for _ in range(600):
                counts = await store.outcome_counts(session)
                done = all(sum(counts.get(name, {}).values()) >= batches for name in ACTION_LISTENERS)
                if done and not await store.running_executions(session):
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(2.0)  # the runs' ends and the lanes' last tasks
            for name, counted in (await history_actions(bench.client, platform.settings.task_queue)).items():
                made = sum((await store.outcome_counts(session)).get(name, {}).values())
                print(f"{name}: {made} batches, {counted.pop('workflows')} workflow executions")
                for what, n in sorted(counted.items()):
                    print(f"  {what:<58} {n / made:>10.2f} a batch")


async def history_actions(client: Any, task_queue: str) -> dict[str, dict[str, int]]:
    """Per listener (by the workflow ids of its lanes and runs): its workflows' billable actions by kind and
    their workflow tasks, read from their histories."""
    from temporalio.api.enums.v1 import EventType

    found: dict[str, dict[str, int]] = {}
    async for execution in client.list_workflows(f"TaskQueue = '{task_queue}'"):
        listener = next((n for n in ACTION_LISTENERS if f":{n}:" in execution.id), None)
        if listener is None:
            continue
        counted = found.setdefault(listener, {"workflows": 0})
        counted["workflows"] += 1
        kind = "lane" if execution.id.startswith("lane:") else "run"
        history = await client.get_workflow_handle(execution.id, run_id=execution.run_id).fetch_history()
        events = list(history.events)
        with_start = len(events) > 1 and events[1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
        local_tasks: set[int] = set()
        for i, e in enumerate(events):
            name = EventType.Name(e.event_type).removeprefix("EVENT_TYPE_").lower()
            if name == "workflow_execution_started":
                bill(counted, kind, "started by signal-with-start" if with_start else "started", 1)
            elif name == "workflow_execution_signaled" and not (with_start and i == 1):
                bill(counted, kind, "signal", 1)
            elif name == "timer_started":
                bill(counted, kind, "timer", 1)
            elif name == "activity_task_started":
                bill(counted, kind, "activity attempt", e.activity_task_started_event_attributes.attempt)
            elif name == "marker_recorded":
                local_tasks.add(e.marker_recorded_event_attributes.workflow_task_completed_event_id)
            elif name == "start_child_workflow_execution_initiated":
                bill(counted, kind, "child start (two each)", 1, each=2)
            elif name == "upsert_workflow_search_attributes":
                bill(counted, kind, "search attribute upsert", 1)
            elif name == "workflow_execution_update_accepted":
                bill(counted, kind, "update", 1)
            elif name == "workflow_task_completed":
                add(counted, f"{kind}: workflow tasks (not billed)", 1)
        bill(counted, kind, "workflow tasks with local activities", len(local_tasks))
    return found


def bill(counted: dict[str, int], kind: str, what: str, n: int, each: int = 1) -> None:
    add(counted, f"{kind}: {what}", n)
    add(counted, "billed actions, all", n * each)


def add(counted: dict[str, int], what: str, n: int) -> None:
    counted[what] = counted.get(what, 0) + n


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default="poll,wakeups,retention,actions,notify_lock")
    parser.add_argument("--sessions", default="1000,10000,100000")
    parser.add_argument("--routers", type=int, default=8)
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--idle-routers", default="1,4,16")
    parser.add_argument("--retained", type=int, default=200_000)
    parser.add_argument("--batches", type=int, default=10)
    args = parser.parse_args()
    cases = args.cases.split(",")
    async with scratch_database() as url:
        if "poll" in cases:
            await poll_case(url, [int(n) for n in args.sessions.split(",")], args.routers)
        if "wakeups" in cases:
            await wakeups_case(url, args.writes, [int(n) for n in args.idle_routers.split(",")])
        if "retention" in cases:
            await retention_case(url, args.retained)
        if "notify_lock" in cases:
            await notify_lock_case(url)
    if "actions" in cases:
        await actions_case(args.batches)


if __name__ == "__main__":
    asyncio.run(main())
