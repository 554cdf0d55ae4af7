"""Sessions open, close and reopen; a closed session refuses writes and changes nothing."""

from __future__ import annotations

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
