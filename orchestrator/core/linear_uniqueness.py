"""`uniqueItems` decided in time linear in the array: jsonschema's own compares each item with every one before it
when the items do not sort (objects, lists, kinds mixed), and an emitted array of 20,000 objects held the API's event
loop for minutes, every request of every tenant waiting behind it (the door's deadline too: nothing yields).

Each item is made its canonical text (`canonical_json`: equal JSON values give equal text, 1 and 1.0 one, `true`
and 1 two, as jsonschema's `equal` has them), and the texts go in a set. Put in jsonschema's place by `event_types`
as it loads, before any data is checked.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import jsonschema._keywords
import jsonschema._utils

from orchestrator.core.paths import canonical_json


def unique(container: Iterable[Any]) -> bool:
    """Whether no two of the items are equal as JSON values."""
    seen: set[str] = set()
    for item in container:
        text = canonical_json(item)
        if text in seen:
            return False
        seen.add(text)
    return True


def decide_uniqueness_linearly() -> None:
    """jsonschema's `uniqueItems` asks `unique` where it asked its own `uniq` (all it uses it for)."""
    if jsonschema._keywords.uniq is not unique:  # type: ignore[attr-defined]
        assert jsonschema._keywords.uniq is jsonschema._utils.uniq, "uniqueItems no longer asks `uniq`: see here"  # type: ignore[attr-defined]
        jsonschema._keywords.uniq = unique  # type: ignore[attr-defined]
