"""A lane's buffer of waiting events and the cutting of batches from it.

Owns the reducer the lane workflow's signal handlers call (`receive`, `requeue`) and the cut its `run()`
calls when a window closes and a slot is free; timers, slots and continue-as-new are the lane's. The
buffer is one pydantic value, so continue-as-new hands it over whole. Every function is pure: it returns
a new buffer and never changes the one it was given, so a handler that fails halfway leaves no trace.

The router delivers a session's events in id order, possibly more than once, so an id at or below
`high_water` is a duplicate and is dropped. Events the lane puts back itself (a retry, an idle event) go
through `requeue`, which bypasses that rule and leaves `high_water` alone: raising it there could drop
router events not yet delivered. The window is open exactly while events are pending. After a cut that
leaves events behind, the window keeps its original opening time: those events already waited a full
window, so the next batch is due as soon as a slot is free rather than one more window later.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from orchestrator.core.distinct import distinct_value

# The most bytes of events (as JSON) one batch carries. A batch travels whole through Temporal (the fire
# activity's input, then the run's and the application workflow's), whose payloads stop at 2 MB and warn at
# 512 KiB; with `messages` beside `events` a run's input is about twice its events. A batch always takes
# its first entry, and one event is at most 256 KiB of payload (the write limit), so no batch is refused.
BATCH_BYTES = 512 * 1024


class LaneBuffer(BaseModel):
    pending: list[dict[str, Any]] = Field(default_factory=list)  # envelopes, ascending id
    high_water: int = 0  # the largest event id ever received from the router
    window_opened_at: float | None = None  # seconds, workflow time; None while nothing is pending
    received: int = 0
    dropped_duplicates: int = 0


def _event_id(envelope: dict[str, Any]) -> int:
    return int(envelope["id"])


def receive(buf: LaneBuffer, envelopes: Sequence[dict[str, Any]], now: float) -> LaneBuffer:
    """A new buffer with the router's `envelopes` added, duplicates dropped and counted."""
    pending_ids = {_event_id(envelope) for envelope in buf.pending}
    added: list[dict[str, Any]] = []
    high_water = buf.high_water
    dropped = 0
    for envelope in envelopes:
        event_id = _event_id(envelope)
        if event_id <= buf.high_water or event_id in pending_ids:
            dropped += 1
            continue
        pending_ids.add(event_id)
        added.append(envelope)
        high_water = max(high_water, event_id)
    pending = sorted([*buf.pending, *added], key=_event_id)
    return buf.model_copy(
        update={
            "pending": pending,
            "high_water": high_water,
            "window_opened_at": _window_after_adding(buf, pending, now),
            "received": buf.received + len(added),
            "dropped_duplicates": buf.dropped_duplicates + dropped,
        }
    )


def requeue(buf: LaneBuffer, envelopes: Sequence[dict[str, Any]], now: float) -> LaneBuffer:
    """A new buffer with lane-local `envelopes` put back among the pending, whatever `high_water` says.

    An id that is already pending is not added twice. `high_water` and `received` do not change.
    """
    pending_ids = {_event_id(envelope) for envelope in buf.pending}
    added: list[dict[str, Any]] = []
    for envelope in envelopes:
        event_id = _event_id(envelope)
        if event_id not in pending_ids:
            pending_ids.add(event_id)
            added.append(envelope)
    pending = sorted([*buf.pending, *added], key=_event_id)
    return buf.model_copy(update={"pending": pending, "window_opened_at": _window_after_adding(buf, pending, now)})


def _window_after_adding(buf: LaneBuffer, pending: list[dict[str, Any]], now: float) -> float | None:
    if buf.window_opened_at is not None:
        return buf.window_opened_at
    return now if pending else None


def window_closes_at(buf: LaneBuffer, window_seconds: float) -> float | None:
    """When the open window closes (a batch is due), or None when no window is open."""
    if buf.window_opened_at is None:
        return None
    return buf.window_opened_at + window_seconds


def cut_batch(
    buf: LaneBuffer,
    now: float,
    window_seconds: float,
    max_events: int,
    distinct_by: str | None,
    max_bytes: int = BATCH_BYTES,
) -> tuple[list[dict[str, Any]], list[int], LaneBuffer] | None:
    """Cut the next batch if its window has closed at `now`, else None.

    Takes pending events in id order. With `distinct_by`, a later event whose value is already in the
    batch replaces that entry (the earlier one is consumed with it). The batch stops at the first event
    that would be a new entry beyond `max_events`, or that would take its entries past `max_bytes` (JSON);
    it and everything after it stay pending.

    Returns the entries (ordered by id), the ids of every consumed event (superseded ones included,
    ascending) and the new buffer.
    """
    closes_at = window_closes_at(buf, window_seconds)
    if closes_at is None or now < closes_at or not buf.pending:
        return None
    return _take(buf, max_events, distinct_by, max_bytes)


def regather(
    held_entries: Sequence[dict[str, Any]],
    held_ids: Sequence[int],
    buf: LaneBuffer,
    now: float,
    max_events: int,
    distinct_by: str | None,
    max_bytes: int = BATCH_BYTES,
) -> tuple[list[dict[str, Any]], list[int], LaneBuffer]:
    """A batch that waited for a key slot, grown by what arrived meanwhile (as one cut would have taken it).

    A keyed lane cuts when its window closes but may then wait for one of the listener's key slots; what
    arrives during that wait belongs in the same batch rather than one more wait behind it. The held
    entries go back among the pending and the batch is cut again at once (whatever the window says), under
    the same `max_events`, `distinct_by` and `max_bytes`. Events the held batch had consumed as superseded
    stay consumed. Its first id is unchanged (the held events are the oldest), so it keeps its run key.
    """
    superseded = set(held_ids) - {_event_id(entry) for entry in held_entries}
    entries, consumed, new_buf = _take(requeue(buf, held_entries, now), max_events, distinct_by, max_bytes)
    return entries, sorted(superseded.union(consumed)), new_buf


def envelope_bytes(envelope: dict[str, Any]) -> int:
    """An event's size as compact JSON, what it weighs in a batch."""
    return len(json.dumps(envelope, separators=(",", ":"), default=str).encode())


def _take(
    buf: LaneBuffer, max_events: int, distinct_by: str | None, max_bytes: int
) -> tuple[list[dict[str, Any]], list[int], LaneBuffer]:
    entries: dict[str, dict[str, Any]] = {}
    sizes: dict[str, int] = {}
    total = 0
    consumed: list[int] = []
    taken = 0
    for envelope in buf.pending:
        value = distinct_value(envelope, distinct_by) if distinct_by is not None else None
        # An entry with no distinct value is keyed by its id, which no value can equal.
        key = value if value is not None else f"#{_event_id(envelope)}"
        replaces = value is not None and value in entries
        if not replaces and len(entries) >= max_events:
            break
        size = envelope_bytes(envelope)
        if entries and total - sizes.get(key, 0) + size > max_bytes:
            break
        total += size - sizes.get(key, 0)
        entries[key], sizes[key] = envelope, size
        consumed.append(_event_id(envelope))
        taken += 1
    remaining = buf.pending[taken:]
    batch = sorted(entries.values(), key=_event_id)
    new_buf = buf.model_copy(
        update={
            "pending": list(remaining),
            "window_opened_at": buf.window_opened_at if remaining else None,
        }
    )
    return batch, consumed, new_buf
