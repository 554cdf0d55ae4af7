"""The testing kit, as an app author uses it: the example app's listeners, settled, in a few lines."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from orchestrator.app_loader import UserApp
from orchestrator.core.plan import changes
from orchestrator.dev.app_plan import InvalidApp, apply, plan_of
from orchestrator.testing import Harness, NotSettled


async def test_the_missions_app_answers_a_request_and_writes_a_missions_status() -> None:
    async with Harness(app="examples.missions.app") as h:
        sid = (await h.client.open_session())["session"]["id"]
        await h.client.write_object(sid, "missions/7/meta", {"type": "mission", "state": "active"})
        item = {"type": "request", "role": "request", "message": "hello"}
        await h.client.post_thread_item(sid, "chats/1", item)
        await h.settle()
        status = (await h.client.read_object(sid, "views/missions/7/status"))["object"]["value"]
        assert status["mission"] == "7"
        replies = (await h.client.list_thread_items(sid, "chats/1"))["items"]
        assert [r["role"] for r in replies] == ["request", "assistant"]
        assert await h.busy() == {}


async def test_settle_waits_out_retry_delays_on_temporals_clock() -> None:
    async with Harness(app="examples.missions.app") as h:
        sid = (await h.client.open_session())["session"]["id"]
        await h.client.write_object(sid, "missions/9/meta", {"type": "mission", "fail": True})
        await h.settle()  # the run and its two repeats, 30 s and 60 s later: skipped, not waited
        runs = (await h.client.list_executions(sid, listener="orchestrate"))["executions"]
        assert [(r["batch"]["retry"], r["status"]) for r in runs] == [(0, "failed"), (1, "failed"), (2, "failed")]
        inbox = (await h.client.list_thread_items(sid, "ops/inbox"))["items"]
        assert inbox and inbox[0]["type"] == "json"


async def test_settle_says_what_is_left_when_it_cannot_settle() -> None:
    async with Harness() as h:
        sid = (await h.client.open_session())["session"]["id"]
        # A workflow some worker said it runs, and none runs now: its run waits for ever.
        await h.platform.store.register_workflows(["unknown"])
        await h.client.command({"command": "start_execution", "session_id": sid, "workflow": "unknown", "input": {}})
        with pytest.raises(NotSettled, match="executions_running"):
            await h.settle(within=2)


async def test_a_schedule_fires_three_times_an_hour_apart_on_the_skipped_clock() -> None:
    """The time-skipping server has no Schedules: the platform's own clock fires them, and skipped time moves it."""
    async with Harness() as h:
        sid = (await h.client.open_session())["session"]["id"]
        await h.client.command(
            {
                "command": "create_schedule",
                "session_id": sid,
                "alias": "clock",
                "repeat": {"type": "interval", "every_seconds": 3600},
                "invocation_target_type": "object",
                "target": {"alias": "ops/clock", "value": {"type": "tick"}},
            }
        )
        described = await h.client.command({"command": "get_schedule", "session_id": sid, "alias": "clock"})
        assert len(described["schedule"]["next_invocations"]) == 5, described

        async def fired() -> list[dict[str, Any]]:
            body = {"command": "list_schedule_runs", "session_id": sid, "alias": "clock"}
            return list((await h.client.command(body))["runs"])

        for _ in range(4 * 6):  # at most four hours, ten minutes at a time
            if len(await fired()) >= 3:
                break
            await h.sleep(600)
            await asyncio.sleep(0.3)  # the firing's activity runs in real time
        runs = await fired()
        assert [r["status"] for r in runs] == ["success"] * 3, runs
        times = [datetime.fromisoformat(r["scheduled_at"]) for r in runs]
        assert [(b - a).total_seconds() for a, b in itertools.pairwise(times)] == [3600.0, 3600.0]
        written = (await h.client.list_session_events(sid, limit=100))["events"]
        assert [e["type"] for e in written if e.get("alias") == "ops/clock"] == ["object.written"] * 3

        await h.client.command({"command": "update_schedule", "session_id": sid, "alias": "clock", "enabled": False})
        await h.sleep(3 * 3600)
        await asyncio.sleep(0.3)
        assert len(await fired()) == 3, "a disabled schedule does not fire"


