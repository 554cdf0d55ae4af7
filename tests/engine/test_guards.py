"""Guards and limits (SPEC sections 3, 5 and 9): each one ends a batch with the outcome that says why."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.testing import WorkflowEnvironment

from orchestrator.core.limits import Limits
from orchestrator.platform import Platform
from tests.engine.harness import (
    Engine,
    eventually,
    lane_outcomes,
    lane_state,
    new_session,
    recorder_listener,
    running_engine,
    write_many,
)

pytestmark = pytest.mark.both_servers

with workflow.unsafe.imports_passed_through():
    from orchestrator.sdk import RunInput, RunSession, SessionError


class Notes:
    def __init__(self) -> None:
        self.notes: list[Any] = []

    @activity.defn(name="test.guard_note")
    async def note(self, value: Any) -> None:
        self.notes.append(value)


@workflow.defn(name="ponger")
class Ponger:
    """Answers a `chain/ping` by writing `chain/pong` through the run-side SDK."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        await RunSession(run).write_object("chain/pong", {"type": "pong", "after": run.batch.last_id})


@workflow.defn(name="owner")
class Owner:
    """Writes inside what its listener owns, then outside; notes what each write answered."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        session = RunSession(run)
        inside = await session.write_object("mine/ok", {"type": "mine"})
        try:
            await session.write_object("theirs/x", {"type": "theirs"})
            outside = None
        except SessionError as err:
            outside = err.code
        await workflow.execute_activity(
            "test.guard_note", ["owner", inside["rev"], outside], start_to_close_timeout=timedelta(seconds=10)
        )


@asynccontextmanager
async def guarded(platform: Platform, env: WorkflowEnvironment, **limits: Any) -> AsyncIterator[tuple[Engine, Notes]]:
    """An engine whose deployment has these limits (listeners take effect at once unless told)."""
    notes = Notes()
    platform.settings = platform.settings.model_copy(
        update={
            "search_attributes": not env.supports_time_skipping,
            "limits": Limits(**{"activation_delay_seconds": 0, **limits}),
        }
    )

    def wrap(activities: list[Callable[..., Any]]) -> list[Callable[..., Any]]:
        return [*activities, notes.note]

    async with running_engine(platform, env.client, workflows=[Ponger, Owner], wrap=wrap) as engine:
        yield engine, notes


async def outcomes_at_least(engine: Engine, sid: str, listener: str, count: int) -> list[dict[str, Any]]:
    """The listener's outcomes, oldest first, once there are `count` of them."""

    async def enough() -> bool:
        return len(await lane_outcomes(engine, sid, listener)) >= count

    await eventually(enough, what=f"{count} outcome(s) of {listener}")
    return list(reversed(await lane_outcomes(engine, sid, listener)))


async def session_events(engine: Engine, sid: str) -> list[dict[str, Any]]:
    return list((await engine.command("list_session_events", session_id=sid, limit=1000))["events"])


async def receipts(engine: Engine, sid: str, alias: str = "ops/receipts") -> list[dict[str, Any]]:
    items = (await engine.command("list_thread_items", session_id=sid, alias=alias))["items"]
    return [item["metadata"] for item in items]


def object_listener(name: str, aliases: list[str], action: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "filter": {"types": ["object.written"], "aliases": aliases},
        "batch": {"window_seconds": 0.1},
        "action": action,
    }
    body.update(overrides)
    return body


