"""What happened to my event (`explain_event`), and taking events again (`replay_batch`, `redeliver`)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.harness import Engine, eventually, lane_outcomes, new_session, recorder_listener, write_many

pytestmark = pytest.mark.both_servers


async def ran(engine: Engine, count: int) -> None:
    async def done() -> bool:
        return len(engine.log.runs) >= count and all(r.ended is not None for r in engine.log.runs)

    await eventually(done, within=30, what=f"{count} runs")


async def test_explain_event_says_per_listener_what_matched_and_what_became_of_it(engine: Engine) -> None:
    await engine.command("save_listener", listener=recorder_listener(receipt={"alias": "ops/receipts"}))
    other = recorder_listener("other", filter={"types": ["thread.item_posted"]})
    await engine.command("save_listener", listener=other)
    sid = await new_session(engine)
    written = await engine.command(
        "write_object", session_id=sid, alias="missions/1", value={"type": "m"}, explain=True
    )
    routed = {item["listener"]: item for item in written["explain"]["listeners"]}
    assert written["explain"]["routed"] is True, "the write waited for the router's decision"
    assert routed["orchestrate"]["matched"] is True and routed["orchestrate"]["lane"] == "_"
    assert (routed["other"]["matched"], routed["other"]["reason"]) == (False, "filter")
    await ran(engine, 1)

    async def receipted() -> bool:
        reply = await engine.command("explain_event", session_id=sid, event_id=written["event_id"])
        fate = next(i for i in reply["listeners"] if i["listener"] == "orchestrate")
        return bool(fate.get("batches")) and fate["batches"][0]["receipt_event_id"] is not None

    await eventually(receipted, what="the batch's receipt")
    reply = await engine.command("explain_event", session_id=sid, event_id=written["event_id"])
    fate = next(i for i in reply["listeners"] if i["listener"] == "orchestrate")
    [batch] = fate["batches"]
    assert batch["first_id"] == written["event_id"] and batch["entry"] is True
    assert batch["outcome"]["status"] == "success"
    assert batch["outcome"]["execution_id"] == engine.log.runs[0].input["execution_id"]
    assert fate["queued"] is True and fate["queued_at"]
    # Said plainly too (SPEC 8: lane, batch, run, outcome, receipt), for the newest batch that took it.
    assert fate["batch"] == {k: batch[k] for k in ("first_id", "last_id", "retry", "replay", "state")}
    assert fate["run"] == batch["execution_id"] == engine.log.runs[0].input["execution_id"]
    assert fate["outcome"] == batch["outcome"] and fate["receipt"] == batch["receipt_event_id"]
    # The run's own execution events never go back to its listener: self-wake.
    started = (await engine.command("list_session_events", session_id=sid, types=["execution.started"]))["events"]
    own = await engine.command("explain_event", session_id=sid, event_id=started[0]["id"])
    mine = next(i for i in own["listeners"] if i["listener"] == "orchestrate")
    assert (mine["matched"], mine["reason"]) == (False, "filter") or mine["reason"] == "self_wake"


async def test_explain_event_says_what_a_listener_deleted_since_did_with_the_event(engine: Engine) -> None:
    """A deleted listener's rules go with it: explain says what its batches took (it left the listener out once
    deleted, and said `activation: no version had taken effect` once saved again)."""
    await engine.command("save_listener", listener=recorder_listener())
    sid = await new_session(engine)
    written = await engine.command("write_object", session_id=sid, alias="missions/1", value={"type": "m"})
    await ran(engine, 1)

    async def fate() -> dict[str, Any]:
        reply = await engine.command("explain_event", session_id=sid, event_id=written["event_id"])
        return next(i for i in reply["listeners"] if i["listener"] == "orchestrate")

    async def succeeded() -> bool:
        return ((await fate()).get("outcome") or {}).get("status") == "success"

    await eventually(succeeded, what="the batch's outcome")
    before = await fate()
    await engine.command("delete_listener", name="orchestrate")
    gone = await fate()
    assert gone["deleted_since"] is True and gone["matched"] is True and gone["lane"] == "_", gone
    assert gone["batches"] == before["batches"] and gone["run"] == before["run"], "what it did is still said"
    await engine.command("save_listener", listener=recorder_listener())
    again = await fate()
    assert again["deleted_since"] is True and again["batches"] == before["batches"], again


async def test_explain_event_follows_a_chain_as_deep_as_listeners_go_back_to_the_request_and_forward(
    engine: Engine,
) -> None:
    """Two listeners writing each other's alias: a chain down to `listener_chain_depth`, whose deepest event is
    explained back to the write that began it, and the first event forward to the deepest."""
    for name, heard, writes in (("ping", "chain/a", "chain/b"), ("pong", "chain/b", "chain/a")):
        body = {
            "name": name,
            "filter": {"types": ["object.written"], "aliases": [heard]},
            "batch": {"window_seconds": 0.05},
            "action": {"type": "object", "alias": writes, "value": {"type": "hop"}},
        }
        await engine.command("save_listener", listener=body)
    sid = await new_session(engine)
    [first] = await write_many(engine, sid, ["chain/a"])
    deepest = engine.platform.settings.limits.listener_chain_depth

    async def chain() -> list[dict[str, Any]]:
        return (await engine.command("list_session_events", session_id=sid, types=["object.written"]))["events"]

    async def all_written() -> bool:
        return len(await chain()) == deepest + 1

    await eventually(all_written, what="the chain written to its deepest")
    last = (await chain())[-1]
    assert last["depth"] == deepest
    back = (await engine.command("explain_event", session_id=sid, event_id=last["id"]))["caused_by"]
    assert "request" in back[-1], back[-3:]
    assert [step["event"]["id"] for step in back if "event" in step][-1] == first
    forward = (await engine.command("explain_event", session_id=sid, event_id=first))["caused"]
    reached, level = [], forward
    # The deepest event's batch is skipped at the depth limit: it wrote nothing.
    while level and level[0]["wrote"]:
        step = level[0]["wrote"][0]
        reached.append(step["event"]["id"])
        level = step.get("caused") or []
    assert reached == [e["id"] for e in (await chain())[1:]], "forward to the deepest"


async def test_replay_batch_runs_a_past_batch_again_as_a_batch_of_its_own(engine: Engine) -> None:
    body = recorder_listener(
        batch={"window_seconds": 0.3},
        action={"type": "workflow", "workflow": "recorder", "input": {"replay_of": "{{ batch.replay_of }}"}},
        receipt={"alias": "ops/receipts"},
    )
    body["action"]["input"] = {"events": "{{ batch.messages }}"}
    await engine.command("save_listener", listener=body)
    sid = await new_session(engine)
    ids = await write_many(engine, sid, ["missions/a", "missions/b"])
    await ran(engine, 1)
    first = engine.log.runs[0].input["batch"]
    assert first["event_ids"] == ids

    replay = await engine.command("replay_batch", session_id=sid, listener="orchestrate", batch=ids[0])
    assert replay["replay"]["replay_of"] == ids[0]
    assert replay["batch"] == {"listener": "orchestrate", "lane": "_", "replay_of": ids[0], "event_ids": ids}
    await ran(engine, 2)
    again = engine.log.runs[1].input
    assert again["batch"]["event_ids"] == ids, "all of its events"
    assert again["batch"]["replay_of"] == ids[0]
    assert again["execution_id"] != engine.log.runs[0].input["execution_id"], "a run of its own"

    async def two_outcomes() -> bool:
        return len(await lane_outcomes(engine, sid, "orchestrate")) == 2

    await eventually(two_outcomes, what="the replay's own outcome")
    replayed, own = await lane_outcomes(engine, sid, "orchestrate")
    assert (replayed["replay"], own["replay"]) == (1, 0), "the replay's outcome says which time it is"
    assert replayed["first_id"] == own["first_id"] == ids[0]
    audit = (await engine.command("list_session_events", session_id=sid, types=["listener.replayed"]))["events"]
    assert [e["data"]["batch"] for e in audit] == [ids[0]], "audited as an event"

    # What the event caused: the lane's batch and its replay, each with its own run and its own writes only
    # (both took the same events, so the first event's id alone cannot tell their writes apart).
    async def both_receipts() -> bool:
        found = await engine.command("list_session_events", session_id=sid, types=["thread.item_posted"])
        return len(found["events"]) == 2

    await eventually(both_receipts, what="both receipts")
    explained = await engine.command("explain_event", session_id=sid, event_id=ids[0])
    fate = next(i for i in explained["listeners"] if i["listener"] == "orchestrate")
    assert fate["batch"]["replay"] == 1 and fate["run"] == again["execution_id"], "the newest batch: the replay"
    caused = explained["caused"]
    assert [node["batch"]["replay"] for node in caused] == [0, 1]
    wrote = [{step["event"]["id"] for step in node["wrote"]} for node in caused]
    assert wrote[0] and wrote[1] and not wrote[0] & wrote[1], wrote
    for node, items in zip(caused, wrote, strict=True):
        receipts = [s["event"] for s in node["wrote"] if s["event"]["type"] == "thread.item_posted"]
        assert len(receipts) == 1, items


async def test_redeliver_hands_a_range_of_events_to_one_listener_as_new_batches(engine: Engine) -> None:
    await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 0.2, "max_events": 3}))
    sid = await new_session(engine)
    ids = await write_many(engine, sid, [f"missions/{n}" for n in range(5)])
    await eventually(lambda: _all_in(engine, ids), what="the first delivery")
    before = len(engine.log.runs)
    reply = await engine.command("redeliver", session_id=sid, listener="orchestrate", after=ids[0], through=ids[-1])
    assert reply["redelivered"] == {"listener": "orchestrate", "events": 4, "batches": 2}
    assert reply["batches"] == [{"lane": "_", "event_ids": ids[1:4]}, {"lane": "_", "event_ids": ids[4:]}]

    async def again() -> bool:
        later = [i for r in engine.log.runs[before:] for i in r.input["batch"]["event_ids"]]
        return sorted(later) == ids[1:]

    await eventually(again, what="the range delivered again")
    assert [len(r.input["batch"]["event_ids"]) for r in engine.log.runs[before:]] == [3, 1], "cut by max_events"
    assert engine.log.most_at_once["orchestrate:_"] == 1


async def test_redeliver_cuts_as_the_lane_does_distinct_by_included(engine: Engine) -> None:
    body = recorder_listener(batch={"window_seconds": 0.2, "max_events": 2, "distinct_by": "alias"})
    await engine.command("save_listener", listener=body)
    sid = await new_session(engine)
    ids = await write_many(engine, sid, ["missions/a", "missions/a", "missions/a", "missions/b", "missions/c"])
    await eventually(lambda: _all_in(engine, ids), what="the first delivery")
    first = [r.input["batch"]["event_ids"] for r in engine.log.runs]
    before = len(engine.log.runs)
    reply = await engine.command("redeliver", session_id=sid, listener="orchestrate", after=0, through=ids[-1])
    # Three writes to one alias are one entry: the first batch takes them and `missions/b`, as the lane's did.
    assert reply["redelivered"] == {"listener": "orchestrate", "events": 5, "batches": 2}

    async def again() -> bool:
        return sorted(i for r in engine.log.runs[before:] for i in r.input["batch"]["event_ids"]) == ids

    await eventually(again, what="the range delivered again")
    assert [r.input["batch"]["event_ids"] for r in engine.log.runs[before:]] == [ids[:4], ids[4:]] == first


async def test_redeliver_judges_a_thread_items_whole_message_as_the_router_does(engine: Engine) -> None:
    """A `where` on `item.message` reads the whole message (SPEC 2), not the 200-character preview kept beside
    the event: a `json` item's preview is text, which no path into the message can read."""
    body = recorder_listener(
        filter={
            "types": ["thread.item_posted"],
            "where": [{"path": "item.message.kind", "op": "eq", "value": "alert"}],
        },
        batch={"window_seconds": 0.2},
    )
    await engine.command("save_listener", listener=body)
    sid = await new_session(engine)
    posted = await engine.command(
        "post_thread_item", session_id=sid, alias="chats/1", item={"type": "json", "message": {"kind": "alert"}}
    )
    event = int(posted["event_id"])
    await eventually(lambda: _all_in(engine, [event]), what="the first delivery")
    reply = await engine.command("redeliver", session_id=sid, listener="orchestrate", after=0, through=event)
    assert reply["redelivered"] == {"listener": "orchestrate", "events": 1, "batches": 1}


