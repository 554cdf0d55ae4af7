"""Dotted paths into JSON values, the one reader behind filters, lane keys, distinct_by and templates.

Owns path syntax (`item.type`, `batch.events.0.alias`), resolution and the canonical text of a value used
to group by it. A segment that is a non-negative integer indexes a list; on a dict it is an ordinary key.
`None` counts as missing: the envelope leaves empty fields out, so a path that reaches a null is treated
like one that reaches nothing (a template alone tells a null that is there at a path's end: it renders it).
"""

from __future__ import annotations

import enum
import json
import math
import re
from decimal import Decimal
from typing import Any, Final, Literal

_SEGMENT = r"[A-Za-z0-9_:@-]+"
PATH_RE = re.compile(rf"^{_SEGMENT}(?:\.{_SEGMENT})*$")
# Long enough for any envelope or template path; short enough that a path is never a payload.
MAX_PATH_CHARS = 256


class _Missing(enum.Enum):
    MISSING = "MISSING"

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


Missing = Literal[_Missing.MISSING]
MISSING: Final = _Missing.MISSING


def validate_path(path: str) -> str:
    """Return `path` if it is a dotted path; otherwise raise ValueError naming the problem."""
    if not path:
        raise ValueError("path must not be empty")
    if len(path) > MAX_PATH_CHARS:
        raise ValueError(f"path must be at most {MAX_PATH_CHARS} characters")
    if not PATH_RE.fullmatch(path):
        raise ValueError(
            f"path {path!r} must be dot-separated non-empty segments of letters, digits, '_', ':', '@', '-'"
        )
    return path


def resolve(value: Any, path: str) -> Any | Missing:
    """The value at dotted `path` inside `value`, or MISSING when any step is absent or None."""
    current = value
    for segment in path.split("."):
        if isinstance(current, dict):
            current = current.get(segment, MISSING)
        elif isinstance(current, list | tuple) and segment.isdigit():
            index = int(segment)
            current = current[index] if index < len(current) else MISSING
        else:
            return MISSING
        if current is None or current is MISSING:
            return MISSING
    return current


def json_equal(left: Any, right: Any) -> bool:
    """Equality of JSON values: booleans are not numbers, 1 equals 1.0, containers compare deeply."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(json_equal(a, b) for a, b in zip(left, right, strict=True))
    return type(left) is type(right) and bool(left == right)


def canonical_json(value: Any) -> str:
    """A value's identity as text: equal JSON values give equal text. Compact, keys sorted, and a number in
    plain notation without trailing zeros (so 1 and 1.0, equal as JSON values, are one text: "1"), which is
    also how the routing statement writes it (`orchestrator_canonical`, 0007_routing.sql)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool) or value is None:
        return "true" if value is True else "false" if value is False else "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _plain_number(value)
    if isinstance(value, dict):
        return "{" + ",".join(canonical_json(str(k)) + ":" + canonical_json(value[k]) for k in sorted(value)) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(canonical_json(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def _plain_number(number: float) -> str:
    if not math.isfinite(number):
        return json.dumps(number)
    if number.is_integer():
        return str(int(number))
    text = format(Decimal(repr(number)), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text