async def test_an_apps_declared_schedule_is_made_in_the_session_at_its_alias_changed_and_removed() -> None:
    """A schedule in the app's declarations names its session by alias: the plan opens that session, makes the
    schedule (it fires on the kit's clock), changes it when the app does, and removes it when the app no longer
    declares it."""
    clock = {
        "session_alias": "ops",
        "alias": "clock",
        "repeat": {"type": "interval", "every_seconds": 3600},
        "invocation_target_type": "object",
        "target": {"alias": "ops/clock", "value": {"type": "tick"}},
    }
    first = UserApp(name="tests.clock_app", schedules=[clock])
    async with Harness(app=first) as h:
        assert h.platform is not None
        sid = (await h.client.open_session(alias="ops"))["session"]["id"]
        body = {"command": "get_schedule", "session_id": sid, "alias": "clock"}
        assert (await h.client.command(body))["schedule"]["repeat"]["every_seconds"] == 3600
        assert changes(await plan_of(h.platform, first)) == [], "applied at start, the same app plans nothing"
        await h.sleep(3600)
        await asyncio.sleep(0.3)
        assert len((await h.client.command({**body, "command": "list_schedule_runs"}))["runs"]) == 1

        slower = UserApp(
            name="tests.clock_app", schedules=[{**clock, "repeat": {"type": "interval", "every_seconds": 7200}}]
        )
        assert [s.line() for s in changes(await plan_of(h.platform, slower))] == ["change  schedule clock in ops"]
        await apply(h.platform, slower, lambda _: None)
        assert (await h.client.command(body))["schedule"]["repeat"]["every_seconds"] == 7200

        gone = UserApp(name="tests.clock_app")
        assert [s.line() for s in changes(await plan_of(h.platform, gone))] == ["remove  schedule clock in ops"]
        await apply(h.platform, gone, lambda _: None)
        assert (await h.client.command(body))["error"] == "not_found"

        typo = UserApp(
            name="tests.clock_app", schedules=[{**clock, "repeat": {"type": "interval", "every_second": 60}}]
        )
        with pytest.raises(InvalidApp, match=r"schedules\.0"):
            await apply(h.platform, typo, lambda _: None)


async def test_an_apps_one_time_schedule_whose_time_has_passed_still_lets_the_app_start() -> None:
    """A `one_time` schedule the app declared is checked against the clock when it is made or changed, not at
    every start: once its time has gone by, the same app plans nothing and starts; a new one in the past is
    refused, naming the field."""
    async with Harness() as h:
        assert h.platform is not None
        at = (datetime.now(UTC) + timedelta(seconds=3)).replace(microsecond=0)
        once = {
            "session_alias": "ops",
            "alias": "once",
            "repeat": {"type": "one_time", "invocation_time": at.strftime("%Y-%m-%dT%H:%M:%S"), "timezone": "UTC"},
            "invocation_target_type": "object",
            "target": {"alias": "ops/once", "value": {"type": "tick"}},
        }
        declared = UserApp(name="tests.once_app", schedules=[once])
        await apply(h.platform, declared, lambda _: None)
        await asyncio.sleep(max((at - datetime.now(UTC)).total_seconds(), 0) + 0.5)

        assert changes(await plan_of(h.platform, declared)) == [], "its time passed: kept as it is"
        await apply(h.platform, declared, lambda _: None)
        later = UserApp(name="tests.once_app", schedules=[{**once, "alias": "twice"}])
        with pytest.raises(InvalidApp, match=r"schedules\.0\.repeat\.invocation_time: .* is in the past"):
            await plan_of(h.platform, later)


async def test_a_listeners_throttle_moves_on_with_temporals_clock() -> None:
    """The kit's clock skips time, and a lane its throttle holds is judged on the lane's own time: a digest that
    writes at most once a minute holds the second write's batch a minute, then writes both that waited."""
    digest = {
        "name": "digest",
        "filter": {"types": ["object.written"], "aliases": ["notes/*"]},
        "throttle": {"per_seconds": 60, "runs": 1},
        "action": {
            "type": "object",
            "alias": "views/digest",
            "value": {"type": "digest", "through": "{{ batch.last_id }}"},
        },
    }
    async with Harness(app=UserApp(name="throttled", listeners=[digest])) as h:
        sid = (await h.client.open_session())["session"]["id"]
        first = (await h.client.write_object(sid, "notes/1", {"type": "note"}))["event_id"]
        await h.settle()
        rest = [(await h.client.write_object(sid, f"notes/{n}", {"type": "note"}))["event_id"] for n in (2, 3)]
        for _ in range(100):
            (state,) = (await h.client.list_session_listeners(sid))["listeners"]
            if state["lanes"][0]["waiting"] and state["lanes"][0]["waiting"]["reason"] == "throttled":
                break
            await asyncio.sleep(0.05)
        waiting = state["lanes"][0]["waiting"]
        assert waiting["limit"] == "throttle" and "held by its throttle (1 per 60 s)" in waiting["text"], waiting
        view = (await h.client.read_object(sid, "views/digest"))["object"]
        assert (view["rev"], view["value"]["through"]) == (1, first), "held: nothing written yet"
        await h.settle()  # a minute of Temporal's clock, skipped
        view = (await h.client.read_object(sid, "views/digest"))["object"]
        assert (view["rev"], view["value"]["through"]) == (2, rest[-1]), "both that waited, in one write"
