"""distinct_by, as a batch's cut applies it: the newest event per value is kept, events without the value are all
kept, and every event the batch passed is consumed."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.core.test_batch_cuts import cut


def distinct_newest(events: list[dict[str, Any]], path: str) -> list[dict[str, Any]]:
    """The entries of one batch that takes every event (no `max_events` in the way), ordered by id."""
    taken = cut(sorted(events, key=lambda e: int(e["id"])), 10_000, path)
    assert taken is not None
    assert taken.consumed == sorted(int(e["id"]) for e in events), "every event passed is consumed"
    return taken.entries


def _event(event_id: int, alias: str | None) -> dict[str, Any]:
    envelope: dict[str, Any] = {"id": event_id, "type": "object.written"}
    if alias is not None:
        envelope["alias"] = alias
    return envelope


def test_two_hundred_writes_to_one_alias_are_one_entry() -> None:
    events = [_event(i, "cells/1") for i in range(1, 201)] + [_event(201, "cells/2")]
    assert [e["id"] for e in distinct_newest(events, "alias")] == [200, 201]


def test_events_without_the_path_are_each_kept() -> None:
    events = [_event(1, None), _event(2, "a"), _event(3, None), _event(4, "a")]
    assert [e["id"] for e in distinct_newest(events, "alias")] == [1, 3, 4]


def test_values_are_compared_as_json() -> None:
    events: list[dict[str, Any]] = [
        {"id": 1, "k": 1},
        {"id": 2, "k": "1"},
        {"id": 3, "k": {"a": 1, "b": 2}},
        {"id": 4, "k": {"b": 2, "a": 1}},
    ]
    assert [e["id"] for e in distinct_newest(events, "k")] == [1, 2, 4]


@given(
    st.lists(
        st.tuples(st.integers(min_value=1, max_value=10_000), st.sampled_from(["a", "b", "c", None])),
        unique_by=lambda pair: pair[0],
        min_size=1,
        max_size=40,
    ),
)
def test_distinct_keeps_the_newest_per_key(pairs: list[tuple[int, str | None]]) -> None:
    events = [_event(event_id, alias) for event_id, alias in pairs]
    kept = distinct_newest(events, "alias")
    ids = [e["id"] for e in kept]
    assert ids == sorted(ids)
    for alias in ("a", "b", "c"):
        with_alias = [e["id"] for e in events if e.get("alias") == alias]
        assert [e["id"] for e in kept if e.get("alias") == alias] == ([max(with_alias)] if with_alias else [])
    loose = [e["id"] for e in events if "alias" not in e]
    assert sorted(e["id"] for e in kept if "alias" not in e) == sorted(loose)
