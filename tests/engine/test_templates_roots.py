"""Every template root (SPEC section 3), whole-value and interpolated, as a run receives its input."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.engine.harness import Engine, eventually

pytestmark = pytest.mark.both_servers

ROOTS = {
    "events": "batch.events",
    "messages": "batch.messages",
    "first_id": "batch.first_id",
    "last_id": "batch.last_id",
    "count": "batch.count",
    "retry": "batch.retry",
    "lane": "batch.lane",
    "item": "item",
    "event": "event",
    "listener": "listener.name",
    "session": "session.id",
}


def text(value: Any) -> str:
    """How an interpolated hole shows a value: strings as they are, anything else as compact JSON."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


async def test_every_root_renders_whole_and_interpolated_into_a_runs_input(engine: Engine) -> None:
    template: dict[str, Any] = {name: "{{ " + path + " }}" for name, path in ROOTS.items()}
    template["text"] = {name: f"<{{{{ {path} }}}}>" for name, path in ROOTS.items()}
    template["roots"] = {"listener": "{{ listener }}", "session": "{{ session }}"}
    template["nested"] = ["{{ item.role }}", {"alias": "{{ event.alias }}", "kind": "kind={{ item.type }}"}]
    listener = {
        "name": "roots",
        "filter": {"types": ["thread.item_posted"], "aliases": ["chats/**"]},
        "concurrency": {"mode": "keyed", "key": "alias"},
        "batch": {"window_seconds": 0.5},
        "action": {"type": "workflow", "workflow": "recorder", "input": template},
    }
    await engine.command("save_listener", listener=listener)
    sid = (await engine.command("open_session", alias="support"))["session"]["id"]
    posted = []
    for message in ("hello", "again"):
        item = {"type": "request", "role": "user", "message": message}
        posted.append(await engine.command("post_thread_item", session_id=sid, alias="chats/7", item=item))

    async def ran() -> bool:
        return bool(engine.log.runs)

    await eventually(ran, what="the run")
    [run] = [r.input for r in engine.log.runs]
    ids = [p["event_id"] for p in posted]
    events = (await engine.command("list_session_events", session_id=sid, types=["thread.item_posted"]))["events"]
    assert [e["id"] for e in events] == ids
    last = events[-1]
    expected = {
        "events": events,
        "messages": [
            {"id": e["id"], "type": "thread.item_posted", "alias": "chats/7", "item_id": e["item"]["id"]}
            for e in events
        ],
        "first_id": ids[0],
        "last_id": ids[-1],
        "count": 2,
        "retry": 0,
        "lane": "chats/7",
        "item": last["item"],
        "event": last,
        "listener": "roots",
        "session": sid,
    }
    rendered = run["input"]
    for name, value in expected.items():
        assert rendered[name] == value, f"{{{{ {ROOTS[name]} }}}} as a whole value"
        assert rendered["text"][name] == f"<{text(value)}>", f"{{{{ {ROOTS[name]} }}}} interpolated"
    assert isinstance(rendered["first_id"], int) and isinstance(rendered["count"], int), "a whole value keeps its type"
    assert rendered["item"]["id"] == posted[-1]["item"]["id"]
    assert rendered["item"]["message"] == "again"
    assert rendered["roots"]["listener"]["name"] == "roots"
    assert rendered["roots"]["listener"]["version"] == 1
    assert rendered["roots"]["session"] == {"id": sid, "alias": "support"}
    assert rendered["nested"] == ["user", {"alias": "chats/7", "kind": "kind=request"}]
    # What the run was given beside its input agrees with what the templates saw.
    assert run["batch"]["event_ids"] == ids
    assert run["batch"]["messages"] == expected["messages"]
    assert run["batch"]["lane"] == "chats/7"
    assert run["listener"] == "roots"
    assert run["session_id"] == sid
