"""How often the router signals a lane, and what it holds back between two signals."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.pacing import (
    BLOCKED_AFTER_SECONDS,
    BLOCKED_HOLD_SECONDS,
    PACE_CAP_SECONDS,
    PACE_MARGIN_SECONDS,
    Pacing,
    first_held_id,
    lane_pace,
    next_due,
    pace,
    unfired,
)
from orchestrator.core.routing import LaneDelivery


def body(window: float, version: int = 1) -> dict[str, Any]:
    return {"name": "l", "batch": {"window_seconds": window}, "version_tag": version}


def delivery(ids: list[int], lane: str = "_", window: float = 1.0, version: int = 1) -> LaneDelivery:
    return LaneDelivery("l", lane, version, body(window, version), [{"id": i} for i in ids], {i: f"tp{i}" for i in ids})


def test_a_lane_is_paced_by_its_window_less_a_margin_and_at_most_the_cap() -> None:
    assert lane_pace(body(1.0)) == 1.0 - PACE_MARGIN_SECONDS
    assert lane_pace(body(0)) == 0
    assert lane_pace(body(PACE_MARGIN_SECONDS)) == 0
    assert lane_pace(body(60)) == PACE_CAP_SECONDS
    assert lane_pace({"name": "no batch"}) == 0


def test_the_first_events_go_at_once_and_later_ones_wait_for_the_pace() -> None:
    due, pacing = pace(Pacing(), [delivery([1, 2])], now=10.0)
    assert [d.delivery.events for d in due] == [[{"id": 1}, {"id": 2}]]
    assert due[0].held_seconds == 0
    assert first_held_id(pacing) is None

    due, pacing = pace(pacing, [delivery([3])], now=10.2)
    assert due == []
    assert first_held_id(pacing) == 3
    assert next_due(pacing, 10.2) == 10.0 + lane_pace(body(1.0))

    due, pacing = pace(pacing, [delivery([4, 5])], now=10.5)
    assert due == []

    due, pacing = pace(pacing, [], now=10.0 + lane_pace(body(1.0)))
    assert [e["id"] for e in due[0].delivery.events] == [3, 4, 5]
    assert due[0].delivery.traces == {3: "tp3", 4: "tp4", 5: "tp5"}
    assert abs(due[0].held_seconds - (lane_pace(body(1.0)) - 0.2)) < 1e-9, "since the oldest was held"
    assert first_held_id(pacing) is None
    assert next_due(pacing, 10.0 + lane_pace(body(1.0))) is None


def test_held_events_go_with_the_newest_listener_version_seen() -> None:
    _, pacing = pace(Pacing(), [delivery([1])], now=0.0)
    _, pacing = pace(pacing, [delivery([2], version=3)], now=0.1)
    due, _ = pace(pacing, [delivery([4], version=2)], now=5.0, fired={("l", "_"): 1})
    assert due[0].delivery.version == 3
    assert due[0].delivery.body["version_tag"] == 3


def test_a_lane_without_a_window_is_never_held_and_lanes_are_paced_apart() -> None:
    due, pacing = pace(Pacing(), [delivery([1], window=0), delivery([2], lane="a")], now=0.0)
    assert len(due) == 2
    due, pacing = pace(pacing, [delivery([3], window=0), delivery([4], lane="a"), delivery([5], lane="b")], now=0.1)
    assert sorted(d.delivery.lane for d in due) == ["_", "b"], "lane a waits, the others do not"
    assert first_held_id(pacing) == 4


def test_pacing_stops_once_the_window_is_over_so_the_lane_has_everything_when_its_slot_frees() -> None:
    _, pacing = pace(Pacing(), [delivery([1])], now=0.0)
    due, pacing = pace(pacing, [delivery([2])], now=0.5)
    assert due == [], "the window (opened at 0.0) is open: paced"
    due, pacing = pace(pacing, [], now=0.8)
    assert len(due) == 1
    due, pacing = pace(pacing, [delivery([3])], now=1.1)
    assert [e["id"] for e in due[0].delivery.events] == [3], "the window is over: at once"


def test_held_events_never_wait_past_the_window_they_arrived_in() -> None:
    window = 2.0
    closes_less_margin = window - PACE_MARGIN_SECONDS
    _, pacing = pace(Pacing(), [delivery([1], window=window)], now=0.0)
    due, pacing = pace(pacing, [delivery([2], window=window)], now=0.2)
    assert due == []
    assert next_due(pacing, 0.2) == min(lane_pace(body(window)), closes_less_margin)
    due, pacing = pace(pacing, [], now=closes_less_margin)
    assert [e["id"] for e in due[0].delivery.events] == [2]
    # The lane's next signal would wait a whole pace (to 3.5 s), past the window (opened at 0.0, closing at
    # 2.0) that should take this event: it goes at once instead.
    due, _ = pace(pacing, [delivery([3], window=window)], now=closes_less_margin + 0.01)
    assert [e["id"] for e in due[0].delivery.events] == [3]


def test_a_lane_whose_window_closed_unfired_holds_new_events_until_it_fires() -> None:
    lane = ("l", "_")
    due, pacing = pace(Pacing(), [delivery([1, 2])], now=0.0)
    assert unfired(pacing)
    blocked_at = 1.0 + BLOCKED_AFTER_SECONDS  # its window (1 s) closed a while ago: its slot is taken
    due, pacing = pace(pacing, [delivery([3])], now=blocked_at - 0.1, fired={lane: 0})
    assert [e["id"] for e in due[0].delivery.events] == [3], "not blocked yet: only paced"
    due, pacing = pace(pacing, [delivery([4])], now=blocked_at, fired={lane: 0})
    assert due == []
    due, pacing = pace(pacing, [delivery([5])], now=blocked_at + 1.5, fired={lane: 0})
    assert due == [], "paced or not, a blocked lane waits"
    due, pacing = pace(pacing, [], now=blocked_at + 1.6, fired={lane: 3})
    assert [e["id"] for e in due[0].delivery.events] == [4, 5], "fired: what waited goes at once"
    assert abs(due[0].held_seconds - 1.6) < 1e-9
    assert pacing.sent_through[lane] == 5


def test_a_lane_in_its_window_is_not_blocked_and_a_blocked_one_waits_at_most_the_hold() -> None:
    lane = ("l", "_")
    _, pacing = pace(Pacing(), [delivery([1])], now=0.0)
    due, pacing = pace(pacing, [delivery([2])], now=0.8, fired={lane: 0})
    assert [e["id"] for e in due[0].delivery.events] == [2], "window still open: paced, not blocked"
    blocked_at = 1.0 + BLOCKED_AFTER_SECONDS
    due, pacing = pace(pacing, [delivery([3])], now=blocked_at, fired={lane: 0})
    assert due == []
    assert next_due(pacing, blocked_at) == blocked_at + BLOCKED_HOLD_SECONDS, "blocked: the hold's end, or a fire"
    due, pacing = pace(pacing, [], now=blocked_at + BLOCKED_HOLD_SECONDS, fired={lane: 0})
    assert [e["id"] for e in due[0].delivery.events] == [3]
    assert next_due(pacing, blocked_at + BLOCKED_HOLD_SECONDS) is None


def test_a_lane_that_fired_only_part_of_what_it_got_stays_blocked() -> None:
    lane = ("l", "_")
    _, pacing = pace(Pacing(), [delivery([1, 2, 3])], now=0.0)
    blocked_at = 1.0 + BLOCKED_AFTER_SECONDS
    due, pacing = pace(pacing, [delivery([4])], now=blocked_at, fired={lane: 2})
    assert due == []
    due, pacing = pace(pacing, [], now=blocked_at + 0.1, fired={lane: 3})
    assert [e["id"] for e in due[0].delivery.events] == [4]


rounds = st.lists(
    st.tuples(
        st.floats(min_value=0.0, max_value=1.5),  # time since the previous round
        st.lists(st.sampled_from(["a", "b", "c"]), max_size=6),  # the lanes of this round's events, in id order
        st.none() | st.integers(min_value=0, max_value=40),  # how far every lane has fired, if looked up
    ),
    max_size=25,
)


@given(rounds)
def test_every_event_goes_out_once_in_order_and_the_position_never_passes_a_held_one(
    plan: list[tuple[float, list[str], int | None]],
) -> None:
    pacing, now, next_id = Pacing(), 0.0, 1
    sent: dict[str, list[int]] = {"a": [], "b": [], "c": []}
    routed: dict[str, list[int]] = {"a": [], "b": [], "c": []}
    for gap, lanes, fired in plan:
        now += gap
        deliveries: dict[str, LaneDelivery] = {}
        for lane in lanes:
            deliveries.setdefault(lane, delivery([], lane=lane)).events.append({"id": next_id})
            routed[lane].append(next_id)
            next_id += 1
        through = None if fired is None else {("l", lane): fired for lane in "abc"}
        due, pacing = pace(pacing, list(deliveries.values()), now, through)
        for signal in due:
            assert signal.held_seconds >= 0
            sent[signal.delivery.lane].extend(e["id"] for e in signal.delivery.events)
        held = first_held_id(pacing)
        everything_sent_below = [i for ids in routed.values() for i in ids if held is None or i < held]
        assert all(i in sent[lane] for lane, ids in routed.items() for i in ids if i in everything_sent_below)
    due, pacing = pace(pacing, [], now + max(PACE_CAP_SECONDS, BLOCKED_HOLD_SECONDS))
    for signal in due:
        sent[signal.delivery.lane].extend(e["id"] for e in signal.delivery.events)
    assert sent == routed, "each event once, in id order, once the longest hold has passed"
    assert first_held_id(pacing) is None
