"""`distinct_by`: within one batch, only the newest event per value of a path is kept.

Owns the collapse of a list of envelopes; when a batch is cut and how many entries it takes is
`batch_windows.py`'s (which collapses as it cuts, with the same rule). Newest means the highest event id.
Values are grouped by their canonical JSON, so `1` and `"1"` are different values. An event that lacks
the path has no value to share and is kept on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestrator.core.envelope_paths import resolve_in_event
from orchestrator.core.paths import MISSING, canonical_json


def distinct_value(envelope: dict[str, Any], path: str) -> str | None:
    """The grouping value of an envelope, or None when it lacks the path (then it groups with nothing)."""
    value = resolve_in_event(envelope, path)
    return None if value is MISSING else canonical_json(value)


def distinct_newest(events: Sequence[dict[str, Any]], path: str) -> list[dict[str, Any]]:
    """The newest envelope per value of `path`, plus every envelope lacking it, ordered by id."""
    newest: dict[str, dict[str, Any]] = {}
    loose: list[dict[str, Any]] = []
    for envelope in events:
        value = distinct_value(envelope, path)
        if value is None:
            loose.append(envelope)
        elif value not in newest or newest[value]["id"] < envelope["id"]:
            newest[value] = envelope
    return sorted([*newest.values(), *loose], key=lambda envelope: int(envelope["id"]))
