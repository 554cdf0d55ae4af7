"""`bench.vs_pgqueuer`'s yardstick side runs: PgQueuer's schema installed beside the platform's database, jobs
enqueued in batches by the writers' function, and every one handled by the consumer's (here in threads, where
the benchmark gives each a process of its own)."""

from __future__ import annotations

import asyncio
import queue
import threading
import uuid

from bench.vs_pgqueuer import _consume, _enqueue, pgqueuer_database
from orchestrator.dev.embedded import EmbeddedPostgres

JOBS = 250


async def test_the_yardstick_handles_every_job_enqueued(embedded_pg: EmbeddedPostgres) -> None:
    dsn = await pgqueuer_database(embedded_pg.url, f"pgqueuer_{uuid.uuid4().hex[:12]}")
    ready: queue.Queue[int] = queue.Queue()
    done: queue.Queue[float] = queue.Queue()
    stop = threading.Event()
    consumer = threading.Thread(target=_consume, args=(dsn, JOBS, 10, ready, done, stop), daemon=True)
    consumer.start()
    try:
        await asyncio.to_thread(ready.get, True, 30)
        began, ended = await asyncio.to_thread(_enqueue, dsn, JOBS, 100)
        handled_at = await asyncio.to_thread(done.get, True, 60)
        assert began <= ended and began <= handled_at
    finally:
        stop.set()
        await asyncio.to_thread(consumer.join, 30)
    assert not consumer.is_alive()
