"""Walls on the way to many sessions and many events a second, each measured on its own.

- `poll`: the router's slow poll for sessions behind their routed position, at 1,000, 10,000 and 100,000
  sessions (most idle, some behind): the poll statement's time, and whether a session behind past the first
  1,000 is reached by polls alone while the others stay behind.

Run: .venv/bin/python -m bench.walls [--cases poll] [--sessions 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import asyncpg

from bench.common import row, scratch_database
from orchestrator.config import Settings
from orchestrator.platform import Platform

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


async def timed(pool: asyncpg.Pool, statement: str, *args: object) -> tuple[float, int]:
    """The statement's median wall time over `TIMINGS` calls (ms), and the rows it answered."""
    times, found = [], 0
    for _ in range(TIMINGS):
        began = time.perf_counter()
        found = len(await pool.fetch(statement, *args))
        times.append(1000 * (time.perf_counter() - began))
    return statistics.median(times), found


async def poll_case(url: str, counts: list[int]) -> None:
    print("poll: sessions behind, the statement's median time over", TIMINGS, "calls")
    settings = Settings()
    for sessions in counts:
        platform = await Platform.connect(settings, url)
        pool = platform.store.pool
        try:
            await pool.execute("TRUNCATE orchestrator.sessions CASCADE")
            few = max(sessions // 100, 10)
            await populate(pool, sessions, few)
            print(f"{sessions:,} sessions, {few:,} behind")
            ms, found = await timed(pool, OLD_POLL, POLL_LIMIT)
            row(f"  the poll until 0030 ({found} found)", ms, "ms")
            ms, found = await timed(pool, NEW_POLL, "", POLL_LIMIT)
            row(f"  the poll in order, after the last found ({found} found)", ms, "ms")
            # Many behind at once (a busy deployment: those routed by their notifications) and one more past
            # them: does a poll that routes nothing reach it?
            await make_behind(pool, 1500)
            lost = await pool.fetchval(
                "SELECT id FROM orchestrator.sessions WHERE last_event_id = 0 ORDER BY id DESC LIMIT 1"
            )
            await make_behind(pool, 1, [lost])
            total = await pool.fetchval(
                "SELECT count(*) FROM orchestrator.sessions s JOIN orchestrator.routing_cursors c"
                " ON c.session_id = s.id WHERE s.last_event_id > c.routed_event_id"
            )
            ms, found = await timed(pool, OLD_POLL, POLL_LIMIT)
            reached = await polls_to_reach(pool, lost, old=True)
            row(f"  until 0030, {total:,} behind ({found} found)", ms, "ms")
            print(f"    the last session behind reached after {reached} polls")
            ms, found = await timed(pool, NEW_POLL, "", POLL_LIMIT)
            reached = await polls_to_reach(pool, lost, old=False)
            row(f"  in order, {total:,} behind ({found} found)", ms, "ms")
            print(f"    the last session behind reached after {reached} polls")
        finally:
            await platform.close()


async def polls_to_reach(pool: asyncpg.Pool, session: str, old: bool, most: int = 10) -> str:
    after = ""
    for n in range(1, most + 1):
        if old:
            found = [r["id"] for r in await pool.fetch(OLD_POLL, POLL_LIMIT)]
        else:
            found = [r["id"] for r in await pool.fetch(NEW_POLL, after, POLL_LIMIT)]
            after = found[-1] if found else ""
        if session in found:
            return str(n)
    return f"more than {most} (never, while the others stay behind)"


NEW_POLL = (
    "SELECT s.id FROM orchestrator.sessions s JOIN orchestrator.routing_cursors c ON c.session_id = s.id"
    " WHERE s.last_event_id > c.routed_event_id ORDER BY s.id <= $1, s.id LIMIT $2"
)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default="poll")
    parser.add_argument("--sessions", default="1000,10000,100000")
    args = parser.parse_args()
    cases = args.cases.split(",")
    async with scratch_database() as url:
        if "poll" in cases:
            await poll_case(url, [int(n) for n in args.sessions.split(",")])


if __name__ == "__main__":
    asyncio.run(main())
