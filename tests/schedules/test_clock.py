"""The clock pattern: a schedule's tick is an `object.written` like any other, so it waits for the lane.

A listener whose run sleeps 3 s hears `ops/clock`, ticking every second. Ticks that land while its run is in
flight start nothing beside it; they wait and arrive together in the lane's next batch.
"""

from __future__ import annotations

import pytest

from tests.engine.harness import Engine, eventually, new_session, recorder_listener

pytestmark = pytest.mark.devserver


async def test_ticks_during_a_run_wait_and_join_the_next_batch(engine: Engine) -> None:
    slow = recorder_listener(
        "sweeper",
        filter={"types": ["object.written"], "aliases": ["ops/clock"]},
        batch={"window_seconds": 0.2},
        action={"type": "workflow", "workflow": "recorder", "input": {"sleep": 3}},
    )
    await engine.command("save_listener", listener=slow)
    sid = await new_session(engine)
    await engine.command(
        "create_schedule",
        session_id=sid,
        alias="clock",
        repeat={"type": "interval", "every_seconds": 1},
        invocation_target_type="object",
        target={"alias": "ops/clock", "value": {"type": "tick"}},
    )

    async def second_run_started() -> bool:
        return len(engine.log.runs) >= 2

    await eventually(second_run_started, within=20, what="the lane's second run")
    await engine.command("delete_schedule", session_id=sid, alias="clock")
    first, second = engine.log.runs[:2]
    assert first.ended is not None and first.ended <= second.started, "the second run began after the first ended"
    assert engine.log.most_at_once["sweeper:_"] == 1, "never a second run in flight"
    first_ids, second_ids = (run.input["batch"]["event_ids"] for run in (first, second))
    assert len(second_ids) >= 2, "the ticks of the first run's 3 s arrive together"
    assert max(first_ids) < min(second_ids)
    ticks = await engine.command("list_session_events", session_id=sid, types=["object.written"])
    sources = {e["id"]: e["source"] for e in ticks["events"]}
    assert all(sources[i] == {"client": "schedule:clock"} for i in first_ids + second_ids)


async def test_the_seeds_flat_clock_body_is_accepted_and_answered_like_the_nested_one(engine: Engine) -> None:
    sid = await new_session(engine)
    seed_body = {
        "command": "create_schedule",
        "alias": "ops-clock",
        "repeat": "recurring_cron",
        "cron_expression": "0/15 * * * ? *",
        "timezone": "UTC",
        "invocation_target_type": "object",
        "invocation_target": {
            "target": {"blob": "blob-7", "revision": 3, "session": sid},
            "alias": "ops/clock",
            "value": {"type": "text", "text": "tick"},
        },
    }
    flat = await engine.platform.command(seed_body)
    assert flat["status"] == "success", flat
    nested = await engine.command(
        "create_schedule",
        session_id=sid,
        alias="ops-clock-nested",
        repeat={"type": "recurring_cron", "cron_expression": "0/15 * * * ? *", "timezone": "UTC"},
        invocation_target_type="object",
        target={"alias": "ops/clock", "value": {"type": "text", "text": "tick"}},
    )
    flat_schedule, nested_schedule = flat["schedule"], nested["schedule"]
    assert set(flat_schedule) == set(nested_schedule), "both forms are answered in one shape"
    for field in ("repeat", "invocation_target_type", "target", "enabled"):
        assert flat_schedule[field] == nested_schedule[field], field
    assert flat_schedule["origin"] == {"blob": "blob-7", "revision": 3}, "blob and revision are kept"
    got = await engine.command("get_schedule", session_id=sid, alias="ops-clock")
    assert got["schedule"]["repeat"]["cron_expression"] == "0/15 * * * ? *"
    # A flat body that carries every field, null where its kind of repeat or target has none, is the same body.
    full = {
        **seed_body,
        "alias": "ops-clock-full",
        "every_seconds": None,
        "invocation_time": None,
        "start_date": None,
        "end_date": None,
        "invocation_target": {**seed_body["invocation_target"], "workflow": None, "input": None},
    }
    nulls = await engine.platform.command(full)
    assert nulls["status"] == "success", nulls
    for field in ("repeat", "invocation_target_type", "target", "origin"):
        assert nulls["schedule"][field] == flat_schedule[field], field
    for alias in ("ops-clock", "ops-clock-nested", "ops-clock-full"):
        await engine.command("delete_schedule", session_id=sid, alias=alias)


async def test_what_a_body_leaves_out_that_its_target_says_is_filled_in(engine: Engine) -> None:
    """The seed's body with no `invocation_target_type` (a `value` writes an object) and no alias of its own (the
    object's it writes), and `invocation_target` beside a nested `repeat`."""
    sid = await new_session(engine)
    bare = {
        "command": "create_schedule",
        "repeat": "interval",
        "every_seconds": 900,
        "invocation_target": {"target": {"session": sid}, "alias": "ops/clock", "value": {"type": "tick"}},
    }
    made = await engine.platform.command(bare)
    assert made["status"] == "success", made
    assert (made["schedule"]["alias"], made["schedule"]["invocation_target_type"]) == ("ops/clock", "object")
    nested = {
        **bare,
        "alias": "runner",
        "repeat": {"type": "interval", "every_seconds": 900},
        "invocation_target": {"target": {"session": sid}, "workflow": "recorder", "input": {"n": 1}},
    }
    del nested["every_seconds"]
    made = await engine.platform.command(nested)
    assert made["status"] == "success", made
    assert made["schedule"]["invocation_target_type"] == "workflow"
    for alias in ("ops/clock", "runner"):
        await engine.command("delete_schedule", session_id=sid, alias=alias)


async def test_a_flat_body_with_a_bad_target_is_refused_naming_the_field(engine: Engine) -> None:
    sid = await new_session(engine)
    for target, field in [
        ("nope", "invocation_target"),
        ({"target": {"session": sid}, "alias": "ops/clock", "value": {"type": "t"}, "colour": 1}, "invocation_target"),
        ({"target": {"session": "ses_none"}, "alias": "ops/clock", "value": {"type": "t"}}, "session_id"),
    ]:
        reply = await engine.platform.command(
            {
                "command": "create_schedule",
                "alias": "bad",
                "repeat": "interval",
                "every_seconds": 900,
                "invocation_target_type": "object",
                "invocation_target": target,
            }
        )
        assert reply["status"] == "error" and field in reply["message"], reply
    assert (await engine.command("list_schedules", session_id=sid))["schedules"] == []


def test_a_target_that_names_a_workflow_as_null_writes_an_object() -> None:
    """A flat body often carries every field, null where its target has none: `workflow: null` names no run."""
    from orchestrator.commands.schedules import nested_form

    body = {"repeat": "interval", "every_seconds": 60, "invocation_target": {"target": {"session": "ses_1"},
            "alias": "ops/clock", "value": {"type": "tick"}, "workflow": None, "input": None}}  # fmt: skip
    nested = nested_form(body)
    assert (nested["invocation_target_type"], nested["alias"]) == ("object", "ops/clock")
