"""A command through the HTTP door while its database hangs (every process of it stopped, its connections open):
answered `unavailable` within the door's deadline, saying whether the write may still commit, rather than for as
long as the database hangs; the work let go ends while the database still hangs (its connections closed), and once
the database answers again so does the door, and a write retried with its idempotency_key is made once. The
browser's routes (signing in and out, the page's config, stream tickets) are answered within the same deadline."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
import httpx
import pytest
from pydantic import SecretStr

from orchestrator.config import Settings
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.door.gate import CACHE_SECONDS
from orchestrator.platform import Platform
from tests.crash.conftest import RestartablePostgres
from tests.engine.harness import eventually

pytestmark = pytest.mark.xdist_group("crash")

DEADLINE = 2.0
# What an answer may take past its deadline: the HTTP round trip and the event loop on a loaded machine.
SLACK = 3.0
TOKEN = "s3cret"


async def post(http: httpx.AsyncClient, body: dict[str, Any]) -> tuple[httpx.Response, float]:
    """The door's answer to `body`, and how long it took."""
    began = time.monotonic()
    answer = await http.post("/v1/commands", json=body)
    return answer, time.monotonic() - began


def refused_in_time(answer: httpx.Response, took: float) -> str:
    """`answer` is `unavailable` (503, `Retry-After`), given within the deadline: its message."""
    assert answer.status_code == 503, answer.text
    assert answer.headers["retry-after"] == "1"
    reply = answer.json()
    assert reply["error"] == "unavailable" and reply["retry_after"] == 1, reply
    assert DEADLINE - 0.1 <= took < DEADLINE + SLACK, f"answered after {took:.1f} s, the deadline is {DEADLINE} s"
    return str(reply["message"])


async def test_a_command_on_a_database_that_hangs_is_answered_within_its_deadline_and_made_once_after(
    private_postgres: RestartablePostgres,
) -> None:
    # Two connections: the first write holds the one the pool keeps open, the second opens the other.
    settings = Settings(api_token=SecretStr(TOKEN), command_deadline_seconds=DEADLINE, database_pool_size=2)
    platform = await Platform.connect(settings, private_postgres.url)
    app = create_app(platform, settings)
    try:
        async with (
            serve_api(app, "127.0.0.1", 0) as url,
            # Longer than any answer here should take, and short of hanging the suite when the door hangs.
            httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=15) as http,
        ):
            opened, _ = await post(http, {"command": "open_session"})
            sid = opened.json()["session"]["id"]
            keyed = {"command": "write_object", "session_id": sid, "alias": "notes/a", "value": {"type": "note"}}
            keyed["idempotency_key"] = "note-a"
            unkeyed = {"command": "write_object", "session_id": sid, "alias": "notes/b", "value": {"type": "note"}}
            read = {"command": "list_session_events", "session_id": sid}

            private_postgres.freeze()
            try:
                # On the pool's open connection: its statement is out, and may still commit.
                said = refused_in_time(*await post(http, keyed))
                assert said == (
                    f"database: no answer within {DEADLINE:g} s; the write may still commit; a retry with the same"
                    " idempotency_key is safe (it is not made twice)"
                ), said
                # The first still holds its connection: this one waits for a new one, this read for the pool.
                (unmade, unmade_took), (unread, unread_took) = await asyncio.gather(
                    post(http, unkeyed), post(http, read)
                )
                said = refused_in_time(unmade, unmade_took)
                assert said.endswith("the command never reached the database, so nothing was made; try again"), said
                assert refused_in_time(unread, unread_took).endswith("nothing was changed; try again")

                # What was let go ends while the database still hangs: the connections it held were closed.
                deadlines = app.state.deadlines

                async def all_ended() -> bool:
                    return deadlines.unfinished == 0

                await eventually(all_ended, within=15, what="the work let go ended, the database still hanging")
                # And the door stays in time: the pool's connections were given back, not left on the server.
                refused_in_time(*await post(http, read))
            finally:
                private_postgres.thaw()

            # The door answers again at once: the retry of the write made with its key is made, once.
            again, _ = await post(http, keyed)
            assert again.status_code == 200, again.text
            assert again.json()["object"] == {"alias": "notes/a", "rev": 1}
            await settled(private_postgres.url)
            events, _ = await post(http, read)
            written = [e["alias"] for e in events.json()["events"] if e["type"] == "object.written"]
            assert written == ["notes/a"], "the write with its key made once; the one that never reached, never"
            missing, _ = await post(http, {"command": "read_object", "session_id": sid, "alias": "notes/b"})
            assert missing.json()["error"] == "not_found", missing.text
    finally:
        await platform.close()


async def test_the_browsers_routes_on_a_database_that_hangs_are_answered_within_the_deadline(
    private_postgres: RestartablePostgres,
) -> None:
    settings = Settings(api_token=SecretStr(TOKEN), command_deadline_seconds=DEADLINE, database_pool_size=2)
    platform = await Platform.connect(settings, private_postgres.url)
    app = create_app(platform, settings)
    try:
        async with (
            serve_api(app, "127.0.0.1", 0) as url,
            # Longer than any answer here should take, and short of hanging the suite when the door hangs.
            httpx.AsyncClient(base_url=url, timeout=15) as http,
        ):
            signed = await http.post("/dashboard/sign-in", json={"key": TOKEN})
            assert signed.status_code == 200, signed.text
            csrf = {"x-csrf-token": signed.json()["csrf"]}
            opened = await http.post("/v1/commands", json={"command": "open_session"}, headers=csrf)
            sid = opened.json()["session"]["id"]

            async def timed(answer: Any) -> tuple[httpx.Response, float]:
                began = time.monotonic()
                return await answer, time.monotonic() - began

            private_postgres.freeze()
            try:
                # The gate's look at the browser session lapses: each route asks the database.
                await asyncio.sleep(CACHE_SECONDS)
                answers = await asyncio.gather(
                    timed(http.get("/dashboard/config")),
                    timed(http.post("/dashboard/sign-in", json={"key": TOKEN})),
                    timed(http.post("/v1/stream-tickets", json={"session_id": sid}, headers=csrf)),
                    timed(http.post("/dashboard/sign-out", headers=csrf)),
                )
                for answer, took in answers:
                    said = refused_in_time(answer, took)
                    assert said.endswith("nothing was changed; try again"), said

                deadlines = app.state.deadlines

                async def all_ended() -> bool:
                    return deadlines.unfinished == 0

                await eventually(all_ended, within=15, what="the work let go ended, the database still hanging")
            finally:
                private_postgres.thaw()

            ticket = await http.post("/v1/stream-tickets", json={"session_id": sid}, headers=csrf)
            assert ticket.status_code == 200, ticket.text
            out = await http.post("/dashboard/sign-out", headers=csrf)
            assert out.status_code == 200, out.text
    finally:
        await platform.close()


async def settled(database_url: str) -> None:
    """Until the backends of the connections the door closed have ended: what they were sent is done (committed or
    rolled back) by then."""
    conn = await asyncpg.connect(database_url)

    async def none_busy() -> bool:
        busy = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
            " AND pid <> pg_backend_pid() AND state <> 'idle'"
        )
        return busy == 0

    try:
        await eventually(none_busy, within=15, what="the closed connections' backends ended")
    finally:
        await conn.close()
