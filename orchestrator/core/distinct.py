"""`distinct_by`: the value an event is grouped by, within one batch only the newest per value being kept.

Owns the grouping value; the collapse itself is the cut's (`batch_cuts.cut`, which keeps the newest, highest
id, event per value as it cuts). Values are grouped by their canonical JSON, so `1` and `"1"` are different
values. An event that lacks the path has no value to share and is kept on its own.
"""

from __future__ import annotations

from typing import Any

from orchestrator.core.envelope_paths import resolve_in_event
from orchestrator.core.paths import MISSING, canonical_json


def distinct_value(envelope: dict[str, Any], path: str) -> str | None:
    """The grouping value of an envelope, or None when it lacks the path (then it groups with nothing)."""
    value = resolve_in_event(envelope, path)
    return None if value is MISSING else canonical_json(value)
