"""Batch cuts: max_events, distinct_by and the byte budget; a prefix taken, nothing lost or doubled."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.core import batch_cuts
from orchestrator.core.batch_cuts import BATCH_BYTES, envelope_bytes
from orchestrator.core.distinct import distinct_value


@dataclass(frozen=True)
class Weighed:
    """An envelope as a store hands it to the cut: its id, its size, its `distinct_by` value."""

    envelope: dict[str, Any]
    id: int
    size: int
    distinct: str | None


@dataclass(frozen=True)
class Envelopes:
    entries: list[dict[str, Any]]
    consumed: list[int]
    through: int


def cut(
    envelopes: list[dict[str, Any]], max_events: int, distinct_by: str | None, max_bytes: int = BATCH_BYTES
) -> Envelopes | None:
    """The cut over envelopes, weighed as the in-memory store weighs them."""
    weighed = [
        Weighed(e, int(e["id"]), envelope_bytes(e), None if distinct_by is None else distinct_value(e, distinct_by))
        for e in envelopes
    ]
    found = batch_cuts.cut(weighed, max_events, distinct_by is not None, max_bytes)
    return None if found is None else Envelopes([w.envelope for w in found.entries], found.consumed, found.through)


def _event(event_id: int, alias: str = "a") -> dict[str, Any]:
    return {"id": event_id, "type": "object.written", "alias": alias}


def _ids(envelopes: list[dict[str, Any]]) -> list[int]:
    return [int(e["id"]) for e in envelopes]


def test_nothing_waiting_is_no_batch() -> None:
    assert cut([], 10, None) is None


def test_max_events_takes_the_oldest_and_leaves_the_rest() -> None:
    batch = cut([_event(i) for i in range(1, 6)], 2, None)
    assert batch is not None
    assert _ids(batch.entries) == [1, 2] and batch.consumed == [1, 2] and batch.through == 2


def test_distinct_by_keeps_the_newest_and_consumes_the_rest() -> None:
    events = [_event(1, "x"), _event(2, "y"), _event(3, "x"), _event(4, "z"), _event(5, "y"), _event(6, "x")]
    batch = cut(events, 2, "alias")
    assert batch is not None
    # z (id 4) would be a third entry: the batch stops there, and 5 and 6 wait behind it.
    assert _ids(batch.entries) == [2, 3] and batch.consumed == [1, 2, 3]


def test_a_batch_stops_before_its_events_pass_max_bytes_but_always_takes_one() -> None:
    big = [{**_event(n), "value": "x" * 300} for n in range(1, 6)]
    size = envelope_bytes(big[0])
    batch = cut(big, 100, None, max_bytes=2 * size + 10)
    assert batch is not None and batch.consumed == [1, 2]
    alone = cut(big[2:], 100, None, max_bytes=1)
    assert alone is not None and _ids(alone.entries) == [3], "an event bigger than the budget still goes, alone"


def test_a_newer_distinct_entry_is_weighed_in_place_of_the_one_it_replaces() -> None:
    events = [{**_event(1, "x"), "v": "a" * 100}, {**_event(2, "x"), "v": "b" * 100}, _event(3, "y")]
    budget = envelope_bytes(events[1]) + envelope_bytes(events[2])
    batch = cut(events, 10, "alias", max_bytes=budget)
    assert batch is not None
    assert (_ids(batch.entries), batch.consumed) == ([2, 3], [1, 2, 3])


def test_distinct_by_keeps_events_without_the_value_apart() -> None:
    batch = cut([{"id": 1, "type": "t"}, {"id": 2, "type": "t"}, _event(3)], 10, "alias")
    assert batch is not None and _ids(batch.entries) == [1, 2, 3]


@settings(max_examples=300)
@given(
    aliases=st.lists(st.sampled_from(["a", "b", "c"]), max_size=60),
    max_events=st.integers(1, 4),
    distinct_by=st.sampled_from([None, "alias"]),
    max_bytes=st.sampled_from([BATCH_BYTES, 120, 250]),
)
def test_cutting_until_nothing_waits_takes_every_event_once_in_order(
    aliases: list[str], max_events: int, distinct_by: str | None, max_bytes: int
) -> None:
    waiting = [_event(n + 1, alias) for n, alias in enumerate(aliases)]
    taken: list[int] = []
    while (batch := cut(waiting, max_events, distinct_by, max_bytes)) is not None:
        assert 1 <= len(batch.entries) <= max_events
        assert len(batch.entries) == 1 or sum(envelope_bytes(e) for e in batch.entries) <= max_bytes
        assert batch.consumed == _ids(waiting[: len(batch.consumed)]), "a batch takes a prefix"
        assert set(_ids(batch.entries)) <= set(batch.consumed)
        if distinct_by is not None:
            values = [e[distinct_by] for e in batch.entries]
            assert len(values) == len(set(values))
            for entry in batch.entries:
                same = [e for e in waiting[: len(batch.consumed)] if e[distinct_by] == entry[distinct_by]]
                assert entry["id"] == max(_ids(same)), "distinct_by keeps the newest"
        taken += batch.consumed
        waiting = waiting[len(batch.consumed) :]
    assert taken == list(range(1, len(aliases) + 1))


@settings(max_examples=300)
@given(
    sizes=st.lists(st.integers(0, 40), min_size=1, max_size=30),
    max_events=st.integers(1, 30),
    max_bytes=st.integers(1, 800),
)
def test_without_distinct_by_a_batch_is_the_longest_prefix_that_fits(
    sizes: list[int], max_events: int, max_bytes: int
) -> None:
    waiting = [{**_event(n + 1), "pad": "é" * size} for n, size in enumerate(sizes)]
    batch = cut(waiting, max_events, None, max_bytes)
    assert batch is not None
    longest = 1
    for n in range(2, min(max_events, len(waiting)) + 1):
        if sum(envelope_bytes(e) for e in waiting[:n]) <= max_bytes:
            longest = n
    assert batch.consumed == _ids(waiting[:longest])
    assert batch.entries == waiting[:longest]
