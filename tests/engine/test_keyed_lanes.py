"""A keyed listener: a lane per key value, one run in flight per lane, at most `max_parallel` keys at once."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from orchestrator.lanes.nudges import Nudger
from orchestrator.store.lane_store import Finished, Finishing
from tests.engine.harness import (
    Engine,
    eventually,
    lane_state,
    new_session,
    overlapping_holds,
    recorder_listener,
    write_many,
)

pytestmark = pytest.mark.both_servers


def keyed_listener(*, key: str = "alias", sleep: float = 0, window: float = 0.3, **concurrency: Any) -> dict[str, Any]:
    return recorder_listener(
        concurrency={"mode": "keyed", "key": key, **concurrency},
        batch={"window_seconds": window, "max_events": 100},
        action={"type": "workflow", "workflow": "recorder", "input": {"sleep": sleep}},
    )


def runs_of_lane(engine: Engine, lane: str) -> list[dict[str, Any]]:
    return [r.input for r in engine.log.runs if r.input["batch"]["lane"] == lane]


async def all_ended(engine: Engine, count: int) -> bool:
    return len(engine.log.event_ids()) >= count and all(r.ended is not None for r in engine.log.runs)


async def test_a_lane_per_alias_and_events_during_a_run_wait_for_its_next_batch(engine: Engine) -> None:
    await engine.command("save_listener", listener=keyed_listener(sleep=1.5))
    sid = await new_session(engine)
    first_a = await write_many(engine, sid, ["missions/a", "missions/a"])
    first_b = await write_many(engine, sid, ["missions/b"])

    async def a_running() -> bool:
        return any(r.input["batch"]["lane"] == "missions/a" and r.ended is None for r in engine.log.runs)

    await eventually(a_running, what="the first run of lane missions/a")
    during_a = await write_many(engine, sid, ["missions/a", "missions/a", "missions/a"])

    async def done() -> bool:
        return await all_ended(engine, 5)

    await eventually(done, what="every event in a run")
    a_runs = runs_of_lane(engine, "missions/a")
    assert [r["batch"]["event_ids"] for r in a_runs] == [first_a, during_a]
    assert [r["batch"]["event_ids"] for r in runs_of_lane(engine, "missions/b")] == [first_b]
    assert engine.log.most_at_once["orchestrate:missions/a"] == 1
    assert engine.log.most_at_once["orchestrate:missions/b"] == 1
    a_records = [r for r in engine.log.runs if r.input["batch"]["lane"] == "missions/a"]
    assert a_records[1].started >= (a_records[0].ended or float("inf")), "the lane's second run began after its first"
    # The two keys ran side by side: lanes are independent below the cross-key cap.
    assert engine.log.most_at_once["orchestrate:*"] == 2


async def test_key_segments_cut_an_alias_key_to_its_first_segments(engine: Engine) -> None:
    await engine.command("save_listener", listener=keyed_listener(key_segments=2))
    sid = await new_session(engine)
    ids = await write_many(engine, sid, ["missions/a/1", "missions/b/1", "missions/a/2/x", "missions/b"])

    async def done() -> bool:
        return await all_ended(engine, 4)

    await eventually(done, what="every event in a run")
    by_lane = {r.input["batch"]["lane"]: r.input["batch"]["event_ids"] for r in engine.log.runs}
    assert by_lane == {"missions/a": [ids[0], ids[2]], "missions/b": [ids[1], ids[3]]}
    assert len(engine.log.runs) == 2


async def test_the_cross_key_cap_holds_across_six_keys(engine: Engine) -> None:
    await engine.command("save_listener", listener=keyed_listener(sleep=1.5, window=0.2, max_parallel=2))
    sid = await new_session(engine)
    aliases = [f"missions/k{n}" for n in range(6)]
    nudged_before = Nudger.sent_total
    ids = await write_many(engine, sid, aliases + aliases)

    async def done() -> bool:
        return await all_ended(engine, len(ids))

    await eventually(done, within=60, what="every event in a run")
    # The keys given the two free slots are nudged; the rest queue, and the runs' ends hand them the slots.
    assert Nudger.sent_total - nudged_before <= 2, "no lane nudged only to find every key slot taken"
    assert engine.log.most_at_once["orchestrate:*"] <= 2, "never more than max_parallel keys running"
    assert engine.log.most_at_once["orchestrate:*"] == 2, "the cap is a cap, not serial"
    assert sorted(engine.log.event_ids()) == sorted(ids)
    assert not [i for i, n in Counter(engine.log.event_ids()).items() if n > 1], "no event ran twice"
    assert {r.input["batch"]["lane"] for r in engine.log.runs} == {a for a in aliases}
    assert all(v == 1 for k, v in engine.log.most_at_once.items() if not k.endswith(":*"))


async def test_a_batch_waiting_for_a_key_slot_takes_in_what_arrives_meanwhile(engine: Engine) -> None:
    await engine.command("save_listener", listener=keyed_listener(sleep=2.0, window=0.2, max_parallel=1))
    sid = await new_session(engine)
    first = await write_many(engine, sid, ["missions/a"])

    async def a_running() -> bool:
        return bool(engine.log.open)

    await eventually(a_running, what="key a's run")
    # Key b is cut and held behind a's slot; three more b events arrive one by one while it waits.
    later = []
    for _ in range(4):
        later += await write_many(engine, sid, ["missions/b"])

    async def done() -> bool:
        return await all_ended(engine, len(first) + len(later))

    await eventually(done, within=60, what="every event in a run")
    assert [r["batch"]["event_ids"] for r in runs_of_lane(engine, "missions/b")] == [later], "one batch for b"
    assert engine.log.most_at_once["orchestrate:*"] == 1


async def test_a_key_slot_handed_to_a_batch_that_goes_no_further_is_given_back(engine: Engine) -> None:
    # a's run lasts long enough for b to queue and the listener to be switched off, even on a loaded machine.
    await engine.command("save_listener", listener=keyed_listener(sleep=5, window=0.2, max_parallel=1))
    sid = await new_session(engine)
    await write_many(engine, sid, ["missions/a"])

    async def a_running() -> bool:
        return bool(engine.log.open)

    await eventually(a_running, what="key a's run")
    # b is cut and queued behind a's slot; switched off meanwhile, it is consumed when the slot comes to it.
    await write_many(engine, sid, ["missions/b"])

    async def b_queued() -> bool:
        return bool((await lane_state(engine, sid, "orchestrate", "missions/b"))["waiting_for_slot"])

    await eventually(b_queued, what="key b's batch to queue for the slot")
    await engine.command("switch_listener", session_id=sid, name="orchestrate", enabled=False)

    async def a_ended() -> bool:
        return all(r.ended is not None for r in engine.log.runs)

    await eventually(a_ended, what="key a's run to end")

    async def b_consumed() -> bool:
        view = await lane_state(engine, sid, "orchestrate", "missions/b")
        return not view["waiting_for_slot"] and view["pending"] == 0

    await eventually(b_consumed, what="key b's batch to be handed the slot and consumed")
    await engine.command("switch_listener", session_id=sid, name="orchestrate", enabled=True)
    [c] = await write_many(engine, sid, ["missions/c"])

    async def c_ran() -> bool:
        return c in engine.log.event_ids()

    await eventually(c_ran, within=20, what="key c's run: the slot b was handed must not stay taken")
    assert not runs_of_lane(engine, "missions/b"), "b was consumed while switched off"


async def test_an_event_without_the_key_falls_in_the_shared_lane(engine: Engine) -> None:
    listener = keyed_listener(key="item.role")
    listener["filter"] = {"types": ["thread.item_posted"], "aliases": ["missions/**"]}
    await engine.command("save_listener", listener=listener)
    sid = await new_session(engine)
    ids = []
    for role in ["pilot", None, "pilot", "crew", None]:
        item: dict[str, Any] = {"type": "text", "message": "hello"}
        if role is not None:
            item["role"] = role
        reply = await engine.command("post_thread_item", session_id=sid, alias="missions/log", item=item)
        ids.append(reply["event_id"])

    async def done() -> bool:
        return await all_ended(engine, 5)

    await eventually(done, what="every event in a run")
    by_lane = {r.input["batch"]["lane"]: r.input["batch"]["event_ids"] for r in engine.log.runs}
    assert by_lane == {"pilot": [ids[0], ids[2]], "crew": [ids[3]], "~": [ids[1], ids[4]]}


async def test_a_freed_key_slot_goes_to_the_key_that_has_waited_longest(engine: Engine) -> None:
    """With one key slot: b and then c queue behind a's run, and a gets more events meanwhile. When a's
    slot frees, it goes to b (first to queue), then c, and only then to a's next batch: a busy key does not
    keep the slot, and no key starves."""
    await engine.command("save_listener", listener=keyed_listener(sleep=2, window=0.2, max_parallel=1))
    sid = await new_session(engine)
    await write_many(engine, sid, ["missions/a"])
    await eventually(lambda: _running(engine, "missions/a"), what="key a's run")

    async def queued(key: str) -> bool:
        return bool((await lane_state(engine, sid, "orchestrate", key))["waiting_for_slot"])

    for key in ("missions/b", "missions/c"):
        await write_many(engine, sid, [key])
        await eventually(lambda key=key: queued(key), what=f"{key} to queue for the slot")  # type: ignore[misc]
    await write_many(engine, sid, ["missions/a", "missions/a"])
    await eventually(lambda: queued("missions/a"), what="a's next batch to queue for the slot")

    async def all_done() -> bool:
        return await all_ended(engine, 5)

    await eventually(all_done, within=60, what="every batch to run")
    order = [r.input["batch"]["lane"] for r in sorted(engine.log.runs, key=lambda r: r.started)]
    assert order == ["missions/a", "missions/b", "missions/c", "missions/a"]
    assert engine.log.most_at_once["orchestrate:*"] == 1


async def _running(engine: Engine, lane: str) -> bool:
    return any(r.input["batch"]["lane"] == lane for r in engine.log.open.values())


async def test_a_fire_that_dies_after_starting_its_run_is_finished_once_and_leaks_no_key_slot(
    engine: Engine,
) -> None:
    """The fire of a's batch starts a's run, then fails before it marks the batch done (as a worker dying
    there would). Its retry finishes the same batch: one run for it, not two, and the key slot it holds is
    given back when that run ends, so b (behind it, with one key slot) runs next."""
    lanes = engine.platform.store.lanes
    real = lanes.finish
    failed: list[int] = []

    async def fails_once(finishing: Finishing) -> Finished:
        if not failed and finishing.started:
            failed.append(finishing.batch_id)
            raise ConnectionResetError("the worker died after the start")
        return await real(finishing)

    lanes.finish = fails_once  # type: ignore[method-assign]
    await engine.command("save_listener", listener=keyed_listener(sleep=1, window=0.2, max_parallel=1))
    sid = await new_session(engine)
    a = await write_many(engine, sid, ["missions/a"])

    async def a_started() -> bool:
        return bool(runs_of_lane(engine, "missions/a"))

    # b comes once a's run holds the key slot: written together, either lane's window may close first.
    await eventually(a_started, what="a's run")
    b = await write_many(engine, sid, ["missions/b"])

    async def both_ran() -> bool:
        return await all_ended(engine, 2)

    await eventually(both_ran, within=60, what="a's run, then b's")
    assert failed, "the fire did fail once"
    assert [r.input["batch"]["event_ids"] for r in engine.log.runs] == [a, b], "one run per batch"
    executions = (await engine.command("list_executions", session_id=sid))["executions"]
    assert len(executions) == 2
    assert engine.log.most_at_once["orchestrate:*"] == 1
    assert await overlapping_holds(engine, sid, "orchestrate") == []


async def test_a_listeners_priority_and_its_keys_reach_temporal_as_the_runs_priority(
    engine: Engine, temporal_env: Any
) -> None:
    if temporal_env.supports_time_skipping:
        pytest.skip("the time-skipping server keeps no priority to describe")
    body = keyed_listener(sleep=0, window=0.2)
    body["priority"] = 5
    await engine.command("save_listener", listener=body)
    sid = await new_session(engine)
    await write_many(engine, sid, ["missions/a"])
    await eventually(lambda: all_ended(engine, 1), what="the run")
    execution = engine.log.runs[0].input["execution_id"]
    described = await engine.client.get_workflow_handle(execution).describe()
    priority = described.raw_description.workflow_execution_info.priority
    assert (priority.priority_key, priority.fairness_key) == (1, "missions/a"), "5 is first: Temporal's key 1"
