"""The patterns of event types' schemas (`pattern`, `patternProperties`), matched by RE2 in time linear in the
text: Python's backtracking engine took time exponential in an emitted string made for a pattern such as
`(a+)+$`, holding the API's event loop, every request of every tenant, while it ran.

jsonschema's keywords (`pattern`, `patternProperties`, and the patterns `additionalProperties` and
`unevaluatedProperties` leave out) call `re.search` in three of its modules; `search` is put in its place there
(`match_linearly`, once, at import), and `can_hold` uses it too. A pattern RE2 does not take (a backreference, a
lookaround) is refused at save (`refused_patterns`); one a type saved before that rule holds is still matched by
Python's engine, as it was.
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


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Any:
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error:
        return None


def search(pattern: str, string: str) -> Any:
    """`re.search` of a schema's pattern, by RE2 (by Python's engine only for a pattern RE2 does not take, which
    no type saved since can hold)."""
    compiled = _compiled(pattern)
    return re.search(pattern, string) if compiled is None else compiled.search(string)


def refused_patterns(schema: Any, at: str = "") -> Iterator[tuple[str, str]]:
    """Where a schema holds a pattern RE2 does not take, each as (its path in the schema, why)."""
    if isinstance(schema, list):
        for n, sub in enumerate(schema):
            yield from refused_patterns(sub, f"{at}.{n}" if at else str(n))
        return
    if not isinstance(schema, dict):
        return
    for key, value in schema.items():
        here = f"{at}.{key}" if at else key
        if key == "pattern" and isinstance(value, str) and _compiled(value) is None:
            yield here, f"{value!r} is no pattern matched in linear time (no backreferences or lookaround)"
        elif key == "patternProperties" and isinstance(value, dict):
            for name, sub in value.items():
                if _compiled(name) is None:
                    yield here, f"{name!r} is no pattern matched in linear time (no backreferences or lookaround)"
                yield from refused_patterns(sub, f"{here}.{name}")
        elif key not in ("const", "enum", "default", "examples"):  # values, not schemas
            yield from refused_patterns(value, here)


_SEARCH = types.SimpleNamespace(search=search)


def match_linearly() -> None:
    """jsonschema's keywords search with `search` where they searched with `re` (all they use of it)."""
    for module in (jsonschema._keywords, jsonschema._utils, jsonschema._legacy_keywords):
        if getattr(module, "re", None) is not _SEARCH:
            assert getattr(module, "re", None) is re, f"{module.__name__} no longer searches with `re`: see here"
            module.re = _SEARCH  # type: ignore[attr-defined]


match_linearly()
