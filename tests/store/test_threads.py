"""Threads: items are appended, never changed, listed in order; each post is one event with a preview."""

from __future__ import annotations

from orchestrator.platform import Platform
from tests.store.helpers import all_events, ok, refused


async def test_post_and_list_items_in_order(platform: Platform) -> None:
    sid = (await ok(platform, "open_session"))["session"]["id"]
    ids = []
    for n in range(3):
        reply = await ok(
            platform,
            "post_thread_item",
            session_id=sid,
            alias="chats/7",
            item={"type": "text", "role": "user", "message": f"m{n}", "metadata": {"n": n}},
        )
        ids.append(reply["item"]["id"])
    listed = await ok(platform, "list_thread_items", session_id=sid, alias="chats/7")
    assert [i["id"] for i in listed["items"]] == ids
    assert listed["items"][0]["metadata"] == {"n": 0}
    after = await ok(platform, "list_thread_items", session_id=sid, alias="chats/7", after=ids[0], limit=1)
    assert [i["id"] for i in after["items"]] == [ids[1]]
    events = await all_events(platform, sid)
    assert [e["type"] for e in events] == ["thread.item_posted"] * 3
    assert events[0]["item"] == {"id": ids[0], "type": "text", "role": "user", "message": "m0"}


async def test_an_item_id_is_posted_once(platform: Platform) -> None:
    sid = (await ok(platform, "open_session"))["session"]["id"]
    first = await ok(
        platform,
        "post_thread_item",
        session_id=sid,
        alias="chats/1",
        item={"id": "r1", "type": "request", "role": "request", "message": "help"},
    )
    again = await ok(
        platform,
        "post_thread_item",
        session_id=sid,
        alias="chats/1",
        item={"id": "r1", "type": "request", "role": "request", "message": "help"},
    )
    assert again["event_id"] == first["event_id"]
    listed = await ok(platform, "list_thread_items", session_id=sid, alias="chats/1")
    assert len(listed["items"]) == 1


async def test_the_event_carries_only_a_preview(platform: Platform) -> None:
    sid = (await ok(platform, "open_session"))["session"]["id"]
    long = "x" * 5000
    await ok(platform, "post_thread_item", session_id=sid, alias="chats/1", item={"type": "text", "message": long})
    event = (await all_events(platform, sid))[0]
    assert len(event["item"]["message"]) < 300
    item = (await ok(platform, "list_thread_items", session_id=sid, alias="chats/1"))["items"][0]
    assert item["message"] == long


async def test_list_after_an_unknown_item_is_not_found(platform: Platform) -> None:
    sid = (await ok(platform, "open_session"))["session"]["id"]
    await refused(platform, "not_found", "after", "list_thread_items", session_id=sid, alias="chats/1", after="nope")


async def test_a_json_items_message_may_be_any_json_value_and_is_kept_as_json(platform: Platform) -> None:
    """The seed's agent inbox posts the failures as a json block: a list of envelopes, not a string."""
    sid = (await ok(platform, "open_session"))["session"]["id"]
    failures = [{"id": 7, "type": "execution.ended", "execution": {"status": "failed"}}]
    for message in (failures, {"n": 1}, 3, True, "text is JSON too"):
        item = {"type": "json", "role": "system", "message": message}
        await ok(platform, "post_thread_item", session_id=sid, alias="ops/dead", item=item)
    listed = await ok(platform, "list_thread_items", session_id=sid, alias="ops/dead")
    assert [i["message"] for i in listed["items"]] == [failures, {"n": 1}, 3, True, "text is JSON too"]
    # The event's preview of a JSON message is its JSON text.
    assert (await all_events(platform, sid))[0]["item"]["message"] == (
        '[{"id":7,"type":"execution.ended","execution":{"status":"failed"}}]'
    )


async def test_only_a_json_item_takes_a_message_that_is_not_text(platform: Platform) -> None:
    sid = (await ok(platform, "open_session"))["session"]["id"]
    for item in ({"type": "text", "message": ["a"]}, {"type": "json", "message": float("nan")}):
        await refused(platform, "invalid_request", "message", "post_thread_item", session_id=sid, alias="c", item=item)
    assert (await all_events(platform, sid)) == []
