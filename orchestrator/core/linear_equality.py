"""`uniqueItems` and `enum` decided in time linear in the data: jsonschema's own compare each item with every one
before it when the items do not sort (objects, lists, kinds mixed), and each value with every choice of an enum. An
emitted array of 20,000 objects under `uniqueItems`, or of 20,000 numbers under an `enum` of 5,000, held the API's
event loop for minutes, every request of every tenant waiting behind it (the door's deadline too: nothing yields).

A value is known by its canonical text (`canonical_json`: equal JSON values give equal text, 1 and 1.0 one, `true`
and 1 two, as jsonschema's `equal` has them): the items' texts go in a set, an enum's choices are a set of texts.
`linear` is a validator class with these two keywords in place of jsonschema's (`jsonschema.validators.extend`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from typing import Any

from jsonschema import ValidationError
from jsonschema.validators import extend

from orchestrator.core.paths import canonical_json

# An enum's choices as texts, by the list's identity (a compiled schema keeps its lists): at most this many kept.
_KEPT = 1024
_CHOICES: dict[int, tuple[list[Any], frozenset[str]]] = {}


def unique(container: Iterable[Any]) -> bool:
    """Whether no two of the items are equal as JSON values."""
    seen: set[str] = set()
    for item in container:
        text = canonical_json(item)
        if text in seen:
            return False
        seen.add(text)
    return True


def choices(enums: list[Any]) -> frozenset[str]:
    """An enum's choices as canonical texts."""
    kept = _CHOICES.get(id(enums))
    if kept is None or kept[0] is not enums:
        if len(_CHOICES) >= _KEPT:
            _CHOICES.clear()
        kept = _CHOICES[id(enums)] = (enums, frozenset(canonical_json(e) for e in enums))
    return kept[1]


def _enum(validator: Any, enums: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if isinstance(enums, list) and canonical_json(instance) not in choices(enums):
        yield ValidationError(f"{instance!r} is not one of {enums!r}")


def _unique_items(validator: Any, unique_items: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if unique_items and validator.is_type(instance, "array") and not unique(instance):
        yield ValidationError(f"{instance!r} has non-unique elements")


@functools.cache
def linear(validator: Any) -> Any:
    """`validator` (a jsonschema validator class) deciding `enum` and `uniqueItems` in linear time."""
    return extend(validator, {"enum": _enum, "uniqueItems": _unique_items})  # type: ignore[no-untyped-call]
