"""A write at the door that waits for its session's row lock on a database that answers: bounded by the door's
deadline, with no `lock_timeout` (docs/decisions.md, "A command's deadline"). It is answered `unavailable` at the
deadline, left as long again to get its lock and end whole, then cancelled, which ends its wait within a round
trip: it holds no connection, and waits for no lock, past that."""

from __future__ import annotations

import time

import asyncpg
import httpx

from orchestrator.config import Settings
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.door.deadlines import CANCEL_GRACE_SECONDS
from orchestrator.platform import Platform
from tests.engine.harness import eventually

DEADLINE = 1.0


async def test_a_write_waiting_for_its_sessions_lock_is_answered_at_the_deadline_and_its_wait_ended_after(
    platform: Platform, settings: Settings
) -> None:
    quick = settings.model_copy(update={"command_deadline_seconds": DEADLINE})
    app = create_app(platform, quick)
    holder = await asyncpg.connect(platform.database_url)
    try:
        async with serve_api(app, "127.0.0.1", 0) as url, httpx.AsyncClient(base_url=url, timeout=15) as http:
            sid = (await http.post("/v1/commands", json={"command": "open_session"})).json()["session"]["id"]
            write = {"command": "write_object", "session_id": sid, "alias": "notes/a", "value": {"type": "note"}}
            async with holder.transaction():
                # A transaction of the application's own that holds the session's row (an `emit` in it, say).
                await holder.execute("SELECT 1 FROM orchestrator.sessions WHERE id = $1 FOR UPDATE", sid)
                began = time.monotonic()
                answer = await http.post("/v1/commands", json={**write, "idempotency_key": "a"})
                assert answer.status_code == 503, answer.text
                assert DEADLINE - 0.1 <= time.monotonic() - began < DEADLINE + 3.0
                assert answer.json()["message"].startswith(f"database: no answer within {DEADLINE:g} s; the write")

                async def none_waiting() -> bool:
                    waiting = await holder.fetchval(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                        " AND datname = current_database()"
                    )
                    return waiting == 0 and app.state.deadlines.unfinished == 0

                # Left a deadline more to end whole, then cancelled: its statement ends within a round trip.
                await eventually(none_waiting, within=DEADLINE + CANCEL_GRACE_SECONDS + 5, what="the lock wait ended")
                assert time.monotonic() - began < 2 * DEADLINE + CANCEL_GRACE_SECONDS + 3.0
            # Cancelled before its lock came: not made; a retry with its key is made once.
            again = await http.post("/v1/commands", json={**write, "idempotency_key": "a"})
            assert again.status_code == 200, again.text
            assert again.json()["object"]["rev"] == 1
    finally:
        await holder.close()
