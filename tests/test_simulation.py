"""`simulate_listener` without servers: the engine's own parts replaying a made-up stream on a clock of
their own (windows, lanes, `max_events`, `distinct_by`, debounce, the throttles, runs that hold their slot,
what never matched and why); and the command's checks on a real store."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from orchestrator.config import Settings
from orchestrator.core.declaration import ListenerDeclaration
from orchestrator.core.events import Committed, Event
from orchestrator.core.limits import Limits
from orchestrator.lanes.simulation import Simulated, simulate
from orchestrator.platform import Platform

T0 = 1_800_000_000.0
SETTINGS = Settings(limits=Limits(activation_delay_seconds=0))


def stream(*writes: tuple[float, str] | tuple[float, str, dict[str, Any]]) -> list[Committed]:
    """Events at `T0 + seconds` on aliases, ids from 1 in that order."""
    found = []
    for n, write in enumerate(writes, start=1):
        at, alias = write[0], write[1]
        source = write[2] if len(write) > 2 else {}  # type: ignore[misc]
        created = datetime.fromtimestamp(T0 + at, UTC)
        envelope = Event.model_validate(
            {
                "id": n,
                "session_id": "ses_s",
                "type": "object.written",
                "alias": alias,
                "source": source,
                "created_at": created,
                "data": {"rev": 1},
            }
        ).envelope()
        found.append(Committed(envelope, created))
    return found


def body(**more: Any) -> ListenerDeclaration:
    declared: dict[str, Any] = {
        "name": "sim",
        "filter": {"types": ["object.written"], "aliases": ["m/**"]},
        "batch": {"window_seconds": 1},
        "action": {"type": "object", "alias": "views/sim", "value": {"type": "view"}},
    }
    declared.update(more)
    return ListenerDeclaration.model_validate(declared)


async def run(
    events: list[Committed], decl: ListenerDeclaration, settings: Settings = SETTINGS, **kw: Any
) -> Simulated:
    return await simulate(events, decl, settings, "ses_s", **kw)


def cut(found: Simulated) -> list[tuple[str, list[int], float]]:
    """Each batch as (lane, its event ids, seconds after T0 it fired)."""
    return [
        (b["lane"], b["event_ids"], round(datetime.fromisoformat(b["fires_at"]).timestamp() - T0, 3))
        for b in found.batches
    ]


async def test_a_serial_window_cuts_at_its_close_and_the_next_opens_with_the_next_event() -> None:
    found = await run(stream((0, "m/a"), (0.3, "m/b"), (0.6, "m/a"), (2.0, "m/c"), (2.2, "m/a"), (5.0, "m/b")), body())
    assert cut(found) == [("_", [1, 2, 3], 1.0), ("_", [4, 5], 3.0), ("_", [6], 6.0)]
    assert all(b["status"] == "success" for b in found.batches)
    assert found.events == 6 and found.matched == 6


async def test_the_events_of_one_transaction_arrive_together() -> None:
    """Routed together once their transaction commits, as the router reads them (each was a batch of its own
    with no window, where the engine cut one)."""
    events = stream((0, "m/a"), (0.00001, "m/b"), (0.00002, "m/c"), (3.0, "m/a"), (3.00001, "m/b"))
    in_two = [replace(e, tx="t1" if e.id <= 3 else "t2") for e in events]
    assert cut(await run(in_two, body(batch={"window_seconds": 0}))) == [("_", [1, 2, 3], 0.0), ("_", [4, 5], 3.0)]
    alone = cut(await run(events, body(batch={"window_seconds": 0})))
    assert [ids for _, ids, _ in alone] == [[1], [2], [3], [4], [5]], "events of no known transaction, each at its time"


async def test_a_simulated_batch_logs_nothing_whatever_turns_the_processs_loggers_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`orchestrator dev` printed simulated batches as fired: uvicorn's `dictConfig` (existing loggers kept) turns
    every logger of the tree on again, a disabled one too, as this does."""
    loggers = [found for found in logging.Logger.manager.loggerDict.values() if isinstance(found, logging.Logger)]
    were = [found.disabled for found in loggers]
    try:
        for found in loggers:
            found.disabled = False
        with caplog.at_level(logging.DEBUG):
            await run(stream((0, "m/a"), (2.0, "m/b")), body(batch={"window_seconds": 0}))
    finally:
        for found, was in zip(loggers, were, strict=True):
            found.disabled = was
    assert [r.getMessage() for r in caplog.records if getattr(r, "activity", None)] == []


