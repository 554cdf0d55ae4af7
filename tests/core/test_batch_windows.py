"""The lane buffer: windows, cuts, max_events, distinct_by, duplicates, requeues; nothing lost or doubled."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.core.batch_windows import (
    BATCH_BYTES,
    LaneBuffer,
    cut_batch,
    envelope_bytes,
    receive,
    regather,
    requeue,
    window_closes_at,
)


def _event(event_id: int, alias: str = "a") -> dict[str, Any]:
    return {"id": event_id, "type": "object.written", "alias": alias}


def _ids(envelopes: list[dict[str, Any]]) -> list[int]:
    return [int(e["id"]) for e in envelopes]


def test_the_first_event_opens_the_window_and_the_cut_waits_for_it_to_close() -> None:
    buf = receive(LaneBuffer(), [_event(1)], now=10.0)
    assert buf.window_opened_at == 10.0
    assert window_closes_at(buf, 2.0) == 12.0
    buf = receive(buf, [_event(2)], now=11.0)
    assert buf.window_opened_at == 10.0
    assert cut_batch(buf, 11.9, 2.0, 100, None) is None
    cut = cut_batch(buf, 12.0, 2.0, 100, None)
    assert cut is not None
    entries, consumed, after = cut
    assert _ids(entries) == [1, 2] and consumed == [1, 2]
    assert after.pending == [] and after.window_opened_at is None
    assert window_closes_at(after, 2.0) is None


def test_no_cut_without_pending_events() -> None:
    assert cut_batch(LaneBuffer(), 100.0, 0.0, 10, None) is None


def test_receive_does_not_change_the_buffer_it_was_given() -> None:
    buf = LaneBuffer()
    receive(buf, [_event(1)], now=0.0)
    assert buf == LaneBuffer()


def test_duplicates_and_old_ids_are_dropped_and_counted() -> None:
    buf = receive(LaneBuffer(), [_event(2), _event(1), _event(2)], now=0.0)
    assert _ids(buf.pending) == [1, 2] and buf.high_water == 2
    assert buf.received == 2 and buf.dropped_duplicates == 1
    cut = cut_batch(buf, 0.0, 0.0, 100, None)
    assert cut is not None
    buf = receive(cut[2], [_event(1), _event(2), _event(3)], now=1.0)
    assert _ids(buf.pending) == [3] and buf.dropped_duplicates == 3


def test_max_events_leaves_the_rest_due_at_once() -> None:
    buf = receive(LaneBuffer(), [_event(i) for i in range(1, 6)], now=0.0)
    cut = cut_batch(buf, 5.0, 5.0, 2, None)
    assert cut is not None
    entries, consumed, buf = cut
    assert _ids(entries) == [1, 2] and consumed == [1, 2]
    assert _ids(buf.pending) == [3, 4, 5]
    assert buf.window_opened_at == 0.0
    cut = cut_batch(buf, 5.0, 5.0, 2, None)
    assert cut is not None and _ids(cut[0]) == [3, 4]


def test_distinct_by_keeps_the_newest_and_consumes_the_rest() -> None:
    events = [_event(1, "x"), _event(2, "y"), _event(3, "x"), _event(4, "z"), _event(5, "y"), _event(6, "x")]
    buf = receive(LaneBuffer(), events, now=0.0)
    cut = cut_batch(buf, 0.0, 0.0, 2, "alias")
    assert cut is not None
    entries, consumed, buf = cut
    # z (id 4) would be a third entry: the batch stops there, and 5 and 6 wait behind it.
    assert _ids(entries) == [2, 3] and consumed == [1, 2, 3]
    assert _ids(buf.pending) == [4, 5, 6]


def test_a_held_batch_takes_in_what_arrived_while_it_waited() -> None:
    buf = receive(LaneBuffer(), [_event(1, "x"), _event(2, "x"), _event(3, "y")], now=0.0)
    cut = cut_batch(buf, 1.0, 1.0, 3, "alias")
    assert cut is not None
    held, held_ids, buf = cut
    assert _ids(held) == [2, 3] and held_ids == [1, 2, 3]
    # While it waits for a key slot: a newer x, two new values, then more than max_events allows.
    buf = receive(buf, [_event(4, "x"), _event(5, "z"), _event(6, "w"), _event(7, "v")], now=1.5)
    entries, consumed, after = regather(held, held_ids, buf, 2.0, 3, "alias")
    assert _ids(entries) == [3, 4, 5], "x's newest entry replaces the held one; z fills the batch"
    assert consumed == [1, 2, 3, 4, 5], "the superseded events stay consumed, and the first id is the held one"
    assert _ids(after.pending) == [6, 7]
    assert after.window_opened_at == 1.5, "what is left keeps the window it opened"


def test_regather_with_nothing_new_fires_the_held_batch_as_it_was() -> None:
    buf = receive(LaneBuffer(), [_event(1), _event(2)], now=0.0)
    cut = cut_batch(buf, 0.0, 0.0, 10, None)
    assert cut is not None
    held, held_ids, buf = cut
    entries, consumed, after = regather(held, held_ids, buf, 9.0, 10, None)
    assert (_ids(entries), consumed) == ([1, 2], [1, 2])
    assert after.pending == [] and after.window_opened_at is None


def test_a_batch_stops_before_its_events_pass_max_bytes_but_always_takes_one() -> None:
    big = [{**_event(n), "value": "x" * 300} for n in range(1, 6)]
    size = envelope_bytes(big[0])
    buf = receive(LaneBuffer(), big, now=0.0)
    cut = cut_batch(buf, 0.0, 0.0, 100, None, max_bytes=2 * size + 10)
    assert cut is not None
    entries, consumed, buf = cut
    assert (_ids(entries), consumed) == ([1, 2], [1, 2])
    assert buf.window_opened_at == 0.0, "what a full batch left behind is due at once"
    cut = cut_batch(buf, 0.0, 0.0, 100, None, max_bytes=1)
    assert cut is not None and _ids(cut[0]) == [3], "an event bigger than the budget still goes, alone"


def test_a_newer_distinct_entry_is_weighed_in_place_of_the_one_it_replaces() -> None:
    events = [{**_event(1, "x"), "v": "a" * 100}, {**_event(2, "x"), "v": "b" * 100}, _event(3, "y")]
    budget = envelope_bytes(events[1]) + envelope_bytes(events[2])
    cut = cut_batch(receive(LaneBuffer(), events, now=0.0), 0.0, 0.0, 10, "alias", max_bytes=budget)
    assert cut is not None
    assert (_ids(cut[0]), cut[1]) == ([2, 3], [1, 2, 3])


def test_distinct_by_keeps_events_without_the_value_apart() -> None:
    buf = receive(LaneBuffer(), [{"id": 1, "type": "t"}, {"id": 2, "type": "t"}, _event(3)], now=0.0)
    cut = cut_batch(buf, 0.0, 0.0, 10, "alias")
    assert cut is not None and _ids(cut[0]) == [1, 2, 3]


def test_requeue_ignores_high_water_and_leaves_it_alone() -> None:
    buf = receive(LaneBuffer(), [_event(5)], now=0.0)
    cut = cut_batch(buf, 0.0, 0.0, 10, None)
    assert cut is not None
    entries, _, buf = cut
    buf = requeue(buf, [*entries, *entries], now=30.0)
    assert _ids(buf.pending) == [5] and buf.high_water == 5 and buf.window_opened_at == 30.0
    buf = requeue(buf, [_event(9)], now=31.0)
    assert buf.high_water == 5
    # The router's event 7 still gets in although a requeued 9 is pending.
    buf = receive(buf, [_event(7)], now=32.0)
    assert _ids(buf.pending) == [5, 7, 9] and buf.window_opened_at == 30.0


def test_the_buffer_survives_a_json_round_trip() -> None:
    buf = receive(LaneBuffer(), [_event(1), _event(2)], now=3.5)
    assert LaneBuffer.model_validate_json(buf.model_dump_json()) == buf


_steps = st.lists(
    st.one_of(
        st.tuples(st.just("receive"), st.integers(0, 5), st.integers(0, 3)),
        st.tuples(st.just("cut"), st.integers(0, 3), st.just(0)),
        # A cut batch held back (waiting for a key slot), or a held one held again after taking in more.
        st.tuples(st.just("hold"), st.integers(0, 3), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=300)
@given(
    steps=_steps,
    window=st.sampled_from([0.0, 1.0, 2.5]),
    max_events=st.integers(1, 4),
    distinct_by=st.sampled_from([None, "alias"]),
    max_bytes=st.sampled_from([BATCH_BYTES, 120, 250]),
    aliases=st.lists(st.sampled_from(["a", "b", "c"]), min_size=200, max_size=200),
    seed=st.randoms(use_true_random=False),
)
def test_the_batcher_never_loses_or_duplicates_an_event(
    steps: list[tuple[str, int, int]],
    window: float,
    max_events: int,
    distinct_by: str | None,
    max_bytes: int,
    aliases: list[str],
    seed: Any,
) -> None:
    buf = LaneBuffer()
    now = 0.0
    delivered: list[dict[str, Any]] = []
    consumed_all: list[int] = []

    def take(cut: tuple[list[dict[str, Any]], list[int], LaneBuffer]) -> LaneBuffer:
        entries, consumed, after = cut
        assert 1 <= len(entries) <= max_events
        assert len(entries) == 1 or sum(envelope_bytes(e) for e in entries) <= max_bytes
        assert set(_ids(entries)) <= set(consumed)
        assert consumed == sorted(consumed)
        if distinct_by is not None:
            values = [e[distinct_by] for e in entries]
            assert len(values) == len(set(values))
            for entry in entries:
                same = [e for e in delivered if e["id"] in consumed and e[distinct_by] == entry[distinct_by]]
                assert entry["id"] == max(_ids(same))
        consumed_all.extend(consumed)
        return after

    held: tuple[list[dict[str, Any]], list[int]] | None = None
    for kind, count, repeats in steps:
        now += 0.5
        if kind == "receive":
            fresh = [_event(len(delivered) + i + 1, aliases[len(delivered) + i]) for i in range(count)]
            delivered.extend(fresh)
            again = [seed.choice(delivered) for _ in range(repeats)] if delivered else []
            buf = receive(buf, [*again, *fresh, *again], now)
            continue
        now += count
        if held is not None:
            cut = regather(*held, buf, now, max_events, distinct_by, max_bytes)
            assert min(cut[1]) == min(held[1]), "a held batch keeps its first id, and so its run key"
            held = None
        else:
            cut = cut_batch(buf, now, window, max_events, distinct_by, max_bytes)
        if cut is None:
            continue
        if kind == "hold":
            held, buf = (cut[0], cut[1]), cut[2]
        else:
            buf = take(cut)
    if held is not None:
        buf = take(regather(*held, buf, now, max_events, distinct_by, max_bytes))
    while buf.pending:
        now += window
        cut = cut_batch(buf, now, window, max_events, distinct_by, max_bytes)
        assert cut is not None
        buf = take(cut)

    assert sorted(consumed_all) == _ids(delivered)
    assert buf.received == len(delivered)
    assert buf.window_opened_at is None
