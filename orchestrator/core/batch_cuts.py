"""The cut of a batch from a lane's waiting events: `max_events`, `distinct_by` and a byte budget.

Owns what one batch takes from the events a lane has waiting (read from the store in id order, by reference:
ids, sizes and `distinct_by` values, never envelopes); when a batch is due is the lane clock's
(`lane_clock.py`), and the store keeps what is taken (`fired_through`). A batch takes a prefix of the waiting
events, so what it leaves is exactly the events after its last one. The byte budget keeps a batch that travels
whole (a template that names `batch.events`) within Temporal's payload limits, where Temporal stops at 2 MB and
warns at 512 KiB. A batch always takes its first entry, and one event is at most 256 KiB (the write limit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import msgspec

BATCH_BYTES = 512 * 1024


class Weighed(Protocol):
    """A waiting event as the cut sees it."""

    @property
    def id(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def distinct(self) -> str | None: ...


W = TypeVar("W", bound=Weighed)


@dataclass(frozen=True)
class Cut(Generic[W]):
    """A batch: its entries (ascending id) and every event it consumed (superseded ones too, ascending)."""

    entries: list[W]
    consumed: list[int]

    @property
    def through(self) -> int:
        return self.consumed[-1]


# Compact UTF-8, as a run's input travels; a value JSON has no form for is weighed as its text.
_COMPACT = msgspec.json.Encoder(enc_hook=str)


def envelope_bytes(envelope: dict[str, Any]) -> int:
    """An event's size in bytes as compact JSON (what the in-memory store weighs an event by)."""
    return len(_COMPACT.encode(envelope))


def cut(waiting: Sequence[W], max_events: int, distinct: bool, max_bytes: int = BATCH_BYTES) -> Cut[W] | None:
    """The next batch from `waiting` (ascending id), or None when nothing waits.

    With `distinct` (the listener declares `distinct_by`), a later event whose value is already in the batch
    replaces that entry (the earlier one is consumed with it); an event with no value is kept on its own. The
    batch stops at the first event that would be a new entry beyond `max_events`, or that would take its
    entries past `max_bytes`; it and everything after it stay waiting.
    """
    if not distinct and waiting:
        prefix = waiting[:max_events]
        if sum(q.size for q in prefix) <= max_bytes:
            # The common case: the first `max_events` fit the budget whole, and nothing replaces anything.
            return Cut(list(prefix), [q.id for q in prefix])
    entries: dict[str, W] = {}
    total = 0
    consumed: list[int] = []
    for queued in waiting:
        value = queued.distinct if distinct else None
        # An entry with no distinct value is keyed by its id, which no value can equal.
        key = value if value is not None else f"#{queued.id}"
        replaced = entries.get(key) if value is not None else None
        if replaced is None and len(entries) >= max_events:
            break
        freed = replaced.size if replaced is not None else 0
        if entries and total - freed + queued.size > max_bytes:
            break
        total += queued.size - freed
        entries[key] = queued
        consumed.append(queued.id)
    if not consumed:
        return None
    return Cut(sorted(entries.values(), key=lambda q: q.id), consumed)


@dataclass(frozen=True)
class Grouped:
    """An event as a redelivery cuts it: its id and `distinct_by` value only (no byte budget: a replay is taken
    whole)."""

    id: int
    distinct: str | None
    size: int = 0


def cut_all(events: Sequence[W], max_events: int, distinct: bool, max_bytes: int = BATCH_BYTES) -> list[list[int]]:
    """Every event of `events` (ascending id) in batches as a lane would cut them one after another: each
    batch's consumed ids, at most `max_events` entries each."""
    batches: list[list[int]] = []
    rest = list(events)
    while (taken := cut(rest, max_events, distinct, max_bytes)) is not None:
        batches.append(taken.consumed)
        rest = rest[len(taken.consumed) :]
    return batches
