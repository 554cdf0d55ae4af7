"""A fast yes or no for the plain JSON Schemas event types mostly declare, compiled once into closures.

Owns deciding whether `data` fits a schema built only of the common keywords (`type`, `properties`, `required`,
`additionalProperties`, `items`, `enum`, `const`, the bounds of numbers, strings and arrays, and annotations),
with JSON Schema 2020-12's meaning. A schema that uses anything else (`$ref`, `pattern`, `format`, combinators,
another draft) gets no fast check, and `event_types` asks `jsonschema` as before; so does any data the fast
check refuses, for the messages. jsonschema's own walk cost a bulk emit most of its time at the door.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from orchestrator.core.paths import canonical_json, json_equal

Check = Callable[[Any], bool]

_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated", "readOnly",
                          "writeOnly"})  # fmt: skip
_HANDLED = frozenset({"type", "properties", "required", "additionalProperties", "items", "enum", "const", "minimum",
                      "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems",
                      "maxItems"}) | _ANNOTATIONS  # fmt: skip
_DRAFT = "https://json-schema.org/draft/2020-12/schema"
# An enum of more choices is asked by its values' canonical texts, in a set: compared one by one, an array of
# 20,000 items under an enum of 5,000 took 10^8 comparisons.
_FEW_CHOICES = 8


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_TYPES: dict[str, Check] = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "number": _number,
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


class _Unsupported(Exception):
    pass


def fast_check(schema: Any) -> Check | None:
    """A check of `schema` (True: the data fits), or None when the schema uses more than this knows."""
    if isinstance(schema, dict) and schema.get("$schema", _DRAFT) != _DRAFT:
        return None
    try:
        return _compile(schema)
    except _Unsupported:
        return None


def _compile(schema: Any) -> Check:
    if schema is True:
        return lambda _: True
    if schema is False:
        return lambda _: False
    if not isinstance(schema, dict) or set(schema) - _HANDLED - {"$schema"}:
        raise _Unsupported
    checks: list[Check] = []
    kind = schema.get("type")
    if kind is not None:
        kinds = [kind] if isinstance(kind, str) else kind
        if not isinstance(kinds, list) or any(k not in _TYPES for k in kinds):
            raise _Unsupported
        tests = [_TYPES[k] for k in kinds]
        checks.append(tests[0] if len(tests) == 1 else lambda v: any(t(v) for t in tests))
    if "enum" in schema:
        choices = schema["enum"]
        if not isinstance(choices, list):
            raise _Unsupported
        if len(choices) <= _FEW_CHOICES:
            checks.append(lambda v: any(json_equal(v, c) for c in choices))
        else:
            texts = frozenset(canonical_json(c) for c in choices)
            checks.append(lambda v: canonical_json(v) in texts)
    if "const" in schema:
        const = schema["const"]
        checks.append(lambda v: json_equal(v, const))
    checks += _bounds(schema)
    checks += _object(schema)
    if "items" in schema:
        item = _compile(schema["items"])
        checks.append(lambda v: not isinstance(v, list) or all(item(x) for x in v))
    return _all(checks)


def _all(checks: list[Check]) -> Check:
    """One check of them all, with no generator for the one or two a plain schema mostly has."""
    if not checks:
        return lambda _: True
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda v: first(v) and second(v)
    every = tuple(checks)

    def holds(v: Any) -> bool:
        for check in every:  # noqa: SIM110 - a loop, not a generator, on a bulk write's path
            if not check(v):
                return False
        return True

    return holds


def _bound(limit: Any) -> int | float:
    if not _number(limit):
        raise _Unsupported
    bound: int | float = limit
    return bound


def _bounds(schema: Mapping[str, Any]) -> list[Check]:
    checks: list[Check] = []
    numeric: dict[str, Callable[[Any, Any], bool]] = {
        "minimum": lambda v, b: bool(v >= b),
        "maximum": lambda v, b: bool(v <= b),
        "exclusiveMinimum": lambda v, b: bool(v > b),
        "exclusiveMaximum": lambda v, b: bool(v < b),
    }
    for key, holds in numeric.items():
        if key in schema:
            checks.append(_bounded(_bound(schema[key]), holds))
    sized: dict[str, tuple[type[str] | type[list[Any]], bool]] = {
        "minLength": (str, True),
        "maxLength": (str, False),
        "minItems": (list, True),
        "maxItems": (list, False),
    }
    for key, (kind, at_least) in sized.items():
        if key in schema:
            size = schema[key]
            if not isinstance(size, int) or isinstance(size, bool):
                raise _Unsupported
            checks.append(_sized(kind, size, at_least))
    return checks


def _bounded(bound: int | float, holds: Callable[[Any, Any], bool]) -> Check:
    return lambda v: not _number(v) or holds(v, bound)


def _sized(kind: type[str] | type[list[Any]], size: int, at_least: bool) -> Check:
    if at_least:
        return lambda v: not isinstance(v, kind) or len(v) >= size
    return lambda v: not isinstance(v, kind) or len(v) <= size


def _object(schema: Mapping[str, Any]) -> list[Check]:
    checks: list[Check] = []
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        raise _Unsupported
    compiled = {name: _compile(sub) for name, sub in properties.items()}
    if compiled:
        checks.append(_properties(tuple(compiled.items())))
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(k, str) for k in required):
        raise _Unsupported
    if required:
        names = frozenset(required)
        checks.append(lambda v: not isinstance(v, dict) or names.issubset(v))
    if "additionalProperties" in schema:
        extra = _compile(schema["additionalProperties"])
        checks.append(lambda v: not isinstance(v, dict) or all(extra(x) for k, x in v.items() if k not in compiled))
    return checks


def _properties(compiled: tuple[tuple[str, Check], ...]) -> Check:
    def holds(v: Any) -> bool:
        if not isinstance(v, dict):
            return True
        for name, check in compiled:  # noqa: SIM110 - a loop, not a generator, on a bulk write's path
            if name in v and not check(v[name]):
                return False
        return True

    return holds


__all__ = ["Check", "fast_check"]
