"""`delete_session`: a session and everything of it go, in every table and on Temporal; it answers not_found
to every command from then on, and other sessions keep theirs."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus

from orchestrator.commands import COMMANDS
from tests.engine.harness import Engine, eventually, new_session, recorder_listener, write_many
from tests.retention.conftest import reply, rows_of_session, schedule_exists, session_ids, workflow_status

pytestmark = pytest.mark.devserver

SLEEPER = recorder_listener(
    "sleeper",
    action={"type": "workflow", "workflow": "recorder", "input": {"sleep": 600}},
    receipt={"alias": "ops/receipts"},
)
PAUSED = recorder_listener("paused", filter={"types": ["object.**"], "aliases": ["held/**"]})

# What each command that takes a session is asked of a deleted one: every such command is here (checked below).
ITEM = {"type": "text", "role": "user", "message": "hi"}
ON_DELETED: dict[str, dict[str, Any]] = {
    "close_session": {},
    "reopen_session": {},
    "get_session": {},
    "delete_session": {},
    "switch_listener": {"name": "sleeper", "enabled": False},
    "pause_listener": {"name": "sleeper"},
    "resume_listener": {"name": "sleeper"},
    "write_object": {"alias": "missions/9", "value": {"type": "m"}},
    "write_objects": {"objects": [{"alias": "missions/9", "value": {"type": "m"}}]},
    "read_object": {"alias": "missions/1"},
    "delete_object": {"alias": "missions/1"},
    "list_objects": {},
    "post_thread_item": {"alias": "chats/1", "item": ITEM},
    "post_thread_items": {"alias": "chats/1", "items": [ITEM]},
    "list_thread_items": {"alias": "chats/1"},
    "start_execution": {"workflow": "recorder", "input": {}},
    "stop_execution": {"execution_id": "exe:x.0"},
    "capture_table": {"table": "missions", "type_prefix": "mission"},
    "list_session_events": {},
    "list_session_listeners": {},
    "list_executions": {},
    "explain_event": {"event_id": 1},
    "simulate_listener": {"listener": SLEEPER},
    "replay_batch": {"listener": "sleeper", "batch": 1},
    "redeliver": {"listener": "sleeper", "after": 0, "through": 10},
    "emit_event": {"type": "app.noted", "data": {}},
    "emit_events": {"events": [{"type": "app.noted", "data": {}}]},
    "update_graph": {"patch": {"nodes": {"n": {"type": "t"}}}},
    "read_graph": {},
    "create_schedule": {
        "alias": "clock2",
        "repeat": {"type": "interval", "every_seconds": 3600},
        "invocation_target_type": "object",
        "target": {"alias": "ops/clock", "value": {"type": "tick"}},
    },
    "get_schedule": {"alias": "clock"},
    "list_schedules": {},
    "update_schedule": {"alias": "clock", "enabled": False},
    "delete_schedule": {"alias": "clock"},
    "list_schedule_runs": {"alias": "clock"},
}


async def test_every_command_that_takes_a_session_is_asked_of_a_deleted_one() -> None:
    takes_a_session = {name for name, spec in COMMANDS.items() if "session_id" in spec.model.model_fields}
    assert takes_a_session <= set(ON_DELETED), sorted(takes_a_session - set(ON_DELETED))


async def test_delete_session_removes_every_row_of_the_session_and_ends_its_workflows(engine: Engine) -> None:
    pool = engine.platform.store.pool
    await engine.command("save_listener", listener=SLEEPER)
    await engine.command("save_listener", listener=PAUSED)
    await engine.command("save_event_type", name="app.noted", schema={"type": "object"})
    sid = await new_session(engine)
    other = await new_session(engine)
    await engine.command("pause_listener", name="paused", session_id=sid)
    await engine.command("switch_listener", session_id=sid, name="sleeper", enabled=True)
    await write_many(engine, sid, ["missions/1", "missions/2"])
    await write_many(engine, sid, ["held/1"])
    await engine.command("post_thread_item", session_id=sid, alias="chats/1", item=ITEM)
    await engine.command("emit_event", session_id=sid, type="app.noted", data={})
    await engine.command("update_graph", session_id=sid, patch={"nodes": {"n": {"type": "t"}}})
    clock = {"alias": "ops/clock", "value": {"type": "tick"}}
    schedule = {"repeat": {"type": "interval", "every_seconds": 3600}, "invocation_target_type": "object"}
    await engine.command("create_schedule", session_id=sid, alias="clock", target=clock, **schedule)
    kept = await write_many(engine, other, ["missions/1"])

    async def running() -> bool:
        started = {r.input["session_id"] for r in engine.log.runs}
        outcomes = await pool.fetchval("SELECT count(*) FROM orchestrator.outcomes WHERE session_id = $1", sid)
        return {sid, other} <= started and outcomes >= 1

    await eventually(running, what="a sleeping run in each session, and the first batch's outcome")
    # Its write rate's bucket, as the API's gate keeps it for writes through a door.
    await engine.platform.store.take_tokens(f"session:{sid}", 100.0, 100.0, 1.0, 1.0)
    [run] = [r.input["execution_id"] for r in engine.log.runs if r.input["session_id"] == sid]
    lanes = [
        r["workflow_id"]
        for r in await pool.fetch("SELECT workflow_id FROM orchestrator.lanes WHERE session_id = $1", sid)
    ]
    ids = await session_ids(pool, sid)
    before = await rows_of_session(pool, sid, ids)
    # Rows of the session in the tables that hold its kinds of things (else the check below proves little).
    assert {
        "sessions", "routing_cursors", "session_retention", "events", "objects", "thread_items", "graphs",
        "executions", "outcomes", "outcome_counts", "lanes", "lane_queue", "batches", "lane_runs",
        "listener_pauses", "listener_switches", "schedules", "rate_buckets",
    } <= set(before), before  # fmt: skip

    deleted = await engine.command("delete_session", session_id=sid)
    assert deleted["complete"] is True and deleted["session"] == {"id": sid, "status": "deleted"}
    assert deleted["rows_deleted"] >= before["events"] + before["batches"]
    assert await rows_of_session(pool, sid, ids) == {}
    # Its run, its lanes and its schedule are gone from Temporal's side too.
    assert await workflow_status(engine, run) == WorkflowExecutionStatus.TERMINATED
    for lane in lanes:
        assert await workflow_status(engine, lane) in (
            WorkflowExecutionStatus.TERMINATED,
            WorkflowExecutionStatus.COMPLETED,
        )
    assert not await schedule_exists(engine, f"schedule:{sid}:clock")
    # The other session keeps everything.
    events = (await engine.command("list_session_events", session_id=other))["events"]
    assert kept[0] in [e["id"] for e in events]


async def test_a_deleted_session_answers_not_found_to_every_command(engine: Engine) -> None:
    await engine.command("save_listener", listener=SLEEPER)
    await engine.command("save_event_type", name="app.noted", schema={"type": "object"})
    sid = (await engine.command("open_session", alias="tenant-1"))["session"]["id"]
    await write_many(engine, sid, ["missions/1"])
    await engine.command("delete_session", session_id=sid)
    for command, args in ON_DELETED.items():
        answer = await reply(engine, command, session_id=sid, **args)
        assert answer.get("error") == "not_found", (command, answer)
    # Its alias is free for a new session.
    again = (await engine.command("open_session", alias="tenant-1"))["session"]
    assert again["id"] != sid and again["status"] == "open"
    listed = (await engine.command("list_sessions"))["sessions"]
    assert sid not in [s["id"] for s in listed]
