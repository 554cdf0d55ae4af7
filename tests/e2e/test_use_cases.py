"""The use cases of SPEC section 10, end to end: the example app's listeners fire as the table says.

Each test writes through the HTTP door and watches what the platform answers through it (executions,
thread items, objects, events), plus Temporal's visibility for the search attributes.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from tests.e2e.conftest import INBOX_WINDOW_SECONDS, Missions
from tests.engine.harness import eventually

pytestmark = pytest.mark.devserver

# Longer than a 2 s window plus a run: a run that was going to start has started by then.
SETTLE_SECONDS = 4.0


async def write(missions: Missions, alias: str, value: dict[str, Any]) -> int:
    reply = await missions.client.write_object(missions.session_id, alias, value, client="e2e")
    return int(reply["event_id"])


async def post(missions: Missions, alias: str, item: dict[str, Any]) -> tuple[str, int]:
    reply = await missions.client.post_thread_item(missions.session_id, alias, item, client="e2e")
    return str(reply["item"]["id"]), int(reply["event_id"])


async def executions(missions: Missions, listener: str) -> list[dict[str, Any]]:
    reply = await missions.client.list_executions(missions.session_id, listener=listener)
    return list(reply["executions"])


async def wait_for_runs(missions: Missions, listener: str, count: int, status: str = "completed") -> None:
    async def done() -> bool:
        return len(await missions.run_ids(listener, status)) >= count

    await eventually(done, within=30, what=f"{count} {status} runs of {listener}")


async def stored(missions: Missions, alias: str) -> dict[str, Any]:
    found = await missions.value(alias)
    assert found is not None, f"no object at {alias}"
    return found


async def events_at(missions: Missions, alias: str) -> list[dict[str, Any]]:
    reply = await missions.client.list_session_events(missions.session_id, limit=1000)
    return [e for e in reply["events"] if e.get("alias") == alias]


async def test_orchestrate_runs_once_per_burst_and_not_for_chatter(missions: Missions) -> None:
    burst = [
        await write(missions, "missions/1/meta", {"type": "mission", "state": "active"}),
        await write(missions, "missions/1/cells/a/meta", {"type": "cell", "state": "done"}),
        await write(missions, "missions/1/cells/b/meta", {"type": "cell", "state": "todo"}),
        await write(missions, "missions/2/meta", {"type": "mission", "state": "draft"}),
        (await post(missions, "missions/1/log", {"type": "request", "role": "user", "message": "replan"}))[1],
    ]
    await post(missions, "missions/1/log", {"type": "text", "role": "user", "message": "chatter"})
    await write(missions, "elsewhere/1", {"type": "note"})

    await wait_for_runs(missions, "orchestrate", 1)
    await asyncio.sleep(SETTLE_SECONDS)
    runs = await executions(missions, "orchestrate")
    assert len(runs) == 1, "one burst, one run"
    assert runs[0]["batch"]["event_ids"] == burst, "the burst without the text item and the other alias"
    assert (await stored(missions, "views/missions/1/status"))["value"] == {
        "type": "mission_status",
        "mission": "1",
        "state": "active",
        "cells": 2,
        "cells_done": 1,
    }
    assert (await stored(missions, "views/missions/2/status"))["value"]["state"] == "draft"
    for alias in ("views/missions/1/status", "views/missions/2/status"):
        (event,) = await events_at(missions, alias)
        assert event["source"]["listener"] == "orchestrate", "the run's writes are attributed to it"
        assert event["source"]["execution"] == runs[0]["id"]
        assert event["depth"] == 1, "one more than the client writes that woke it"

    # Chatter alone never starts a run.
    await post(missions, "missions/1/log", {"type": "text", "role": "user", "message": "still chatting"})
    await post(missions, "missions/2/log", {"type": "thinking", "role": "agent", "message": "hmm"})
    await asyncio.sleep(SETTLE_SECONDS)
    assert len(await executions(missions, "orchestrate")) == 1

    # A sweep request moves every mission, the ones no event pointed at included.
    sweep = await write(missions, "app/missions/sweep", {"type": "sweep"})
    await wait_for_runs(missions, "orchestrate", 2)
    runs = await executions(missions, "orchestrate")
    assert runs[1]["batch"]["event_ids"] == [sweep]
    assert (await stored(missions, "views/missions/2/status"))["rev"] == 2
    sweep_writes = (await events_at(missions, "views/missions/1/status"))[1:]
    assert [(e["source"]["listener"], e["depth"]) for e in sweep_writes] == [("orchestrate", 1)]

    # The runs carry the search attributes, so Temporal's visibility finds them by listener and session.
    query = f"OrchestratorListener='orchestrate' AND OrchestratorSession='{missions.session_id}'"
    expected = {run["id"] for run in runs}

    async def visible() -> bool:
        found = {execution.id async for execution in missions.temporal.list_workflows(query)}
        return found == expected

    await eventually(visible, within=30, what="the runs in Temporal's visibility")


async def test_orchestrate_moves_the_missions_a_graph_change_names(missions: Missions) -> None:
    await write(missions, "missions/4/meta", {"type": "mission", "state": "active"})
    await wait_for_runs(missions, "orchestrate", 1)
    patch = {"nodes": {"missions/4/cells/x": {"type": "cell"}, "teams/red": {"type": "team"}}}
    reply = await missions.client.update_graph(missions.session_id, patch, if_rev=0)
    assert reply["graph"]["rev"] == 1
    stale = await missions.client.command(
        {"command": "update_graph", "session_id": missions.session_id, "patch": patch, "if_rev": 0}
    )
    assert stale["error"] == "rev_conflict", stale

    await wait_for_runs(missions, "orchestrate", 2)
    runs = sorted(await executions(missions, "orchestrate"), key=lambda run: run["started_at"])
    assert runs[1]["batch"]["event_ids"] == [reply["event_id"]], "the graph change is the second run's batch"
    status = await stored(missions, "views/missions/4/status")
    assert status["rev"] == 2, "the run the graph change started moved mission 4 again"
    assert await missions.value("views/missions/red/status") is None, "teams/red is not a mission"


async def test_the_clock_a_schedule_writes_is_a_sweep_in_the_orchestrators_own_lane(missions: Missions) -> None:
    # SPEC section 10, Clock: a schedule writes ops/clock every so long; orchestrate takes the tick as a sweep.
    await write(missions, "missions/6/meta", {"type": "mission", "state": "active"})
    await wait_for_runs(missions, "orchestrate", 1)
    await missions.client.create_schedule(
        session_id=missions.session_id,
        alias="clock",
        repeat={"type": "interval", "every_seconds": 2},
        invocation_target_type="object",
        target={"alias": "ops/clock", "value": {"type": "tick"}},
    )
    try:
        await wait_for_runs(missions, "orchestrate", 2)
    finally:
        await missions.client.delete_schedule(missions.session_id, "clock")
    runs = sorted(await executions(missions, "orchestrate"), key=lambda run: run["started_at"])
    ticks = await events_at(missions, "ops/clock")
    assert ticks and set(runs[1]["batch"]["event_ids"]) <= {e["id"] for e in ticks}, "the second run is the tick's"
    assert ticks[0]["cause"]["schedule"]["alias"] == "clock"
    assert (await stored(missions, "views/missions/6/status"))["rev"] == 2, "the tick moved mission 6 again"


async def test_respond_answers_each_request_once_on_its_thread(missions: Missions) -> None:
    requests = {
        "chats/a": [
            await post(missions, "chats/a", {"type": "request", "role": "request", "message": "plan A1"}),
            await post(missions, "chats/a", {"type": "request", "role": "request", "message": "plan A2"}),
        ],
        "chats/b": [await post(missions, "chats/b", {"type": "request", "role": "request", "message": "plan B1"})],
    }
    await post(missions, "chats/b", {"type": "text", "role": "user", "message": "thanks"})

    await wait_for_runs(missions, "respond", 3)
    await asyncio.sleep(SETTLE_SECONDS)
    runs = await executions(missions, "respond")
    assert len(runs) == 3, "one run per request; neither the user's text nor the answers start one"
    assert all(run["batch"]["count"] == 1 for run in runs)

    for thread, posted in requests.items():
        answers = [item for item in await missions.items(thread) if item["role"] == "assistant"]
        assert [a["metadata"]["in_reply_to"] for a in answers] == [item_id for item_id, _ in posted]
        lane = sorted((run for run in runs if run["lane"] == thread), key=lambda run: run["started_at"])
        assert len(lane) == len(posted)
        for earlier, later in itertools.pairwise(lane):
            assert later["started_at"] >= earlier["ended_at"], "one run at a time per thread"

    receipts = await missions.items("ops/receipts")
    assert sorted(r["metadata"]["event_ids"] for r in receipts) == sorted(
        [event_id] for posted in requests.values() for _, event_id in posted
    )
    assert {(r["metadata"]["listener"], r["metadata"]["status"]) for r in receipts} == {("respond", "success")}


async def test_inbox_posts_one_item_for_a_failed_execution(missions: Missions) -> None:
    started = await missions.client.start_execution(missions.session_id, "flaky", input={"why": "to fail"})
    failed_id = started["execution"]["id"]

    async def posted() -> bool:
        return bool(await missions.items("ops/inbox"))

    await eventually(posted, within=30, what="an item on ops/inbox")
    await asyncio.sleep(INBOX_WINDOW_SECONDS + 1)
    (item,) = await missions.items("ops/inbox")
    assert item["type"] == "json"
    # The failure's error reaches the agent: what went wrong, not only that something did.
    assert [f["execution"] for f in item["message"]] == [
        {
            "id": failed_id,
            "workflow": "flaky",
            "status": "failed",
            "error": {"type": "ApplicationError", "message": "flaky failed, as it always does"},
        }
    ]
    (event,) = await events_at(missions, "ops/inbox")
    assert event["source"]["listener"] == "inbox"


async def test_a_failing_mission_is_retried_and_every_failure_reaches_the_inbox(missions: Missions) -> None:
    await write(missions, "missions/9/meta", {"type": "mission", "fail": True})

    await wait_for_runs(missions, "orchestrate", 3, status="failed")
    runs = await executions(missions, "orchestrate")
    assert [run["batch"]["retry"] for run in runs] == [0, 1, 2], "the run and its two repeats, then no more"
    assert {run["status"] for run in runs} == {"failed"}
    failed = {run["id"] for run in runs}

    async def all_in_inbox() -> bool:
        items = await missions.items("ops/inbox")
        return {f["execution"]["id"] for item in items for f in item["message"]} == failed

    await eventually(all_in_inbox, within=30, what="every failed run on ops/inbox")
    reply = await missions.client.list_session_events(missions.session_id, types=["listener.failed"])
    assert [e["source"].get("listener") for e in reply["events"]] == ["orchestrate"]


async def test_status_view_keeps_the_newest_event_per_cell(missions: Missions) -> None:
    newest: dict[str, int] = {}
    for step in range(5):
        newest["missions/1/cells/a/meta"] = await write(
            missions, "missions/1/cells/a/meta", {"type": "cell", "step": step}
        )
    for step in range(2):
        newest["missions/1/cells/b/meta"] = await write(
            missions, "missions/1/cells/b/meta", {"type": "cell", "step": step}
        )
    newest["missions/2/cells/c/meta"] = await write(missions, "missions/2/cells/c/meta", {"type": "cell"})
    await write(missions, "missions/1/meta", {"type": "mission"})
    await write(missions, "missions/1/cells/a/notes", {"type": "note"})

    async def written() -> bool:
        return await missions.value("views/cells/changed") is not None

    await eventually(written, within=30, what="views/cells/changed")
    await asyncio.sleep(SETTLE_SECONDS)
    view = await stored(missions, "views/cells/changed")
    assert view["rev"] == 1, "one burst, one write"
    assert view["value"]["type"] == "json"
    assert {e["alias"]: e["id"] for e in view["value"]["events"]} == newest
    (event,) = await events_at(missions, "views/cells/changed")
    assert event["source"]["listener"] == "status_view"
