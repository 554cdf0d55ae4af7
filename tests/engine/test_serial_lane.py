"""A serial listener: one lane per session, events batched by window, one run in flight at a time."""

from __future__ import annotations

from typing import Any

from tests.engine.harness import Engine, eventually


def recorder_listener(name: str = "orchestrate", **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "filter": {"types": ["object.**"], "aliases": ["missions/**"]},
        "batch": {"window_seconds": 1, "max_events": 100},
        "action": {"type": "workflow", "workflow": "recorder", "input": {"events": "{{ batch.messages }}"}},
    }
    body.update(overrides)
    return body


async def test_a_burst_in_one_window_is_one_run(engine: Engine) -> None:
    await engine.command("save_listener", listener=recorder_listener())
    sid = (await engine.command("open_session"))["session"]["id"]
    ids = []
    for n in range(5):
        ids.append((await engine.command("write_object", session_id=sid, alias=f"missions/{n}", value={"type": "m"}))["event_id"])
    await engine.command("write_object", session_id=sid, alias="elsewhere/1", value={"type": "m"})

    async def ran() -> bool:
        return len(engine.log.event_ids()) >= 5

    await eventually(ran, what="the batch's run")
    assert len(engine.log.runs) == 1
    run = engine.log.runs[0].input
    assert run["batch"]["event_ids"] == ids
    assert run["session_id"] == sid
    assert [m["id"] for m in run["input"]["events"]] == ids
    assert run["batch"]["retry"] == 0