async def test_a_simulation_lets_the_processs_other_work_run_meanwhile() -> None:
    """Ten seconds of a read-only key's simulation held every other request of the API, `/healthz` too: its
    in-memory store never waits, so nothing else ran until it ended."""
    ticks = 0

    async def other_work() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    beside = asyncio.ensure_future(other_work())
    try:
        events = stream(*((n * 0.5, f"m/{n % 7}") for n in range(400)))
        found = await run(events, body(batch={"window_seconds": 0, "max_events": 1}))
        during = ticks
    finally:
        beside.cancel()
    assert len(found.batches) == 400
    assert during >= 10, f"the other work ran {during} times during the simulation"


async def test_max_events_leaves_the_rest_to_a_window_of_its_own() -> None:
    # What a full batch leaves keeps its commit: its window is its own oldest event's.
    found = await run(
        stream((0, "m/a"), (0.1, "m/b"), (0.2, "m/c")), body(batch={"window_seconds": 1, "max_events": 2})
    )
    assert cut(found) == [("_", [1, 2], 1.0), ("_", [3], 1.2)]


async def test_keyed_lanes_batch_apart() -> None:
    decl = body(concurrency={"mode": "keyed", "key": "alias"})
    found = await run(stream((0, "m/a"), (0.5, "m/b"), (0.7, "m/a"), (1.2, "m/b")), decl)
    assert sorted(cut(found)) == [("m/a", [1, 3], 1.0), ("m/b", [2, 4], 1.5)]


async def test_distinct_by_keeps_the_newest_per_value_as_one_entry() -> None:
    decl = body(batch={"window_seconds": 1, "distinct_by": "alias"})
    found = await run(stream((0, "m/a"), (0.1, "m/a"), (0.2, "m/b"), (0.3, "m/a")), decl)
    [batch] = found.batches
    assert batch["event_ids"] == [1, 2, 3, 4] and batch["count"] == 2


async def test_debounce_waits_for_quiet_and_never_past_max_wait() -> None:
    decl = body(batch={"window_seconds": 0, "debounce_seconds": 1, "max_wait_seconds": 3})
    quiet = await run(stream((0, "m/a"), (0.5, "m/a"), (1.0, "m/a"), (1.4, "m/a")), decl)
    assert cut(quiet) == [("_", [1, 2, 3, 4], 2.4)]
    steady = await run(stream(*((n * 0.5, "m/a") for n in range(10))), decl)
    assert cut(steady)[0] == ("_", [1, 2, 3, 4, 5, 6, 7], 3.0)


async def test_the_throttle_refuses_what_it_would_refuse() -> None:
    settings = Settings(limits=Limits(activation_delay_seconds=0, listener_fires_per_minute=2))
    decl = body(batch={"window_seconds": 0.5})
    found = await run(stream((0, "m/a"), (2, "m/b"), (4, "m/c"), (70, "m/d")), decl, settings)
    assert [b["status"] for b in found.batches] == ["success", "success", "throttled", "success"]


