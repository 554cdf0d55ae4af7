"""The `thread_item` and `object` actions: rendered from templates, written with their source, outcome recorded."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.core.lane_keys import lane_workflow_id
from tests.engine.harness import Engine, eventually, lane_outcomes, new_session, write_many

pytestmark = pytest.mark.both_servers


def write_listener(name: str, action: dict[str, Any], aliases: list[str] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "filter": {"types": ["object.**"], "aliases": aliases or ["missions/**"]},
        "batch": {"window_seconds": 0.3},
        "action": action,
    }


async def outcomes_once(engine: Engine, sid: str, listener: str, count: int = 1) -> list[dict[str, Any]]:
    async def recorded() -> bool:
        return len(await lane_outcomes(engine, sid, listener)) >= count

    await eventually(recorded, what=f"{count} outcome(s) of {listener}")
    return await lane_outcomes(engine, sid, listener)


async def session_events(engine: Engine, sid: str) -> list[dict[str, Any]]:
    return list((await engine.command("list_session_events", session_id=sid, limit=1000))["events"])


async def listener_entry(engine: Engine, sid: str, name: str) -> dict[str, Any]:
    reply = await engine.command("list_session_listeners", session_id=sid)
    return next(item for item in reply["listeners"] if item["name"] == name)


async def test_a_thread_item_action_posts_a_rendered_item(engine: Engine) -> None:
    action = {
        "type": "thread_item",
        "alias": "ops/notes",
        "item": {
            "type": "json",
            "role": "system",
            "message": "n={{ batch.count }} last={{ event.alias }}",
            "metadata": {"count": "{{ batch.count }}", "ids": ["{{ batch.first_id }}", "{{ batch.last_id }}"]},
        },
    }
    await engine.command("save_listener", listener=write_listener("noter", action))
    sid = await new_session(engine)
    ids = await write_many(engine, sid, ["missions/a", "missions/b", "missions/c"])
    [outcome] = await outcomes_once(engine, sid, "noter")
    assert outcome["status"] == "success"
    assert outcome["event_ids"] == ids

    items = (await engine.command("list_thread_items", session_id=sid, alias="ops/notes"))["items"]
    assert len(items) == 1
    item = items[0]
    assert item["message"] == "n=3 last=missions/c"
    assert item["metadata"] == {"count": 3, "ids": [ids[0], ids[-1]]}, "a whole-value hole keeps its type"
    posted = [e for e in await session_events(engine, sid) if e["type"] == "thread.item_posted"]
    assert len(posted) == 1
    assert posted[0]["source"]["listener"] == "noter"
    assert posted[0]["depth"] == 1

    entry = await listener_entry(engine, sid, "noter")
    assert entry["counts"] == {"success": 1}
    lane = engine.client.get_workflow_handle(lane_workflow_id(sid, "noter", "_"))
    queried = await lane.query("outcomes")
    assert [o["status"] if isinstance(o, dict) else o.status for o in queried] == ["success"]


async def test_an_object_action_writes_an_object_one_level_deeper_than_its_batch(engine: Engine) -> None:
    first = {
        "type": "object",
        "alias": "tally/first",
        "value": {"type": "tally", "count": "{{ batch.count }}", "label": "n={{ batch.count }}"},
    }
    # The second listener hears the first one's write, so its batch is at depth 1 and its write at 2.
    second = {"type": "object", "alias": "tally/second", "value": {"type": "tally", "from": "{{ event.alias }}"}}
    await engine.command("save_listener", listener=write_listener("first", first))
    await engine.command("save_listener", listener=write_listener("second", second, aliases=["tally/first"]))
    sid = await new_session(engine)
    await write_many(engine, sid, ["missions/a", "missions/b"])
    await outcomes_once(engine, sid, "second")

    value = (await engine.command("read_object", session_id=sid, alias="tally/first"))["object"]["value"]
    assert value == {"type": "tally", "count": 2, "label": "n=2"}
    value = (await engine.command("read_object", session_id=sid, alias="tally/second"))["object"]["value"]
    assert value == {"type": "tally", "from": "tally/first"}
    written = {e["alias"]: e for e in await session_events(engine, sid) if e["type"] == "object.written"}
    assert written["tally/first"]["source"]["listener"] == "first"
    assert written["tally/first"]["depth"] == 1
    assert written["tally/second"]["source"]["listener"] == "second"
    assert written["tally/second"]["depth"] == 2
    assert [o["status"] for o in await lane_outcomes(engine, sid, "first")] == ["success"]


async def test_a_value_that_is_not_an_object_is_an_invocation_error(engine: Engine) -> None:
    # One that is never an object (`{{ batch.count }}`) is refused at save; an event's field may be one, but an
    # alias is not.
    action = {"type": "object", "alias": "tally/n", "value": "{{ batch.events.0.alias }}"}
    await engine.command("save_listener", listener=write_listener("counter", action))
    sid = await new_session(engine)
    ids = await write_many(engine, sid, ["missions/a"])
    [outcome] = await outcomes_once(engine, sid, "counter")
    assert outcome["status"] == "invocation_error"
    assert outcome["event_ids"] == ids
    assert "object" in (outcome["message"] or "")
    assert not (await engine.command("list_objects", session_id=sid, prefix="tally/"))["objects"]
    assert (await listener_entry(engine, sid, "counter"))["counts"] == {"invocation_error": 1}


async def test_a_template_path_the_batch_does_not_hold_is_an_invocation_error(engine: Engine) -> None:
    # One no batch could hold is refused at save (`batch.nope`, `event.data.nope` on an object's events, which carry
    # its rev alone); this one could (a schedule's write is caused by its firing), but this batch's cause is a request.
    action = {"type": "object", "alias": "tally/n", "value": {"type": "tally", "n": "{{ event.cause.schedule.alias }}"}}
    await engine.command("save_listener", listener=write_listener("typo", action))
    sid = await new_session(engine)
    await write_many(engine, sid, ["missions/a"])
    [outcome] = await outcomes_once(engine, sid, "typo")
    assert outcome["status"] == "invocation_error"
    assert outcome["message"] == "action: unknown template path 'event.cause.schedule.alias'"
    assert not (await engine.command("list_objects", session_id=sid, prefix="tally/"))["objects"]
    lane = engine.client.get_workflow_handle(lane_workflow_id(sid, "typo", "_"))
    queried = await lane.query("outcomes")
    assert [o["status"] if isinstance(o, dict) else o.status for o in queried] == ["invocation_error"]
    events = await session_events(engine, sid)
    assert [e["alias"] for e in events if e["type"] == "object.written"] == ["missions/a"]
