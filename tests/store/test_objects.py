"""Objects: every write raises rev by one and appends its event in the same transaction; if_rev guards."""

from __future__ import annotations

from typing import Any

from orchestrator.platform import Platform
from tests.store.helpers import all_events, ok, refused


async def _session(platform: Platform) -> str:
    return str((await ok(platform, "open_session"))["session"]["id"])


async def test_write_read_and_rev(platform: Platform) -> None:
    sid = await _session(platform)
    first = await ok(
        platform,
        "write_object",
        session_id=sid,
        alias="tickets/42/meta",
        value={"type": "ticket", "n": 1},
        client="ui",
    )
    assert first["object"] == {"alias": "tickets/42/meta", "rev": 1}
    second = await ok(
        platform, "write_object", session_id=sid, alias="tickets/42/meta", value={"type": "ticket", "n": 2}
    )
    assert second["object"]["rev"] == 2
    assert second["event_id"] > first["event_id"]
    read = await ok(platform, "read_object", session_id=sid, alias="tickets/42/meta")
    assert read["object"]["value"] == {"type": "ticket", "n": 2}
    assert read["object"]["rev"] == 2
    events = await all_events(platform, sid)
    assert [e["type"] for e in events] == ["object.written", "object.written"]
    assert events[0]["id"] == first["event_id"]
    assert events[0]["alias"] == "tickets/42/meta"
    assert events[0]["source"] == {"client": "ui"}
    assert events[0]["depth"] == 0
    assert events[0]["session_id"] == sid
    assert "value" not in events[0], "an event never carries the object's value"


async def test_if_rev_conflict_changes_nothing(platform: Platform) -> None:
    sid = await _session(platform)
    await ok(platform, "write_object", session_id=sid, alias="a/b", value={"type": "t", "v": 1})
    await refused(
        platform,
        "rev_conflict",
        "if_rev",
        "write_object",
        session_id=sid,
        alias="a/b",
        value={"type": "t", "v": 2},
        if_rev=5,
    )
    read = await ok(platform, "read_object", session_id=sid, alias="a/b")
    assert read["object"]["value"]["v"] == 1
    assert len(await all_events(platform, sid)) == 1
    await ok(platform, "write_object", session_id=sid, alias="a/b", value={"type": "t", "v": 2}, if_rev=1)


async def test_if_rev_zero_means_only_if_absent(platform: Platform) -> None:
    sid = await _session(platform)
    await ok(platform, "write_object", session_id=sid, alias="x", value={"type": "t"}, if_rev=0)
    await refused(
        platform,
        "rev_conflict",
        "if_rev",
        "write_object",
        session_id=sid,
        alias="x",
        value={"type": "t"},
        if_rev=0,
    )


async def test_delete_removes_and_writes_its_event(platform: Platform) -> None:
    sid = await _session(platform)
    await ok(platform, "write_object", session_id=sid, alias="a/b", value={"type": "t"})
    deleted = await ok(platform, "delete_object", session_id=sid, alias="a/b")
    assert deleted["object"]["alias"] == "a/b"
    await refused(platform, "not_found", "alias", "read_object", session_id=sid, alias="a/b")
    await refused(platform, "not_found", "alias", "delete_object", session_id=sid, alias="a/b")
    types = [e["type"] for e in await all_events(platform, sid)]
    assert types == ["object.written", "object.deleted"]


async def test_list_objects_by_prefix(platform: Platform) -> None:
    sid = await _session(platform)
    for alias in ["missions/1/meta", "missions/2/meta", "other/1", "missions_x"]:
        await ok(platform, "write_object", session_id=sid, alias=alias, value={"type": "t"})
    listed = await ok(platform, "list_objects", session_id=sid, prefix="missions/")
    assert [o["alias"] for o in listed["objects"]] == ["missions/1/meta", "missions/2/meta"]
    everything = await ok(platform, "list_objects", session_id=sid)
    assert len(everything["objects"]) == 4


async def test_a_retried_write_finds_the_same_event(platform: Platform) -> None:
    sid = await _session(platform)
    args = {"session_id": sid, "alias": "a/b", "value": {"type": "t"}, "idempotency_key": "req-1"}
    first = await ok(platform, "write_object", **args)
    again = await ok(platform, "write_object", **args)
    assert again["event_id"] == first["event_id"]
    assert again["object"]["rev"] == first["object"]["rev"] == 1
    assert len(await all_events(platform, sid)) == 1


