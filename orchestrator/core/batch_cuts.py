"""The cut of a batch from a lane's waiting events: `max_events`, `distinct_by` and a byte budget.

Owns what one batch takes from the events a lane has waiting (read from the store in id order by the fire
activity); when a batch is due is the lane clock's (`lane_clock.py`), and the store keeps what is taken
(`fired_through`). A batch takes a prefix of the waiting events, so what it leaves is exactly the events
after its last one. The byte budget keeps a batch within Temporal's payload limits: a batch travels whole in
the run's input, where Temporal stops at 2 MB and warns at 512 KiB, and `messages` beside `events` doubles
it. A batch always takes its first entry, and one event is at most 256 KiB (the write limit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from orchestrator.core.distinct import distinct_value

BATCH_BYTES = 512 * 1024


@dataclass(frozen=True)
class Cut:
    """A batch: its entries (ascending id) and every event it consumed (superseded ones too, ascending)."""

    entries: list[dict[str, Any]]
    consumed: list[int]

    @property
    def through(self) -> int:
        return self.consumed[-1]


# Compact UTF-8, as the run's input travels; a value JSON has no form for is weighed as its text. msgspec
# encodes a thousand envelopes in a fifth of the time `json` takes.
_COMPACT = msgspec.json.Encoder(enc_hook=str)


def envelope_bytes(envelope: dict[str, Any]) -> int:
    """An event's size in bytes as compact JSON, what it weighs in a batch."""
    return len(_COMPACT.encode(envelope))


def _prefix_bytes(envelopes: Sequence[dict[str, Any]]) -> int:
    """The sizes of `envelopes` summed, from one encoding of them all: `[a,b,...]` less its brackets and
    commas (a thousand encodings of one event each cost several times one of the list)."""
    return len(_COMPACT.encode(list(envelopes))) - 1 - max(len(envelopes), 1)


def cut(
    waiting: Sequence[dict[str, Any]], max_events: int, distinct_by: str | None, max_bytes: int = BATCH_BYTES
) -> Cut | None:
    """The next batch from `waiting` (ascending id), or None when nothing waits.

    With `distinct_by`, a later event whose value is already in the batch replaces that entry (the earlier
    one is consumed with it). The batch stops at the first event that would be a new entry beyond
    `max_events`, or that would take its entries past `max_bytes`; it and everything after it stay waiting.
    """
    if distinct_by is None and waiting:
        prefix = waiting[:max_events]
        if _prefix_bytes(prefix) <= max_bytes:
            # The common case: the first `max_events` fit the budget whole, and nothing replaces anything.
            return Cut(list(prefix), [int(e["id"]) for e in prefix])
    entries: dict[str, dict[str, Any]] = {}
    sizes: dict[str, int] = {}
    total = 0
    consumed: list[int] = []
    for envelope in waiting:
        value = distinct_value(envelope, distinct_by) if distinct_by is not None else None
        # An entry with no distinct value is keyed by its id, which no value can equal.
        key = value if value is not None else f"#{envelope['id']}"
        replaces = value is not None and value in entries
        if not replaces and len(entries) >= max_events:
            break
        size = envelope_bytes(envelope)
        if entries and total - sizes.get(key, 0) + size > max_bytes:
            break
        total += size - sizes.get(key, 0)
        entries[key], sizes[key] = envelope, size
        consumed.append(int(envelope["id"]))
    if not consumed:
        return None
    return Cut(sorted(entries.values(), key=lambda e: int(e["id"])), consumed)
