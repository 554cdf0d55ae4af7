"""Behind PgBouncer on its default settings, in session mode (everything through it) and in transaction mode (the
API's and the workers' pools through it with no named prepared statements, the router's LISTEN straight to
PostgreSQL). Writes, listeners and runs work, and nothing is lost across a SIGKILL of PgBouncer restarted five
seconds later; the migrations run through it in either mode, processes that start together included."""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import pytest
from temporalio.testing import WorkflowEnvironment

from orchestrator.config import Settings
from orchestrator.dev.embedded import EmbeddedPostgres
from orchestrator.platform import Platform
from orchestrator.store.migrate import function_files, migrate, migration_files
from tests.conftest import scratch_database
from tests.engine.harness import Engine, eventually, new_session, recorder_listener, running_engine
from tests.pooler.conftest import PgBouncer, needs_pgbouncer
from tests.store.test_function_files import LOCKS_HELD

pytestmark = [needs_pgbouncer, pytest.mark.devserver]

OUTAGE_SECONDS = 5.0
# Writes at once: enough that PgBouncer hands one client's transactions to different server connections.
AT_ONCE = 20


async def write(platform: Platform, session_id: str, n: int) -> dict[str, Any]:
    return await platform.command(
        {"command": "write_object", "session_id": session_id, "alias": f"missions/{n % 7}", "value": {"type": "m"}}
    )


async def delivered(engine: Engine, session_id: str) -> set[int]:
    return {i for r in engine.log.runs if r.input["session_id"] == session_id for i in r.input["batch"]["event_ids"]}


async def committed(engine: Engine, session_id: str) -> set[int]:
    page = await engine.command("list_session_events", session_id=session_id, types=["object.written"], limit=1000)
    return {e["id"] for e in page["events"]}


async def test_writes_listeners_and_runs_work_through_pgbouncer_and_survive_its_restart(
    pooled: Platform, bouncer: PgBouncer, dev_env: WorkflowEnvironment
) -> None:
    async with running_engine(pooled, dev_env.client) as engine:
        await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 0.2}))
        sid = await new_session(engine)
        # Many writes at once, each its own statements on whatever server connection PgBouncer hands out.
        replies = await asyncio.gather(*(write(pooled, sid, n) for n in range(AT_ONCE * 3)))
        assert all(r["status"] == "success" for r in replies), [r for r in replies if r["status"] != "success"]
        items = [{"type": "text", "role": "user", "message": f"m{n}"} for n in range(5)]
        await engine.command("post_thread_items", session_id=sid, alias="chats/1", items=items)
        acked = {int(r["event_id"]) for r in replies}

        async def all_delivered() -> bool:
            return acked <= await delivered(engine, sid)

        await eventually(all_delivered, what="every write delivered to a run through PgBouncer")

        # A run is heard by the recorder before its end is recorded: its count follows a moment later.
        async def a_run_succeeded() -> bool:
            listeners = await engine.command("list_session_listeners", session_id=sid)
            return int(listeners["listeners"][0]["counts"].get("success", 0)) >= 1

        await eventually(a_run_succeeded, what="a run's success counted through PgBouncer")

        # A writer that keeps writing (and retrying what fails) through a SIGKILL of PgBouncer and its restart.
        failures: list[dict[str, Any]] = []
        stop = asyncio.Event()

        async def keep_writing() -> None:
            n = 0
            while not stop.is_set():
                answer = await write(pooled, sid, n)
                if answer["status"] == "success":
                    acked.add(int(answer["event_id"]))
                    n += 1
                else:
                    failures.append(answer)
                await asyncio.sleep(0.05)

        writer = asyncio.create_task(keep_writing())
        await asyncio.sleep(1.0)
        bouncer.kill()
        killed_at = time.monotonic()
        await asyncio.sleep(OUTAGE_SECONDS)
        await bouncer.start()
        before = len(acked)

        async def writing_again() -> bool:
            return len(acked) >= before + 20

        await eventually(writing_again, within=30, what="writes through PgBouncer again after its restart")
        stop.set()
        await writer
        assert failures, "the writes in the outage failed (PgBouncer really was down)"
        assert all(f["error"] == "unavailable" and f["retry_after"] == 1 for f in failures), failures[:3]
        # Nothing lost: every write acknowledged, and every one committed, reaches a run.
        await eventually(all_delivered, within=90, what="every acknowledged write delivered after the restart")
        assert await committed(engine, sid) <= await delivered(engine, sid)
        assert time.monotonic() - killed_at < 120


async def test_processes_that_start_together_migrate_through_pgbouncer(
    bouncer: PgBouncer, embedded_pg: EmbeddedPostgres, settings: Settings
) -> None:
    """The runner keeps nothing across transactions (its lock is each transaction's, each migration sets its
    search path with SET LOCAL), so it needs no session of its own: in transaction mode each of its transactions
    may run on another server connection."""
    async with scratch_database(embedded_pg, "pooled") as url:
        through = bouncer.url_for(urlsplit(url).path.lstrip("/"))
        conns = [await asyncpg.connect(through, statement_cache_size=0) for _ in range(3)]
        try:
            answers = await asyncio.gather(*(migrate(conn) for conn in conns))
        finally:
            for conn in conns:
                await conn.close()
        shipped = [name for _, name, _ in migration_files()] + [name for name, _ in function_files()]
        assert sorted(name for answer in answers for name in answer) == sorted(shipped), "each applied once"
        direct = await asyncpg.connect(url)
        try:
            assert await direct.fetchval(LOCKS_HELD) == 0
        finally:
            await direct.close()
        # The platform started through it alone (no direct URL; no LISTEN here), its pools without named statements.
        platform = await Platform.connect(settings.model_copy(update={"database_statement_cache_size": 0}), through)
        try:
            sid = (await platform.command({"command": "open_session"}))["session"]["id"]
            assert (await write(platform, sid, 1))["status"] == "success"
        finally:
            await platform.close()
