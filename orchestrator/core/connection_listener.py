"""A connection listener (SPEC section 7): a client's own listener, declared in its stream's query string.

Owns what a stream takes and gives: its parameters (`filter` and `batch`, the same fields and checks as a
saved listener's, and `client`, whose own writes it never sees) and the batching of what matches into SSE
messages by the same rules as a lane (a window from the first waiting event, `max_events`, `distinct_by`),
as a pure state the stream's loop feeds with events and the time. Reading the stream and sending belong to
`orchestrator/door/streams.py`. A batch takes a prefix of what waits, so the id of its last event is a point
from which a reconnecting client misses nothing and gets nothing twice (`Last-Event-ID`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pydantic

from orchestrator.core.batch_cuts import Cut, cut, envelope_bytes
from orchestrator.core.declaration import (
    WHERE_TAGS,
    BatchSpec,
    ListenerFilter,
    batch_in_effect,
    never_holding,
    placeless,
    unknown_types,
    unresolvable_paths,
)
from orchestrator.core.distinct import distinct_value
from orchestrator.core.errors import CommandError
from orchestrator.core.filters import matches
from orchestrator.core.json_checks import MAX_JSON_DEPTH, json_trouble, not_json, too_deep
from orchestrator.core.lane_clock import window_close
from orchestrator.core.limits import Limits
from orchestrator.core.validation import field_errors_message

# What waits in one stream at most before it is sent whatever the window says: a busy session with a long
# window must not grow a connection's memory without bound.
MAX_WAITING = 10_000
MAX_CLIENT_CHARS = 128


@dataclass(frozen=True)
class StreamSpec:
    filter: ListenerFilter
    batch: BatchSpec
    client: str | None


def _json_param(name: str, raw: str | None) -> Any:
    """The parameter's JSON, refused as /v1/commands refuses a body's: not JSON (NaN and Infinity included),
    nested too deep, or holding what the store cannot (`json_trouble`)."""
    if raw is None:
        return {}
    try:
        value = json.loads(raw, parse_constant=not_json)
    except ValueError as err:
        raise CommandError("invalid_request", f"{name}: not valid JSON ({err})") from None
    except RecursionError:
        raise CommandError("invalid_request", too_deep(name)) from None
    trouble = json_trouble(value, MAX_JSON_DEPTH, name)
    if trouble is not None:
        raise CommandError("invalid_request", trouble)
    return value


# The query parameters a stream takes: its own, where to start, and a browser's or a script's credential.
STREAM_PARAMS = ("filter", "batch", "client", "after", "access_token", "ticket")


def unknown_stream_params(names: Iterable[str]) -> None:
    """Refuse a parameter the stream does not take: a typo (`fitler`) would otherwise stream everything."""
    for name in names:
        if name not in STREAM_PARAMS:
            known = ", ".join(STREAM_PARAMS)
            raise CommandError("invalid_request", f"{name}: not a stream parameter (they are {known})")


def parse_stream(
    filter_param: str | None,
    batch_param: str | None,
    client: str | None,
    limits: Limits,
    event_types: Mapping[str, Mapping[str, Any]],
) -> StreamSpec:
    """The stream's parameters, checked like a saved listener's (against the application's event types too);
    raises CommandError naming the field."""
    try:
        flt = ListenerFilter.model_validate(
            _json_param("filter", filter_param), strict=True, context={"limits": limits}
        )
    except pydantic.ValidationError as err:
        raise CommandError("invalid_request", field_errors_message(err, "filter", union_tags=WHERE_TAGS)) from None
    try:
        batch = BatchSpec.model_validate(_json_param("batch", batch_param), strict=True, context={"limits": limits})
    except pydantic.ValidationError as err:
        raise CommandError("invalid_request", field_errors_message(err, "batch")) from None
    problems = [
        *unknown_types(flt.types, event_types),
        *unresolvable_paths(flt, batch, event_types=event_types),
        *never_holding(flt),
        *placeless(flt),
    ]
    for problem in problems:
        raise CommandError("invalid_request", problem)
    if client is not None and not (0 < len(client) <= MAX_CLIENT_CHARS):
        raise CommandError("invalid_request", f"client: must be 1 to {MAX_CLIENT_CHARS} characters")
    return StreamSpec(flt, batch_in_effect(batch, limits), client)


def wanted(spec: StreamSpec, envelope: dict[str, Any]) -> bool:
    """Whether the stream shows the event: it matches the filter, and it is not the client's own write."""
    source = envelope.get("source")
    if spec.client is not None and isinstance(source, dict) and source.get("client") == spec.client:
        return False
    return matches(spec.filter, envelope)


@dataclass(frozen=True)
class StreamEvent:
    """An envelope a stream holds, weighed for the cut (a stream carries its events whole)."""

    envelope: dict[str, Any]
    distinct: str | None
    size: int

    @property
    def id(self) -> int:
        return int(self.envelope["id"])


@dataclass
class StreamBatches:
    """What one stream has waiting, and when its window opened (the stream's own clock, in seconds)."""

    spec: StreamSpec
    waiting: list[StreamEvent] = field(default_factory=list)
    opened_at: float | None = None
    last_at: float | None = None

    def add(self, envelopes: Sequence[dict[str, Any]], now: float) -> None:
        distinct_by = self.spec.batch.distinct_by
        fresh = [
            StreamEvent(e, None if distinct_by is None else distinct_value(e, distinct_by), envelope_bytes(e))
            for e in envelopes
            if wanted(self.spec, e)
        ]
        if fresh:
            self.last_at = now
            if self.opened_at is None:
                self.opened_at = now
        self.waiting += fresh

    def due_at(self) -> float | None:
        """When the waiting events are due to be sent, or None when nothing waits (a debounced window closes
        once the newest has been quiet `debounce_seconds`, at most `max_wait_seconds` after it opened)."""
        if self.opened_at is None:
            return None
        if len(self.waiting) >= MAX_WAITING:
            return self.opened_at
        return window_close(self.opened_at, self.last_at, self.spec.batch)

    def take(self, now: float) -> Cut[StreamEvent] | None:
        """The next batch if it is due at `now` (what it leaves is due at once: it waited a whole window)."""
        due = self.due_at()
        if due is None or now < due:
            return None
        batch = cut(self.waiting, self.spec.batch.max_events, self.spec.batch.distinct_by is not None)
        if batch is None:
            return None
        self.waiting = self.waiting[len(batch.consumed) :]
        if not self.waiting:
            self.opened_at = None
        return batch


def sse_message(batch: Cut[StreamEvent]) -> str:
    """One batch as a Server-Sent Events message."""
    data = {
        "first_id": batch.consumed[0],
        "last_id": batch.through,
        "count": len(batch.entries),
        "events": [entry.envelope for entry in batch.entries],
    }
    return f"id: {batch.through}\nevent: batch\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"