async def test_two_listeners_that_wake_each_other_stop_at_the_chain_depth(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    async with guarded(platform, temporal_env, listener_chain_depth=3) as (engine, _):
        # `ping` answers a pong with an object action; `pong` answers a ping from its run, through the SDK.
        ping = {"type": "object", "alias": "chain/ping", "value": {"type": "ping", "after": "{{ batch.last_id }}"}}
        await engine.command("save_listener", listener=object_listener("ping", ["chain/pong"], ping))
        pong = {"type": "workflow", "workflow": "ponger"}
        await engine.command("save_listener", listener=object_listener("pong", ["chain/ping"], pong))
        sid = await new_session(engine)
        [start] = await write_many(engine, sid, ["chain/pong"])

        pong_outcomes = await outcomes_at_least(engine, sid, "pong", 2)
        assert [(o["status"], o.get("reason")) for o in pong_outcomes] == [("success", None), ("skipped", "depth")]
        ping_outcomes = await outcomes_at_least(engine, sid, "ping", 2)
        assert [o["status"] for o in ping_outcomes] == ["success", "success"]

        chain = [(e["alias"], e["depth"]) for e in await session_events(engine, sid) if e["type"] == "object.written"]
        assert chain == [("chain/pong", 0), ("chain/ping", 1), ("chain/pong", 2), ("chain/ping", 3)]
        skipped = pong_outcomes[-1]
        events = {e["alias"]: e for e in await session_events(engine, sid) if e.get("depth") == 3}
        assert skipped["event_ids"] == [events["chain/ping"]["id"]]
        assert "depth" in skipped["message"]
        assert start < skipped["first_id"]
        # Nothing follows the skip: the chain has stopped.
        await asyncio.sleep(0.5)
        assert len(await lane_outcomes(engine, sid, "ping")) == 2
        assert len(await lane_outcomes(engine, sid, "pong")) == 2
        executions = (await engine.command("list_executions", session_id=sid, listener="pong"))["executions"]
        assert [e["status"] for e in executions] == ["completed"]


async def test_listeners_that_wake_each_other_through_execution_events_and_receipts_stop_at_the_chain_depth(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    async with guarded(platform, temporal_env, listener_chain_depth=4) as (engine, _):
        # `runner` runs on any ended execution that is not its own (it never sees its own), with a receipt;
        # `echo` answers each receipt with an execution of its own. Neither writes anything else: the chain
        # runs only through what the platform writes for them, which must grow deeper at every step.
        runner = recorder_listener(
            "runner",
            filter={"types": ["execution.ended"]},
            batch={"window_seconds": 0.1},
            receipt={"alias": "ops/receipts"},
        )
        echo = recorder_listener(
            "echo",
            filter={"types": ["thread.item_posted"], "aliases": ["ops/receipts"]},
            batch={"window_seconds": 0.1},
        )
        await engine.command("save_listener", listener=runner)
        await engine.command("save_listener", listener=echo)
        sid = await new_session(engine)
        await engine.command("start_execution", session_id=sid, workflow="recorder", input={})

        async def stopped() -> bool:
            outcomes = await lane_outcomes(engine, sid, "runner") + await lane_outcomes(engine, sid, "echo")
            return any(o.get("reason") == "depth" for o in outcomes)

        await eventually(stopped, within=60, what="the chain to reach listener_chain_depth")
        await asyncio.sleep(1.0)
        runs = len(engine.log.runs)
        await asyncio.sleep(1.0)
        assert len(engine.log.runs) == runs, "nothing runs after the skip: the chain has stopped"
        assert runs <= 6
        events = await session_events(engine, sid)
        by_type = {
            t: sorted({e["depth"] for e in events if e["type"] == t and e["source"].get("listener")})
            for t in ("execution.started", "execution.ended", "thread.item_posted")
        }
        assert by_type["execution.ended"][0] == 1, "a listener's run's execution events are one deeper than its batch"
        assert by_type["thread.item_posted"][0] == 1, "a receipt is one deeper than its batch"
        assert max(max(d) for d in by_type.values()) <= 4


async def test_fires_past_the_limit_per_minute_are_throttled_with_a_receipt(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    async with guarded(platform, temporal_env, listener_fires_per_minute=2) as (engine, _):
        action = {"type": "object", "alias": "out/count", "value": {"type": "count", "n": "{{ batch.last_id }}"}}
        body = object_listener("busy", ["missions/**"], action, receipt={"alias": "ops/receipts"})
        await engine.command("save_listener", listener=body)
        sid = await new_session(engine)
        ids = []
        for n in range(3):
            ids += await write_many(engine, sid, [f"missions/{n}"])
            await outcomes_at_least(engine, sid, "busy", n + 1)

        outcomes = await outcomes_at_least(engine, sid, "busy", 3)
        assert [(o["status"], o["event_ids"]) for o in outcomes] == [
            ("success", ids[:1]),
            ("success", ids[1:2]),
            ("throttled", ids[2:]),
        ]
        assert "2 fires" in outcomes[-1]["message"]
        value = (await engine.command("read_object", session_id=sid, alias="out/count"))["object"]
        assert (value["rev"], value["value"]["n"]) == (2, ids[1]), "the throttled batch wrote nothing"

        async def three_receipts() -> bool:
            return len(await receipts(engine, sid)) == 3

        await eventually(three_receipts, what="three receipts")
        assert [(r["status"], r["event_ids"]) for r in await receipts(engine, sid)] == [
            ("success", ids[:1]),
            ("success", ids[1:2]),
            ("throttled", ids[2:]),
        ]


async def test_a_run_past_executions_per_session_is_refused_with_a_receipt(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    async with guarded(platform, temporal_env, executions_per_session=1) as (engine, _):
        sleeper = recorder_listener(
            "sleeper",
            filter={"types": ["object.written"], "aliases": ["slow/*"]},
            batch={"window_seconds": 0.1},
            action={"type": "workflow", "workflow": "recorder", "input": {"sleep": 3600}},
        )
        other = recorder_listener(
            "other",
            filter={"types": ["object.written"], "aliases": ["fast/*"]},
            batch={"window_seconds": 0.1},
            receipt={"alias": "ops/receipts"},
        )
        await engine.command("save_listener", listener=sleeper)
        await engine.command("save_listener", listener=other)
        sid = await new_session(engine)
        await write_many(engine, sid, ["slow/1"])

        async def sleeping() -> bool:
            return any(r.input["listener"] == "sleeper" for r in engine.log.runs)

        await eventually(sleeping, what="the sleeper's run")
        ids = await write_many(engine, sid, ["fast/1"])
        [outcome] = await outcomes_at_least(engine, sid, "other", 1)
        assert (outcome["status"], outcome["event_ids"]) == ("refused", ids)
        assert "executions_per_session" in outcome["message"]
        assert not any(r.input["listener"] == "other" for r in engine.log.runs)
        executions = (await engine.command("list_executions", session_id=sid))["executions"]
        assert [(e["listener"], e["status"]) for e in executions] == [("sleeper", "running")]

        async def receipted() -> bool:
            return bool(await receipts(engine, sid))

        await eventually(receipted, what="the refusal's receipt")
        [receipt] = await receipts(engine, sid)
        assert (receipt["status"], receipt["listener"], receipt["event_ids"]) == ("refused", "other", ids)


async def test_a_workflow_no_worker_runs_is_refused_at_start_execution_and_nothing_is_started(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    async with guarded(platform, temporal_env) as (engine, _):
        sid = await new_session(engine)
        reply = await platform.command(
            {"command": "start_execution", "session_id": sid, "workflow": "recorderr", "input": {}}
        )
        assert (reply["status"], reply["error"]) == ("error", "not_found"), reply
        assert reply["message"].startswith("workflow: no worker has registered 'recorderr'"), reply
        assert "recorder" in reply["message"], "it names the workflows there are"
        assert (await engine.command("list_executions", session_id=sid))["executions"] == []
        started = await engine.command("start_execution", session_id=sid, workflow="recorder", input={})
        assert started["execution"]["workflow"] == "recorder"


async def test_an_object_action_over_the_payload_limit_is_refused(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    async with guarded(platform, temporal_env, max_payload_bytes=1024) as (engine, _):
        action = {"type": "object", "alias": "views/all", "value": {"type": "view", "events": "{{ batch.events }}"}}
        body = object_listener("viewer", ["missions/**"], action, batch={"window_seconds": 0.5})
        await engine.command("save_listener", listener=body)
        sid = await new_session(engine)
        ids = await write_many(engine, sid, [f"missions/{n}" for n in range(10)])
        [outcome] = await outcomes_at_least(engine, sid, "viewer", 1)
        assert (outcome["status"], outcome["event_ids"]) == ("refused", ids)
        assert "payload" in outcome["message"]
        assert not (await engine.command("list_objects", session_id=sid, prefix="views/"))["objects"]


async def test_a_resave_that_no_longer_matches_a_pending_batch_skips_it(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    async with guarded(platform, temporal_env) as (engine, _):
        await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 1.5}))
        sid = await new_session(engine)
        ids = await write_many(engine, sid, ["missions/a", "missions/b"])
        moved = recorder_listener(filter={"types": ["object.**"], "aliases": ["elsewhere/**"]})
        saved = await engine.command("save_listener", listener=moved)
        assert saved["listener"]["version"] == 2
        [outcome] = await outcomes_at_least(engine, sid, "orchestrate", 1)
        assert (outcome["status"], outcome["reason"], outcome["event_ids"]) == ("skipped", "unmatched", ids)
        assert not engine.log.runs

        # The new version works for what it does match.
        later = await write_many(engine, sid, ["elsewhere/1", "missions/c"])

        async def ran() -> bool:
            return bool(engine.log.runs)

        await eventually(ran, what="a run of the new version")
        assert engine.log.event_ids() == later[:1]


async def test_writes_outside_what_a_listener_owns_are_refused(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    async with guarded(platform, temporal_env) as (engine, notes):
        literal = {"type": "object", "alias": "theirs/x", "value": {"type": "theirs"}}
        refused = await engine.platform.command(
            {
                "command": "save_listener",
                "listener": object_listener("scoped", ["missions/**"], literal, owns=["mine/**"]),
            }
        )
        assert refused["message"] == "listener.action.alias: 'theirs/x' is outside owns ['mine/**']", refused
        # A rendered alias is known only per batch: refused then, as the batch's outcome.
        outside = {"type": "object", "alias": "theirs/{{ batch.count }}", "value": {"type": "theirs"}}
        body = object_listener("scoped", ["missions/**"], outside, owns=["mine/**"])
        await engine.command("save_listener", listener=body)
        runs = object_listener("owner", ["missions/**"], {"type": "workflow", "workflow": "owner"}, owns=["mine/**"])
        await engine.command("save_listener", listener=runs)
        sid = await new_session(engine)
        ids = await write_many(engine, sid, ["missions/a"])

        [outcome] = await outcomes_at_least(engine, sid, "scoped", 1)
        assert (outcome["status"], outcome["event_ids"]) == ("access_error", ids)
        assert "theirs/1" in outcome["message"]

        async def noted() -> bool:
            return bool(notes.notes)

        await eventually(noted, what="the owner run's note")
        assert notes.notes == [["owner", 1, "access_denied"]]
        assert not (await engine.command("list_objects", session_id=sid, prefix="theirs/"))["objects"]
        mine = (await engine.command("read_object", session_id=sid, alias="mine/ok"))["object"]
        assert mine["rev"] == 1
        written = [e["alias"] for e in await session_events(engine, sid) if e["type"] == "object.written"]
        assert written == ["missions/a", "mine/ok"]


async def test_events_committed_before_a_listener_takes_effect_are_not_delivered(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    async with guarded(platform, temporal_env, activation_delay_seconds=2) as (engine, _):
        saved = await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 0.1}))
        effective_at = datetime.fromisoformat(saved["listener"]["effective_at"])
        sid = await new_session(engine)
        before = await write_many(engine, sid, ["missions/early"])
        assert datetime.now(UTC) < effective_at, "the early write landed before the listener took effect"
        await asyncio.sleep((effective_at - datetime.now(UTC)).total_seconds() + 0.1)
        after = await write_many(engine, sid, ["missions/late"])

        async def ran() -> bool:
            return bool(engine.log.runs) and engine.log.runs[-1].ended is not None

        await eventually(ran, what="the run of the late event")
        assert engine.log.event_ids() == after, "the early event never reaches the listener"
        assert before[0] < after[0]
        [outcome] = await lane_outcomes(engine, sid, "orchestrate")
        assert outcome["event_ids"] == after


async def test_keyed_lanes_firing_together_pass_the_throttle_exactly_as_often_as_it_allows(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    """Fires are counted when taken, under the listener's lock: sixteen lanes firing at once against a limit
    of three give three runs and thirteen throttled batches, never more runs (a workflow action's `success` is
    recorded only once its run has started, so counting outcomes let several through)."""
    async with guarded(platform, temporal_env, listener_fires_per_minute=3) as (engine, _):
        body = recorder_listener(
            "busy",
            concurrency={"mode": "keyed", "key": "alias", "max_parallel": 16},
            batch={"window_seconds": 0.5},
        )
        await engine.command("save_listener", listener=body)
        sid = await new_session(engine)
        await write_many(engine, sid, [f"missions/{n}" for n in range(16)])
        outcomes = await outcomes_at_least(engine, sid, "busy", 16)
        assert sorted(o["status"] for o in outcomes) == ["success"] * 3 + ["throttled"] * 13

        async def three_runs() -> bool:
            return len(engine.log.runs) >= 3

        await eventually(three_runs, what="the three runs")
        await asyncio.sleep(1.0)
        assert len(engine.log.runs) == 3


async def test_a_version_saved_during_the_activation_delay_does_not_act_before_it_takes_effect(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    delay = 6
    async with guarded(platform, temporal_env, activation_delay_seconds=delay) as (engine, _):

        def version(target: str) -> dict[str, Any]:
            action = {"type": "object", "alias": target, "value": {"type": "json", "last": "{{ batch.last_id }}"}}
            return object_listener("copy", ["tickets/*"], action)

        first = await engine.command("save_listener", listener=version("views/v1"))
        await asyncio.sleep(
            (datetime.fromisoformat(first["listener"]["effective_at"]) - datetime.now(UTC)).total_seconds()
        )
        sid = await new_session(engine)
        second = await engine.command("save_listener", listener=version("views/v2"))
        [early] = await write_many(engine, sid, ["tickets/1"])
        [outcome] = await outcomes_at_least(engine, sid, "copy", 1)
        assert datetime.now(UTC) < datetime.fromisoformat(second["listener"]["effective_at"]), "fired in time"
        assert outcome["event_ids"] == [early] and outcome["status"] == "success"
        assert (await engine.command("read_object", session_id=sid, alias="views/v1"))["status"] == "success"
        missing = await engine.platform.command({"command": "read_object", "session_id": sid, "alias": "views/v2"})
        assert missing["status"] == "error", "version 2 acted before it took effect"
        await asyncio.sleep(
            (datetime.fromisoformat(second["listener"]["effective_at"]) - datetime.now(UTC)).total_seconds()
        )
        [late] = await write_many(engine, sid, ["tickets/2"])
        await outcomes_at_least(engine, sid, "copy", 2)
        written = await engine.command("read_object", session_id=sid, alias="views/v2")
        assert written["object"]["value"]["last"] == late


async def test_a_resave_that_no_longer_takes_some_of_a_pending_batch_runs_with_those_it_takes(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    """SPEC 3: a new version replaces the old one for every later batch. Narrowed before the window closes, the
    listener's batch holds what it takes now; what it no longer takes is consumed, never delivered."""
    async with guarded(platform, temporal_env) as (engine, _):
        wide = {"types": ["object.**"], "aliases": ["missions/**", "other/**"]}
        await engine.command("save_listener", listener=recorder_listener(filter=wide, batch={"window_seconds": 1.5}))
        sid = await new_session(engine)
        ids = await write_many(engine, sid, ["other/a", "missions/a", "other/b", "missions/b", "other/c"])
        narrow = recorder_listener(filter={"types": ["object.**"], "aliases": ["missions/**"]})
        assert (await engine.command("save_listener", listener=narrow))["listener"]["version"] == 2

        async def ran() -> bool:
            return bool(engine.log.runs)

        await eventually(ran, what="a run of the narrowed listener")
        [run] = engine.log.runs
        assert [m["id"] for m in run.input["batch"]["messages"]] == [ids[1], ids[3]], "its entries: what it takes"
        assert run.input["batch"]["event_ids"] == ids, "what it consumed, as distinct_by's superseded events are"
        [outcome] = await outcomes_at_least(engine, sid, "orchestrate", 1)
        assert outcome["status"] == "success"
        assert (await lane_state(engine, sid, "orchestrate"))["pending"] == 0, "what it no longer takes is consumed"
