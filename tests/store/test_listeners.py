"""Listener declarations are stored by version with effective_at; switches are per session."""

from __future__ import annotations

from datetime import datetime

from orchestrator.platform import Platform
from tests.store.helpers import ok, refused

BODY = {
    "name": "orchestrate",
    "filter": {"types": ["object.**", "thread.item_posted"], "aliases": ["missions/**"]},
    "concurrency": {"mode": "serial"},
    "batch": {"window_seconds": 2, "max_events": 100},
    "action": {"type": "workflow", "workflow": "orchestrator", "input": {"events": "{{ batch.messages }}"}},
    "retry": {"attempts": 2, "delay_seconds": 30},
}


async def test_save_get_list_and_versions(platform: Platform) -> None:
    saved = await ok(platform, "save_listener", listener=BODY)
    assert saved["listener"]["name"] == "orchestrate"
    assert saved["listener"]["version"] == 1
    datetime.fromisoformat(saved["listener"]["effective_at"])
    again = await ok(platform, "save_listener", listener={**BODY, "batch": {"window_seconds": 1}})
    assert again["listener"]["version"] == 2
    got = await ok(platform, "get_listener", name="orchestrate")
    assert got["listener"]["version"] == 2
    assert got["listener"]["body"]["batch"]["window_seconds"] == 1
    listed = await ok(platform, "list_listeners")
    assert [item["name"] for item in listed["listeners"]] == ["orchestrate"]


async def test_a_listener_is_answered_with_the_defaults_its_body_left_out(platform: Platform) -> None:
    """SPEC 3's defaults, read back where a reader of the spec looks: `retry.delay_seconds` 30, `serial`,
    `max_parallel` 4; the body as saved stays in `body`."""
    short = {
        "name": "short",
        "filter": {"types": ["object.written"]},
        "action": BODY["action"],
        "retry": {"attempts": 2},
    }
    await ok(platform, "save_listener", listener=short)
    for listener in (
        (await ok(platform, "get_listener", name="short"))["listener"],
        (await ok(platform, "list_listeners"))["listeners"][0],
    ):
        assert listener["retry"] == {"attempts": 2, "delay_seconds": 30.0}
        assert (listener["concurrency"]["mode"], listener["concurrency"]["max_parallel"]) == ("serial", 4)
        assert listener["body"] == short and listener["version"] == 1


async def test_delete_listener(platform: Platform) -> None:
    await ok(platform, "save_listener", listener=BODY)
    await ok(platform, "delete_listener", name="orchestrate")
    await refused(platform, "not_found", "name", "get_listener", name="orchestrate")
    await refused(platform, "not_found", "name", "delete_listener", name="orchestrate")
    assert (await ok(platform, "list_listeners"))["listeners"] == []
    resaved = await ok(platform, "save_listener", listener=BODY)
    assert resaved["listener"]["version"] == 2


async def test_switch_listener_per_session(platform: Platform) -> None:
    await ok(platform, "save_listener", listener=BODY)
    sid = (await ok(platform, "open_session"))["session"]["id"]
    off = await ok(platform, "switch_listener", session_id=sid, name="orchestrate", enabled=False)
    assert off == {"status": "success", "enabled": False}
    assert await platform.store.disabled_listeners(sid) == {"orchestrate"}
    await ok(platform, "switch_listener", session_id=sid, name="orchestrate", enabled=True)
    assert await platform.store.disabled_listeners(sid) == set()
    await refused(platform, "not_found", "name", "switch_listener", session_id=sid, name="nope", enabled=True)


async def test_an_invalid_declaration_is_refused_and_not_stored(platform: Platform) -> None:
    bad = {**BODY, "batch": {"window_seconds": 2, "max_events": 5000}}
    await refused(platform, "invalid_request", "listener.batch.max_events", "save_listener", listener=bad)
    bad_op = {**BODY, "filter": {"where": [{"path": "item.type", "op": "like", "value": "x"}]}}
    await refused(platform, "invalid_request", "listener.filter.where.0.op", "save_listener", listener=bad_op)
    await refused(
        platform,
        "invalid_request",
        "listener.action",
        "save_listener",
        listener={**BODY, "action": {"type": "email"}},
    )
    assert (await ok(platform, "list_listeners"))["listeners"] == []


async def test_saving_an_unchanged_body_keeps_the_version(platform: Platform) -> None:
    first = await ok(platform, "save_listener", listener=BODY)
    again = await ok(platform, "save_listener", listener=BODY)
    assert again["listener"] == first["listener"]
    changed = await ok(platform, "save_listener", listener={**BODY, "batch": {"window_seconds": 3}})
    assert changed["listener"]["version"] == 2


async def test_a_count_past_what_the_store_keeps_is_refused_naming_it_and_the_largest_is_kept(
    platform: Platform,
) -> None:
    """`max_parallel` and `key_segments` past a 32-bit integer answered `internal_error` from the store; now the
    field is named and nothing is saved. The largest the store keeps is saved (and lowered to the deployment's
    `listener_parallel_runs` where it runs)."""
    keyed = {**BODY, "concurrency": {"mode": "keyed", "key": "alias"}}
    for field in ("max_parallel", "key_segments"):
        body = {**keyed, "concurrency": {**keyed["concurrency"], field: 2**31}}
        await refused(platform, "invalid_request", f"listener.concurrency.{field}", "save_listener", listener=body)
    await refused(platform, "not_found", "name", "get_listener", name="orchestrate")
    widest = {**keyed, "concurrency": {**keyed["concurrency"], "max_parallel": 2**31 - 1, "key_segments": 2**31 - 1}}
    assert (await ok(platform, "save_listener", listener=widest))["listener"]["version"] == 1


async def test_a_write_every_batch_would_fail_is_refused_at_save_naming_the_field(platform: Platform) -> None:
    """A literal the write commands would refuse, or a hole never holding an object, would end every batch
    `invocation_error` (or `refused` over the payload limit): refused at save, as `post_thread_item` and
    `write_object` refuse it, and nothing is saved. What a batch could render writable is saved."""
    writes = {**BODY, "filter": {"types": ["object.written"]}}
    del writes["retry"]
    bad = [
        ({"type": "object", "alias": "views/x", "value": {"type": ""}}, "listener.action.value: must have a non-empty"),
        ({"type": "object", "alias": "views/x", "value": "{{ batch.count }}"}, "listener.action.value: must render"),
        ({"type": "thread_item", "alias": "ops/x", "item": {"type": "Bad Type"}}, "listener.action.item.type: "),
        ({"type": "thread_item", "alias": "ops/x", "item": {"type": "text", "bogus": 1}}, "listener.action.item.bogus"),
        (
            {"type": "thread_item", "alias": "ops/x", "item": {"type": "text", "message": "x" * 300_000}},
            "listener.action.item.message: 300000 bytes is over the payload limit",
        ),
    ]
    for action, field in bad:
        await refused(platform, "invalid_request", field, "save_listener", listener={**writes, "action": action})
    where = {**BODY, "filter": {"where": [{"not": ["x"]}]}}
    reply = await refused(platform, "invalid_request", None, "save_listener", listener=where)
    assert reply["message"] == "listener.filter.where.0.not: must be a JSON object"
    assert (await ok(platform, "list_listeners"))["listeners"] == []
    good = {"type": "object", "alias": "views/x", "value": {"type": "tally", "n": "{{ batch.count }}"}}
    await ok(platform, "save_listener", listener={**writes, "action": good})
