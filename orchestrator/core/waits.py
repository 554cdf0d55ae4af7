"""A run's wait for events (`RunSession.wait_for_event`): what it declares, and which events answer it.

Owns the shape of a wait (conditions in the listener filter language, a timeout, the position it counts from, how
many events it takes) and the one rule of its answer: among the conditions that hold for events after its
position, the first declared wins, and it takes that condition's events in id order, up to `max_events`; the
other conditions' events are not consumed and stay for the run's next wait (the seed's inbound loop). The SQL
round (`orchestrator_wait_hits`, the function files) decides the same way; routing, the record and the signal
that tells the run are the store's and the router's. A listener's `cancel_on` conditions are waits of its runs
that cancel instead of answering (`CancelOn`, in `declaration.py`).

Bounds: ten conditions (an `AnyOf` a person reads), a thousand events an answer (a batch's), and a wait of at most
thirty-one days (a month's silence is an inactivity timeout, not a wait).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from orchestrator.core.declaration import (
    WHERE_TAGS,
    BatchSpec,
    WaitCondition,
    placeless,
    unknown_types,
    unresolvable_paths,
)
from orchestrator.core.errors import CommandError
from orchestrator.core.limits import MAX_EVENTS_PER_BATCH
from orchestrator.core.validation import field_errors_message

MAX_WAIT_CONDITIONS = 10
MAX_WAIT_SECONDS = 31 * 24 * 3600.0
# A run's cancel watch is its wait number 0 (its own waits count from 1), and a stop that lets it clean up -1.
CANCEL_WATCH_SEQ = 0
STOP_SEQ = -1


@dataclass(frozen=True)
class StopAsked:
    """A stop (`stop_execution`) asked of a run before its start was made, found when the start is: none (0) for
    `terminate`, else the grace its cancellation has."""

    grace_seconds: float
    reason: str


@dataclass(frozen=True)
class StartMade:
    """A start made, as its record says after it: whether the record still stands (its session is not being
    deleted, which ends the session's runs and then takes their records), and a stop asked before it."""

    recorded: bool = True
    stop: StopAsked | None = None


class WaitSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, serialize_by_alias=True)

    conditions: list[WaitCondition] = Field(min_length=1, max_length=MAX_WAIT_CONDITIONS)
    timeout_seconds: float = Field(gt=0, le=MAX_WAIT_SECONDS)
    # The position the wait counts from (an event id); None: the last event of the run's batch.
    after: int | None = Field(default=None, ge=0, le=2**63 - 1)
    max_events: int = Field(default=1, ge=1, le=MAX_EVENTS_PER_BATCH)


def parse_wait(body: Any, event_types: Mapping[str, Mapping[str, Any]] | None = None) -> WaitSpec:
    """Validate a wait as `wait_for_event` sends it; raises CommandError("invalid_request") naming each bad field
    (`conditions.1.where.0.op: ...`), with a type no event can have and a path that never resolves refused as a
    listener's are."""
    try:
        spec = WaitSpec.model_validate(body, strict=True, context={})  # input checked: see `WhereCondition`
    except pydantic.ValidationError as exc:
        raise CommandError("invalid_request", field_errors_message(exc, "", union_tags=WHERE_TAGS)) from None
    problems: list[str] = []
    for n, condition in enumerate(spec.conditions):
        # A condition no event can pass (`in` of no value) is not refused: a run builds its values as it goes,
        # and an empty list leaves the other conditions, or the timeout, to answer.
        found = (
            unresolvable_paths(condition, BatchSpec(), None, event_types)
            + unknown_types(condition.types, event_types)
            + placeless(condition)
        )
        problems += [f"conditions.{n}.{problem.removeprefix('filter.')}" for problem in found]
    if problems:
        raise CommandError("invalid_request", "; ".join(problems))
    return spec


def answer(hits: Iterable[tuple[int, int]], max_events: int) -> tuple[int, list[int]] | None:
    """The answer a wait's hits give, `(condition, event ids)`, or None when none holds: `hits` are (condition
    index, event id) pairs; the lowest condition with a hit wins and takes its events in id order, up to
    `max_events`."""
    by_condition: dict[int, set[int]] = {}
    for condition, event_id in hits:
        by_condition.setdefault(condition, set()).add(event_id)
    if not by_condition:
        return None
    winner = min(by_condition)
    return winner, sorted(by_condition[winner])[:max_events]


__all__ = [
    "CANCEL_WATCH_SEQ",
    "MAX_WAIT_CONDITIONS",
    "MAX_WAIT_SECONDS",
    "STOP_SEQ",
    "WaitSpec",
    "answer",
    "parse_wait",
]