async def test_a_key_the_session_holds_for_another_write_is_refused_and_writes_nothing(platform: Platform) -> None:
    """A retry answers what its key wrote first; the same key on another write is no retry: refused naming it.
    (It answered success with the new alias and wrote nothing.)"""
    sid = await _session(platform)
    await ok(platform, "save_event_type", name="idem.noted", schema={"type": "object"})
    first = await ok(platform, "write_object", session_id=sid, alias="idem/y", value={"type": "t"}, idempotency_key="k")
    await ok(platform, "emit_event", session_id=sid, type="idem.noted", data={}, idempotency_key="e")
    item = {"type": "text", "role": "user", "message": "hi"}
    others: list[dict[str, Any]] = [
        {"command": "write_object", "alias": "idem/z", "value": {"type": "t"}, "idempotency_key": "k"},
        {"command": "write_object", "alias": "idem/y", "value": {"type": "t"}, "idempotency_key": "e"},
        {"command": "post_thread_item", "alias": "chats/1", "item": item, "idempotency_key": "k"},
        {"command": "emit_event", "type": "idem.other", "data": {}, "idempotency_key": "k"},
        {"command": "emit_events", "events": [{"type": "idem.noted", "data": {}, "idempotency_key": "k"}]},
        {
            "command": "emit_events",
            "events": [
                {"type": "idem.noted", "data": {}, "idempotency_key": "fresh"},
                {"type": "idem.other", "data": {}, "idempotency_key": "fresh"},
            ],
        },
        {"command": "delete_object", "alias": "idem/y", "idempotency_key": "k"},
        {"command": "update_graph", "patch": {"nodes": {"n": {"type": "t"}}}, "idempotency_key": "k"},
    ]
    await ok(platform, "save_event_type", name="idem.other", schema={"type": "object"})
    before = await all_events(platform, sid)
    for body in others:
        command = body.pop("command")
        await refused(platform, "invalid_request", "idempotency_key", command, session_id=sid, **body)
    assert await all_events(platform, sid) == before, "nothing written"
    assert (await ok(platform, "read_object", session_id=sid, alias="idem/y"))["object"]["rev"] == 1
    again = await ok(platform, "write_object", session_id=sid, alias="idem/y", value={"type": "t"}, idempotency_key="k")
    assert (again["event_id"], again["object"]) == (first["event_id"], first["object"]), "a retry still answers"


async def test_a_key_given_to_the_other_form_of_a_write_is_refused_and_writes_nothing(platform: Platform) -> None:
    """The single and the bulk form of a write with one key are two writes, not a retry: the bulk form keys its
    writes `<key>:<index>`, so each form missed the other's and wrote again (a rev 2, a second item)."""
    sid = await _session(platform)
    item, value = {"type": "text", "role": "user", "message": "hi"}, {"type": "x"}
    firsts: list[tuple[dict[str, Any], dict[str, Any]]] = [
        (
            {"command": "write_object", "alias": "j/z", "value": value, "idempotency_key": "K1"},
            {"command": "write_objects", "objects": [{"alias": "j/z", "value": value}], "idempotency_key": "K1"},
        ),
        (
            {"command": "write_objects", "objects": [{"alias": "j/a", "value": value}], "idempotency_key": "K2"},
            {"command": "write_object", "alias": "j/a", "value": value, "idempotency_key": "K2"},
        ),
        (
            {"command": "post_thread_item", "alias": "j/t", "item": item, "idempotency_key": "K3"},
            {"command": "post_thread_items", "alias": "j/t", "items": [item], "idempotency_key": "K3"},
        ),
        (
            {"command": "post_thread_items", "alias": "j/u", "items": [item], "idempotency_key": "K4"},
            {"command": "post_thread_item", "alias": "j/u", "item": item, "idempotency_key": "K4"},
        ),
    ]
    for first, other in firsts:
        await ok(platform, session_id=sid, **first)
        before = await all_events(platform, sid)
        await refused(platform, "invalid_request", "idempotency_key", session_id=sid, **other)
        assert await all_events(platform, sid) == before, f"{other['command']} after {first['command']} wrote"
        again = await ok(platform, session_id=sid, **first)
        assert await all_events(platform, sid) == before, f"a retry of {again} wrote again"


async def test_objects_are_scoped_to_their_session(platform: Platform) -> None:
    one, two = await _session(platform), await _session(platform)
    await ok(platform, "write_object", session_id=one, alias="a", value={"type": "t"})
    await refused(platform, "not_found", "alias", "read_object", session_id=two, alias="a")
    assert await all_events(platform, two) == []


async def test_a_bulk_write_of_the_release_before_is_written_once_through_its_signature(platform: Platform) -> None:
    """An API process of the release before, beside this one's during a rolling upgrade, calls the bulk write by
    its earlier signature, each item keyed `<key>:<index>`: written, and its retry answered, not written again."""
    sid = await _session(platform)
    items = [{"alias": f"old/{n}", "value": {"type": "t"}, "key": f"k1:{n}"} for n in range(2)]
    call = "SELECT o_rev, o_event FROM orchestrator.orchestrator_write_objects($1, $2::jsonb, $3, $4, $5, $6)"
    first = await platform.store.pool.fetch(call, sid, items, {}, 0, None, None)
    again = await platform.store.pool.fetch(call, sid, items, {}, 0, None, None)
    assert [tuple(r) for r in again] == [tuple(r) for r in first]
    assert [e["alias"] for e in await all_events(platform, sid)] == ["old/0", "old/1"]
    # The request's key, as this release's single write sees it: the other form's.
    reply = await platform.command(
        {
            "command": "write_object",
            "session_id": sid,
            "alias": "old/0",
            "value": {"type": "t"},
            "idempotency_key": "k1",
        }
    )
    assert reply["status"] == "error" and reply["message"].startswith("idempotency_key: "), reply
