"""The patterns of event types' schemas (`pattern`, `patternProperties`), matched by RE2 in time linear in the
text: Python's backtracking engine took time exponential in an emitted string made for a pattern such as
`(a+)+$`, holding the API's event loop, every request of every tenant, while it ran.

jsonschema's keywords (`pattern`, `patternProperties`, and the patterns `additionalProperties` and
`unevaluatedProperties` leave out) call `re.search` in three of its modules; `search` is put in its place there
(`match_linearly`, once, at import), and `can_hold` uses it too. A pattern RE2 does not take (a backreference, a
lookaround, a count over 1,000) is refused at save wherever a schema applies it (`refused_patterns`); a type saved
before that rule keeps its schema, and its patterns are matched by Python's engine, as they were. `\\uXXXX`, the
JSON Schema (ECMA-262) escape RE2 does not know, is read as RE2's `\\x{XXXX}`.
"""

from __future__ import annotations

import functools
import re
import types
from collections.abc import Iterator
from typing import Any

import jsonschema._keywords
import jsonschema._legacy_keywords
import jsonschema._utils
import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is said by the save's error, not on stderr

# `\uXXXX` after an even run of backslashes (an odd one escapes the `u`'s own backslash).
_UNICODE_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u([0-9a-fA-F]{4})")


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> tuple[Any, str | None]:
    """RE2's compiled pattern, or None and why RE2 does not take it."""
    try:
        return re2.compile(_UNICODE_ESCAPE.sub(r"\1\\x{\2}", pattern), _OPTIONS), None
    except re2.error as err:
        why = err.args[0] if err.args else err
        return None, why.decode(errors="replace") if isinstance(why, bytes) else str(why)


def search(pattern: str, string: str) -> Any:
    """`re.search` of a schema's pattern, by RE2 (by Python's engine only for a pattern RE2 does not take, which
    only a type saved before the rule can hold)."""
    compiled, _ = _compiled(pattern)
    return re.search(pattern, string) if compiled is None else compiled.search(string)


# Where a schema's keywords hold subschemas: one, a list of them, or a map of names to them.
_ONE = frozenset(
    {
        "items", "additionalItems", "additionalProperties", "unevaluatedItems", "unevaluatedProperties", "contains",
        "propertyNames", "not", "if", "then", "else",
    }
)  # fmt: skip
_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_MAPS = frozenset({"properties", "$defs", "definitions", "dependentSchemas", "patternProperties", "dependencies"})


def refused_patterns(schema: Any, at: str = "") -> Iterator[tuple[str, str]]:
    """Where a schema applies a pattern RE2 does not take, each as (its path in the schema, why). Only where a
    keyword applies one: a `default`, an `enum` or an unknown keyword holds values, not schemas."""
    if not isinstance(schema, dict):
        return
    for key, value in schema.items():
        here = f"{at}.{key}" if at else key
        if key == "pattern" and isinstance(value, str):
            yield from _refused(here, value)
        if key == "patternProperties" and isinstance(value, dict):
            for name in value:
                yield from _refused(here, name)
        if key in _MAPS and isinstance(value, dict):
            for name, sub in value.items():
                yield from refused_patterns(sub, f"{here}.{name}")
        elif key in _LISTS and isinstance(value, list):
            for n, sub in enumerate(value):
                yield from refused_patterns(sub, f"{here}.{n}")
        elif key in _ONE:
            yield from refused_patterns(value, here)


def _refused(here: str, pattern: str) -> Iterator[tuple[str, str]]:
    compiled, why = _compiled(pattern)
    if compiled is None:
        yield here, f"{pattern!r} is no pattern matched in linear time (RE2: {why})"


_SEARCH = types.SimpleNamespace(search=search)


def match_linearly() -> None:
    """jsonschema's keywords search with `search` where they searched with `re` (all they use of it)."""
    for module in (jsonschema._keywords, jsonschema._utils, jsonschema._legacy_keywords):
        if getattr(module, "re", None) is not _SEARCH:
            assert getattr(module, "re", None) is re, f"{module.__name__} no longer searches with `re`: see here"
            module.re = _SEARCH  # type: ignore[attr-defined]


match_linearly()
