"""A listener's own throttle in the pure core: the rule a key lets batches go by, and what the lane step does when
it holds a lane (waits, says until when, takes what it lets go, gives a key slot back)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.declaration import ListenerDeclaration, ThrottleSpec
from orchestrator.core.lane_snapshot import (
    LaneAddress,
    LaneSnapshot,
    ListenerNow,
    Queued,
    Take,
    Wait,
)
from orchestrator.core.lane_step import next_move, step
from orchestrator.core.limits import Limits
from orchestrator.core.throttles import UNKEYED, free_at, free_prefix, held_until, started, throttle_key

LIMITS = Limits()


def throttle(runs: int, per_seconds: float, key: str | None = None) -> ThrottleSpec:
    return ThrottleSpec(per_seconds=per_seconds, runs=runs, key=key)


def test_a_key_lets_a_batch_go_until_it_has_started_runs_then_once_the_oldest_of_them_is_a_window_old() -> None:
    rule = throttle(2, 60)
    assert free_at([], rule) is None
    assert free_at([10.0], rule) is None
    assert free_at([10.0, 20.0], rule) == 70.0
    # Only the newest `runs` decide: an older start never holds a key longer.
    assert free_at([0.0, 10.0, 20.0], rule) == 70.0
    assert started([10.0, 20.0], 30.0, 2) == [20.0, 30.0]
    assert started([10.0], 30.0, 3) == [10.0, 30.0]


@given(
    runs=st.integers(1, 4),
    per_seconds=st.sampled_from([1.0, 2.5, 10.0]),
    gaps=st.lists(st.floats(0.0, 5.0, allow_nan=False), min_size=1, max_size=40),
)
def test_batches_go_as_soon_as_the_rule_lets_them_and_never_more_than_runs_in_a_window(
    runs: int, per_seconds: float, gaps: list[float]
) -> None:
    """Batches of one key come due one after another; each starts when it is due, after the one before, and once
    the key lets it go. No window of `per_seconds` holds more than `runs` starts, a batch waits past its turn only
    when `runs` starts are inside the window before it, and goes as soon as one fewer is."""
    rule = throttle(runs, per_seconds)
    kept: list[float] = []
    starts: list[float] = []
    due = 0.0
    for gap in gaps:
        due += gap
        turn = max(due, starts[-1] if starts else due)
        at = free_at(kept, rule)
        start = turn if at is None else max(turn, at)
        if start > turn:
            # A start is inside the window before `at` while it is not yet `per_seconds` old: `t + per_seconds > at`,
            # the rule's own sum (no difference of floats).
            assert sum(1 for t in starts if t + per_seconds > start) < runs, "it went as soon as it could"
            assert sum(1 for t in starts if t + per_seconds > turn) >= runs, "it waited only if held"
        kept, starts = started(kept, start, runs), [*starts, start]
    for n, first in enumerate(starts):
        assert sum(1 for t in starts[n:] if t < first + per_seconds) <= runs


def test_an_events_key_is_its_value_as_a_lane_key_is_made() -> None:
    keyed = throttle(1, 60, "data.customer")
    assert throttle_key(None, {"data": {"customer": "c1"}}) is None
    assert throttle_key(throttle(1, 60), {"data": {"customer": "c1"}}) == UNKEYED
    assert throttle_key(keyed, {"data": {"customer": "c1"}}) == "c1"
    assert throttle_key(keyed, {"data": {"customer": 7}}) == "7"
    assert throttle_key(keyed, {"data": {"customer": {"b": 1, "a": 2}}}) == '{"a":2,"b":1}'
    assert throttle_key(keyed, {"data": {}}) == "~"
    assert throttle_key(keyed, {"data": {"customer": None}}) == "~"
    assert throttle_key(throttle(1, 60, "object.alias"), {"alias": "tickets/1"}) == "tickets/1"


def test_what_a_batch_may_take_stops_at_the_first_event_whose_key_is_held() -> None:
    waiting = [Queued(n, float(n), throttle_key=k) for n, k in enumerate(["a", "b", "c", "b"], start=1)]
    free = {"a": 5.0, "c": 50.0}
    assert [q.id for q in free_prefix(waiting, free, 10.0)] == [1, 2]
    assert [q.id for q in free_prefix(waiting, free, 60.0)] == [1, 2, 3, 4]
    assert free_prefix(waiting, {"a": 20.0}, 10.0) == ()
    assert held_until(["a", "c", None], free, 10.0) == 50.0
    assert held_until(["a", "b"], free, 10.0) is None


# -- the lane step --------------------------------------------------------------------------------------------


def listener(**more: Any) -> ListenerNow:
    body: dict[str, Any] = {
        "name": "l",
        "filter": {"types": ["object.written"]},
        "batch": {"window_seconds": 0, "max_events": 10},
        "action": {"type": "workflow", "workflow": "w"},
        "throttle": {"per_seconds": 60, "runs": 1, "key": "alias"},
    }
    body.update(more)
    return ListenerNow(version=1, declaration=ListenerDeclaration.model_validate(body))


def lane(keys: list[str], free: dict[str, float], now: float = 100.0, **more: Any) -> LaneSnapshot:
    waiting = tuple(Queued(n, 90.0 + n, throttle_key=k) for n, k in enumerate(keys, start=1))
    fields: dict[str, Any] = {
        "address": LaneAddress("s", "l", "_", "lane:s:l:_"),
        "lane_id": 1,
        "seq": 0,
        "fired_through": 0,
        "now": now,
        "session_status": "open",
        "session_alias": None,
        "listener": listener(),
        "pending": len(waiting),
        "waiting": waiting,
        "oldest_at": waiting[0].committed if waiting else None,
        "newest_at": waiting[-1].committed if waiting else None,
        "throttle_head": keys[0] if keys else None,
        "throttle_free_at": free,
    }
    fields.update(more)
    return LaneSnapshot(**fields)


def test_a_lane_whose_oldest_event_is_held_waits_until_its_key_lets_it_go() -> None:
    snap = lane(["a", "b"], {"a": 130.0})
    decision = step(snap, snap.now, LIMITS)
    assert decision == Wait("throttled", 130.0)
    # Read without its events (a finish's answer), the lane knows the same from its oldest event's key.
    assert next_move(lane(["a"], {"a": 130.0}, waiting=(), pending=1), 100.0, LIMITS) == Wait("throttled", 130.0)


def test_a_batch_takes_what_the_throttle_lets_go_and_counts_under_each_of_its_keys() -> None:
    snap = lane(["a", "b", "a", "c", "d"], {"c": 130.0})
    decision = step(snap, snap.now, LIMITS)
    assert isinstance(decision, Take)
    assert decision.consumed == (1, 2, 3) and decision.throttle_keys == ("a", "b") and decision.counted
    later = step(snap, 130.0, LIMITS)
    assert isinstance(later, Take) and later.consumed == (1, 2, 3, 4, 5)


def test_a_window_that_closes_after_the_throttle_lets_go_is_what_the_lane_waits_for() -> None:
    windowed = listener(batch={"window_seconds": 60, "max_events": 10})
    snap = lane(["a"], {"a": 120.0}, listener=windowed)
    assert step(snap, snap.now, LIMITS) == Wait("window_open", 151.0)
    snap = lane(["a"], {"a": 160.0}, listener=windowed)
    assert step(snap, snap.now, LIMITS) == Wait("throttled", 160.0)


def test_a_keyed_lane_held_by_the_throttle_gives_its_key_slot_back_and_leaves_the_queue() -> None:
    keyed = listener(concurrency={"mode": "keyed", "key": "alias", "max_parallel": 1})
    held = step(lane(["a"], {"a": 130.0}, listener=keyed, key_slot="held", keys_held=1), 100.0, LIMITS)
    assert held == Wait("throttled", 130.0, give_back_key_slot=True)
    queued = step(lane(["a"], {"a": 130.0}, listener=keyed, key_slot="queued", keys_held=1), 100.0, LIMITS)
    assert queued == Wait("throttled", 130.0, give_back_key_slot=True)
    # Behind a taken key slot with its throttle free, it queues for a slot as before.
    free = step(lane(["a"], {}, listener=keyed, keys_held=1), 100.0, LIMITS)
    assert isinstance(free, Wait) and free.reason == "queued_for_key_slot" and free.queue_for_key_slot


def test_a_run_in_flight_is_waited_for_before_the_throttle() -> None:
    from orchestrator.core.lane_snapshot import HeldSlot, RunPlan

    run = HeldSlot("run:s:l:_:1", 1, "exe:s:l:_:1.0", 0, RunPlan("w", None, 0, 0.0, None, 1, 0, False))
    snap = lane(["a"], {"a": 130.0}, runs=(run,))
    decision = step(snap, snap.now, LIMITS)
    assert isinstance(decision, Wait) and decision.reason == "slot_held"


def test_a_throttle_without_a_key_holds_every_batch_of_the_listener() -> None:
    snap = lane([UNKEYED, UNKEYED], {UNKEYED: 110.0}, listener=listener(throttle={"per_seconds": 10, "runs": 3}))
    assert step(snap, snap.now, LIMITS) == Wait("throttled", 110.0)
    decision = step(snap, 110.0, LIMITS)
    assert isinstance(decision, Take) and decision.throttle_keys == (UNKEYED,)


def test_a_listener_without_a_throttle_counts_under_no_key() -> None:
    unthrottled = listener(throttle=None)
    decision = step(lane(["a"], {}, listener=unthrottled, throttle_head=None), 100.0, LIMITS)
    assert isinstance(decision, Take) and decision.counted and decision.throttle_keys == ()