async def test_a_listeners_own_throttle_holds_what_it_would_hold_and_drops_nothing() -> None:
    # Two writes a window of 10 s: the third batch fires when the first leaves the window, with what came
    # meanwhile; per alias, m/b goes when it comes, m/a waits.
    decl = body(batch={"window_seconds": 0.5}, throttle={"per_seconds": 10, "runs": 2})
    found = await run(stream((0, "m/a"), (2, "m/b"), (4, "m/c"), (5, "m/d"), (30, "m/e")), decl)
    assert cut(found) == [("_", [1], 0.5), ("_", [2], 2.5), ("_", [3, 4], 10.5), ("_", [5], 30.5)]
    assert all(b["status"] == "success" for b in found.batches)
    keyed = body(
        concurrency={"mode": "keyed", "key": "alias"},
        batch={"window_seconds": 0.5},
        throttle={"per_seconds": 10, "runs": 1, "key": "alias"},
    )
    found = await run(stream((0, "m/a"), (1, "m/a"), (2, "m/b")), keyed)
    assert sorted(cut(found)) == [("m/a", [1], 0.5), ("m/a", [2], 10.5), ("m/b", [3], 2.5)]


async def test_a_run_holds_its_lane_for_run_seconds() -> None:
    decl = body(action={"type": "workflow", "workflow": "w"})
    found = await run(stream((0, "m/a"), (1.5, "m/b"), (2.0, "m/c")), decl, run_seconds=5.0)
    assert cut(found) == [("_", [1], 1.0), ("_", [2, 3], 6.0)]
    at_once = await run(stream((0, "m/a"), (1.5, "m/b"), (2.0, "m/c")), decl)
    assert cut(at_once) == [("_", [1], 1.0), ("_", [2, 3], 2.5)]


async def test_what_never_matched_is_counted_and_named_with_why() -> None:
    found = await run(stream((0, "m/a"), (0.1, "other/x"), (0.2, "m/b", {"listener": "sim"})), body())
    assert cut(found) == [("_", [1], 1.0)]
    assert found.unmatched == {"filter": 1, "self_wake": 1}
    assert [(u["event_id"], u["reason"]) for u in found.unmatched_events] == [(2, "filter"), (3, "self_wake")]


async def test_the_command_answers_from_the_stored_stream_and_saves_nothing(platform: Platform) -> None:
    sid = (await platform.command({"command": "open_session"}))["session"]["id"]
    for alias in ("m/a", "m/b", "x/c"):
        reply = await platform.command(
            {"command": "write_object", "session_id": sid, "alias": alias, "value": {"type": "t"}}
        )
        assert reply["status"] == "success"
    listener = body().model_dump(mode="json", exclude_unset=True)
    reply = await platform.command({"command": "simulate_listener", "session_id": sid, "listener": listener})
    assert reply["status"] == "success", reply
    [batch] = reply["batches"]
    assert batch["event_ids"] == [1, 2] and reply["events"] == 3 and reply["unmatched"] == {"filter": 1}
    assert reply["truncated"] is False and reply["through"] == 3
    after = await platform.command(
        {"command": "simulate_listener", "session_id": sid, "listener": listener, "after": 1}
    )
    assert [b["event_ids"] for b in after["batches"]] == [[2]]
    assert (await platform.command({"command": "list_listeners"}))["listeners"] == []
    events = await platform.command({"command": "list_session_events", "session_id": sid})
    assert [e["id"] for e in events["events"]] == [1, 2, 3], "nothing written"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"listener": {"name": "x"}}, "listener"),
        (
            {"listener": {**body().model_dump(mode="json", exclude_unset=True), "batch": {"window_seconds": -1}}},
            "listener.batch.window_seconds",
        ),
        ({"after": -1}, "after"),
        ({"run_seconds": "1"}, "run_seconds"),
    ],
)
async def test_bad_input_names_its_field(platform: Platform, change: dict[str, Any], field: str) -> None:
    sid = (await platform.command({"command": "open_session"}))["session"]["id"]
    request = {"command": "simulate_listener", "session_id": sid, "listener": body().model_dump(mode="json"), **change}
    reply = await platform.command(request)
    assert reply["status"] == "error" and reply["error"] == "invalid_request", reply
    assert reply["message"].startswith(field), reply


async def test_an_unknown_session_is_not_found(platform: Platform) -> None:
    listener = body().model_dump(mode="json", exclude_unset=True)
    reply = await platform.command({"command": "simulate_listener", "session_id": "ses_nope", "listener": listener})
    assert reply["error"] == "not_found", reply