async def _all_in(engine: Engine, ids: list[int]) -> bool:
    return set(ids) <= set(engine.log.event_ids()) and all(r.ended is not None for r in engine.log.runs)


@pytest.mark.parametrize(
    ("command", "args", "code", "field"),
    [
        ("replay_batch", {"listener": "gone", "batch": 1}, "not_found", "listener"),
        ("replay_batch", {"listener": "orchestrate", "batch": 999999}, "not_found", "batch"),
        ("replay_batch", {"listener": "orchestrate", "batch": 0}, "invalid_request", "batch"),
        ("redeliver", {"listener": "orchestrate", "after": 10, "through": 5}, "invalid_request", "through"),
        ("redeliver", {"listener": "orchestrate", "after": 0, "through": 10**9}, "limit_exceeded", "through"),
        ("redeliver", {"listener": "gone", "after": 0, "through": 5}, "not_found", "listener"),
        ("explain_event", {"event_id": 999999}, "not_found", "event_id"),
    ],
)
async def test_replays_and_explain_refuse_bad_input_naming_the_field(
    engine: Engine, command: str, args: dict[str, Any], code: str, field: str
) -> None:
    await engine.command("save_listener", listener=recorder_listener())
    sid = await new_session(engine)
    reply = await engine.platform.command({"command": command, "session_id": sid, **args})
    assert (reply["status"], reply["error"]) == ("error", code), reply
    assert reply["message"].startswith(field), reply
    events = (await engine.command("list_session_events", session_id=sid))["events"]
    assert events == [], "a refused command writes nothing"
