"""Commit times in `where` conditions: `created_at` compares as an instant, never as text.

The envelope writes a commit time in UTC and leaves out a fraction that is zero (`...:00Z`, `...:00.5Z`), so as
text `...:00.5Z` sorted before `...:00Z` ('.' < 'Z') and an offset (`+01:00`) compared its local hour. A value
an ordering compares `created_at` with is an ISO 8601 instant with seconds and a zone (`Z` or `±HH:MM`, hours up to
14 as real zones are), which Python and PostgreSQL both read as the same instant; `orchestrator_instant.sql` is
the SQL twin, with the same pattern.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

INSTANT_PATH = "created_at"
_INSTANT = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-](0[0-9]|1[0-4]):[0-5][0-9])"
)


def instant_of(value: Any) -> datetime | None:
    """The instant a value names, or None when it is not an instant as above (text compares as text then)."""
    if not isinstance(value, str) or _INSTANT.fullmatch(value) is None:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:  # a day or an hour that does not exist (2026-02-30, 25:00)
        return None
