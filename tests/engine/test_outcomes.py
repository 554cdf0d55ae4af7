"""Outcomes: a closed session skips, a switched-off listener consumes silently, runs show their status."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.harness import (
    Engine,
    eventually,
    lane_outcomes,
    lane_state,
    new_session,
    recorder_listener,
    write_many,
)

pytestmark = pytest.mark.both_servers


async def lane_view(engine: Engine, sid: str, listener: str, lane: str = "_") -> dict[str, Any]:
    return await lane_state(engine, sid, listener, lane)


async def test_a_session_closed_before_the_window_closes_skips_the_batch(engine: Engine) -> None:
    await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 1.5}))
    sid = await new_session(engine)
    ids = await write_many(engine, sid, ["missions/a", "missions/b"])
    await engine.command("close_session", session_id=sid)

    async def skipped() -> bool:
        return bool(await lane_outcomes(engine, sid, "orchestrate"))

    await eventually(skipped, what="the batch's outcome")
    [outcome] = await lane_outcomes(engine, sid, "orchestrate")
    assert (outcome["status"], outcome["reason"]) == ("skipped", "session_not_open")
    assert outcome["event_ids"] == ids
    assert not engine.log.runs
    assert not (await engine.command("list_executions", session_id=sid))["executions"]


async def test_a_switched_off_listener_consumes_its_batch_with_no_run_and_no_outcome(engine: Engine) -> None:
    await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 0.2}))
    sid = await new_session(engine)
    await engine.command("switch_listener", session_id=sid, name="orchestrate", enabled=False)
    off = await write_many(engine, sid, ["missions/a", "missions/b"])

    async def consumed() -> bool:
        try:
            view = await lane_view(engine, sid, "orchestrate")
        except Exception:
            return False
        return view["high_water"] == off[-1] and view["pending"] == 0 and view["batches"] == 1

    await eventually(consumed, what="the batch to be consumed")
    await engine.command("switch_listener", session_id=sid, name="orchestrate", enabled=True)
    on = await write_many(engine, sid, ["missions/c"])

    async def ran() -> bool:
        return bool(engine.log.runs) and engine.log.runs[-1].ended is not None

    await eventually(ran, what="the run after switching on")
    assert engine.log.event_ids() == on, "the batch consumed while off never comes back"

    async def one_outcome() -> bool:
        return len(await lane_outcomes(engine, sid, "orchestrate")) == 1

    await eventually(one_outcome, what="the run's outcome")
    outcomes = await lane_outcomes(engine, sid, "orchestrate")
    assert [(o["status"], o["event_ids"]) for o in outcomes] == [("success", on)]


async def test_list_executions_shows_completed_and_failed_runs_and_their_events(engine: Engine) -> None:
    await engine.command("save_listener", listener=recorder_listener("good", batch={"window_seconds": 0.2}))
    bad = recorder_listener(
        "bad",
        batch={"window_seconds": 0.2},
        action={"type": "workflow", "workflow": "recorder", "input": {"fail": True}},
    )
    await engine.command("save_listener", listener=bad)
    sid = await new_session(engine)
    await write_many(engine, sid, ["missions/a"])

    async def both_ended() -> bool:
        runs = (await engine.command("list_executions", session_id=sid))["executions"]
        return len(runs) == 2 and all(r["status"] != "running" for r in runs)

    await eventually(both_ended, what="both runs to end")
    good = (await engine.command("list_executions", session_id=sid, listener="good"))["executions"]
    failed = (await engine.command("list_executions", session_id=sid, listener="bad"))["executions"]
    assert [(r["listener"], r["status"]) for r in good] == [("good", "completed")]
    assert [(r["listener"], r["status"]) for r in failed] == [("bad", "failed")]
    assert failed[0]["error"]
    only_failed = (await engine.command("list_executions", session_id=sid, status="failed"))["executions"]
    assert [r["id"] for r in only_failed] == [failed[0]["id"]]
    # A started run whose execution then failed still has outcome `success`: its status is the result.
    assert [o["status"] for o in await lane_outcomes(engine, sid, "bad")] == ["success"]

    events = (await engine.command("list_session_events", session_id=sid, types=["execution.*"]))["events"]
    seen = {(e["type"], e["source"].get("listener"), e["execution"]["id"], e["execution"]["status"]) for e in events}
    assert seen == {
        ("execution.started", "good", good[0]["id"], "running"),
        ("execution.ended", "good", good[0]["id"], "completed"),
        ("execution.started", "bad", failed[0]["id"], "running"),
        ("execution.ended", "bad", failed[0]["id"], "failed"),
    }
