"""Writing 10,000 events through the Python client, against raw asyncpg inserts of the same rows.

Both run in one process on one embedded PostgreSQL, side by side, so the ratio is what matters on a shared
machine. The client path is the whole command: validation, the session lock, the object upsert, the event
and its NOTIFY, in one transaction. Writes to one session are serialized by its lock (that is what keeps
its ids in commit order), so concurrent writers are measured on one session and on a session each. The
raw path inserts the same event rows into a bare table, one statement per row (autocommit), over the same
number of connections.

Run: .venv/bin/python -m bench.write_events [--events 10000] [--writers 1 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import asyncpg

from bench.common import row, scratch_database
from orchestrator.client import Client
from orchestrator.config import Settings
from orchestrator.platform import Platform


async def through_client(platform: Platform, events: int, writers: int, *, own_sessions: bool = False) -> float:
    async with Client.local(platform) as client:
        shared = (await client.open_session())["session"]["id"]
        sessions = [(await client.open_session())["session"]["id"] if own_sessions else shared for _ in range(writers)]
        per_writer = events // writers

        async def writer(w: int) -> None:
            for n in range(per_writer):
                await client.write_object(sessions[w], f"bench/{w}/{n % 50}", {"type": "bench", "n": n})

        start = time.perf_counter()
        await asyncio.gather(*(writer(w) for w in range(writers)))
        return per_writer * writers / (time.perf_counter() - start)


async def raw_inserts(url: str, events: int, writers: int) -> float:
    pool = await asyncpg.create_pool(url, min_size=writers, max_size=writers)
    await pool.execute(
        "CREATE TABLE IF NOT EXISTS raw_events (id bigserial PRIMARY KEY, session_id text, type text,"
        " alias text, source jsonb, depth int, data jsonb, created_at timestamptz DEFAULT clock_timestamp())"
    )
    per_writer = events // writers

    async def writer(w: int) -> None:
        async with pool.acquire() as conn:
            for n in range(per_writer):
                await conn.execute(
                    "INSERT INTO raw_events (session_id, type, alias, source, depth, data)"
                    " VALUES ($1, $2, $3, $4::jsonb, 0, $5::jsonb)",
                    "ses_bench",
                    "object.written",
                    f"bench/{w}/{n % 50}",
                    "{}",
                    json.dumps({"rev": n}),
                )

    start = time.perf_counter()
    await asyncio.gather(*(writer(w) for w in range(writers)))
    rate = per_writer * writers / (time.perf_counter() - start)
    await pool.close()
    return rate


async def main(events: int, writer_counts: list[int]) -> None:
    async with scratch_database() as url:
        platform = await Platform.connect(Settings(), url)
        try:
            print(f"write_events: {events:,} events per measurement, embedded PostgreSQL")
            for writers in writer_counts:
                raw = await raw_inserts(url, events, writers)
                client = await through_client(platform, events, writers)
                print(f"writers: {writers}")
                row("raw asyncpg INSERT, one row per statement", raw, "events/s")
                row("Python client write_object, one session", client, "events/s")
                row("client / raw", client / raw, "x")
                if writers > 1:
                    spread = await through_client(platform, events, writers, own_sessions=True)
                    row("Python client write_object, a session per writer", spread, "events/s")
                    row("client (a session per writer) / raw", spread / raw, "x")
        finally:
            await platform.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    asyncio.run(main(args.events, args.writers))
