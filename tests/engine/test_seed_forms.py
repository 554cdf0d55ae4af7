"""The seed documents' own listener bodies, fed verbatim: accepted, and meaning what the seed says."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from orchestrator.core.events import MESSAGE_PREVIEW_CHARS
from tests.engine.harness import Engine, eventually, lane_outcomes, new_session, write_many

pytestmark = pytest.mark.both_servers

# The seed's responder: each request answered on its own thread, keyed by the thread's alias.
SEED_RESPONDER: dict[str, Any] = {
    "name": "responder",
    "filter": {
        "types": ["thread.item_posted"],
        "aliases": ["chats/**"],
        "where": [{"path": "item.role", "op": "eq", "value": "request"}],
    },
    "concurrency": {"mode": "keyed", "key": "object.alias"},
    "batch": {"max_events": 1},
    "action": {"type": "workflow", "workflow": "recorder", "input": {"message": "{{ item.message }}"}},
    "retry": {"attempts": 2},
}
# The seed's status view: the newest event per cell.
SEED_STATUS_VIEW: dict[str, Any] = {
    "name": "status_view",
    "filter": {"types": ["object.written"], "aliases": ["missions/*/cells/*/meta"]},
    "concurrency": {"mode": "serial"},
    "batch": {"window_seconds": 1, "distinct_by": "object.alias"},
    "action": {
        "type": "object",
        "alias": "views/cells/changed",
        "value": {"type": "json", "events": "{{ batch.events }}"},
    },
}


async def post(engine: Engine, sid: str, alias: str, message: str, role: str = "request") -> int:
    item = {"type": "text", "role": role, "message": message}
    reply = await engine.command("post_thread_item", session_id=sid, alias=alias, item=item)
    return int(reply["event_id"])


async def test_the_seed_responder_is_keyed_by_object_alias_and_passes_the_whole_message_on(engine: Engine) -> None:
    saved = await engine.command("save_listener", listener=SEED_RESPONDER)
    assert saved["listener"]["version"] == 1
    [body] = [item["body"] for item in (await engine.command("list_listeners"))["listeners"]]
    assert body["retry"] == {"attempts": 2}, "the body is kept as written"
    sid = await new_session(engine)
    long = "a question " * 100  # far past the event's 200-character preview
    first = await post(engine, sid, "chats/1", long)
    second = await post(engine, sid, "chats/2", "hello")
    await post(engine, sid, "chats/2", "chatter", role="user")

    async def answered() -> bool:
        return len(engine.log.runs) >= 2

    await eventually(answered, what="a run for each thread")
    lanes = {r.input["batch"]["lane"]: r.input for r in engine.log.runs}
    assert set(lanes) == {"chats/1", "chats/2"}, "one lane per thread, keyed by object.alias"
    assert lanes["chats/1"]["batch"]["event_ids"] == [first]
    assert lanes["chats/2"]["batch"]["event_ids"] == [second]
    assert lanes["chats/1"]["input"]["message"] == long, "{{ item.message }} is the whole message"
    assert lanes["chats/1"]["batch"]["events"][0]["item"]["message"] == long
    events = (await engine.command("list_session_events", session_id=sid))["events"]
    assert len(events[0]["item"]["message"]) <= MESSAGE_PREVIEW_CHARS, "the stream keeps a preview"


async def test_the_seed_status_view_keeps_the_newest_event_per_object_alias(engine: Engine) -> None:
    await engine.command("save_listener", listener=SEED_STATUS_VIEW)
    sid = await new_session(engine)
    ids = await write_many(engine, sid, [f"missions/1/cells/{n % 2}/meta" for n in range(6)])

    async def viewed() -> bool:
        return bool(await lane_outcomes(engine, sid, "status_view"))

    await eventually(viewed, what="the view's write")
    view = (await engine.command("read_object", session_id=sid, alias="views/cells/changed"))["object"]["value"]
    assert [e["id"] for e in view["events"]] == ids[-2:], "distinct_by object.alias keeps one per cell"


async def test_close_session_with_drain_lets_what_is_pending_run_then_closes(engine: Engine) -> None:
    listener = dict(SEED_RESPONDER, batch={"max_events": 1, "window_seconds": 1.0})
    await engine.command("save_listener", listener=listener)
    sid = str((await engine.command("open_session", alias="resolving"))["session"]["id"])
    reply = await post(engine, sid, "chats/late", "a reply that lands as the session resolves")
    closing = await engine.command("close_session", session_id=sid, drain=True)
    assert closing["session"]["status"] == "open" and closing["session"]["draining"] is True
    # Asked again by its alias meanwhile, it says it is closing, and through what.
    asked = (await engine.command("open_session", alias="resolving"))["session"]
    assert (asked["status"], asked.get("draining"), asked.get("drains_through")) == (
        "open",
        True,
        closing["session"]["drains_through"],
    ), asked

    async def closed() -> bool:
        return (await engine.platform.store.get_session(sid))["status"] == "closed"

    await eventually(closed, within=30, what="the session to close once drained")
    assert (await engine.command("open_session", alias="resolving"))["session"] == {
        "id": sid,
        "alias": "resolving",
        "status": "closed",
    }
    assert [r.input["batch"]["event_ids"] for r in engine.log.runs] == [[reply]], "the pending reply ran"
    [outcome] = await lane_outcomes(engine, sid, "responder")
    assert outcome["status"] == "success"
    refused = await engine.platform.command(
        {"command": "write_object", "session_id": sid, "alias": "x", "value": {"type": "t"}}
    )
    assert refused["error"] == "session_not_open"


async def test_close_session_without_drain_skips_what_is_pending(engine: Engine) -> None:
    listener = dict(SEED_RESPONDER, batch={"max_events": 1, "window_seconds": 1.0})
    await engine.command("save_listener", listener=listener)
    sid = await new_session(engine)
    await post(engine, sid, "chats/late", "a reply")
    await engine.command("close_session", session_id=sid)

    async def skipped() -> bool:
        return bool(await lane_outcomes(engine, sid, "responder"))

    await eventually(skipped, what="the pending batch's outcome")
    [outcome] = await lane_outcomes(engine, sid, "responder")
    assert (outcome["status"], outcome["reason"]) == ("skipped", "session_not_open")
    await asyncio.sleep(0.5)
    assert not engine.log.runs
