"""Sessions open, close and reopen; a closed session refuses writes and changes nothing."""

from __future__ import annotations

import asyncio

from orchestrator.platform import Platform
from tests.store.helpers import all_events, ok, refused


async def test_open_session_answers_an_open_session(platform: Platform) -> None:
    reply = await ok(platform, "open_session")
    assert reply["session"]["status"] == "open"
    assert reply["session"]["id"].startswith("ses_")
    assert reply["session"]["alias"] is None


async def test_open_session_by_alias_is_idempotent(platform: Platform) -> None:
    first = await ok(platform, "open_session", alias="team/alpha")
    again = await ok(platform, "open_session", alias="team/alpha")
    assert first["session"] == again["session"]


async def test_a_closed_session_refuses_writes_and_reopens(platform: Platform) -> None:
    sid = (await ok(platform, "open_session"))["session"]["id"]
    closed = await ok(platform, "close_session", session_id=sid)
    assert closed["session"]["status"] == "closed"
    await refused(
        platform,
        "session_not_open",
        "session_id",
        "write_object",
        session_id=sid,
        alias="a/b",
        value={"type": "x"},
    )
    await refused(
        platform,
        "session_not_open",
        "session_id",
        "post_thread_item",
        session_id=sid,
        alias="chats/1",
        item={"type": "text", "message": "hi"},
    )
    assert await all_events(platform, sid) == []
    reopened = await ok(platform, "reopen_session", session_id=sid)
    assert reopened["session"]["status"] == "open"
    await ok(platform, "write_object", session_id=sid, alias="a/b", value={"type": "x"})


async def test_unknown_session_is_not_found(platform: Platform) -> None:
    await refused(platform, "not_found", "session_id", "close_session", session_id="ses_nope")
    await refused(
        platform,
        "not_found",
        "session_id",
        "write_object",
        session_id="ses_nope",
        alias="a",
        value={"type": "x"},
    )
    await refused(platform, "not_found", "session_id", "list_session_events", session_id="ses_nope")


async def test_a_session_deleted_while_writers_emit_into_it_leaves_no_event_behind(platform: Platform) -> None:
    # An event's row checks its session by the session's lock, not by a foreign key (0017): an emit racing the
    # deletion either commits before the session is marked, and is purged with it, or is refused.
    await ok(platform, "save_event_type", name="app.noted", schema={"type": "object"})
    sid = (await ok(platform, "open_session"))["session"]["id"]
    store = platform.store
    written = asyncio.Event()
    refusals: list[str] = []

    async def writer() -> None:
        while True:
            events = [{"type": "app.noted", "data": {"n": n}} for n in range(20)]
            reply = await platform.command({"command": "emit_events", "session_id": sid, "events": events})
            if reply["status"] != "success":
                refusals.append(reply["error"])
                return
            written.set()

    writers = [asyncio.create_task(writer()) for _ in range(8)]
    await written.wait()
    assert await store.mark_deleting(sid)
    assert await store.pool.fetchval("SELECT count(*) FROM orchestrator.events WHERE session_id = $1", sid) > 0

    async def purged() -> None:
        while not (await store.purge_step(sid, 50))["done"]:
            pass

    # A purge that never ends is writers still appending to a session being deleted.
    await asyncio.wait_for(purged(), timeout=60)
    await asyncio.wait_for(asyncio.gather(*writers), timeout=30)
    assert refusals and set(refusals) <= {"not_found", "session_not_open"}, refusals
    assert await store.pool.fetchval("SELECT count(*) FROM orchestrator.events WHERE session_id = $1", sid) == 0
    assert await store.pool.fetchval("SELECT count(*) FROM orchestrator.sessions WHERE id = $1", sid) == 0
