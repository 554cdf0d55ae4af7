"""Turning a pydantic ValidationError into one message that names each field by its dotted path.

Owns the wording every command uses for `invalid_request` (`listener.batch.max_events: must be at most
1000; ...`); the models and their rules are their modules'. Messages for the common constraint kinds are
rephrased as `must ...`; anything else keeps pydantic's wording without its `Value error, ` prefix. At most
`MAX_ERRORS` fields are listed so that a garbage body cannot produce a garbage-sized reply.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import pydantic

MAX_ERRORS = 10

_VALUE_ERROR_PREFIXES = ("Value error, ", "Assertion failed, ")
_TYPE_WORDS = {
    "dict_type": "must be a JSON object",
    "model_type": "must be a JSON object",
    "model_attributes_type": "must be a JSON object",
    "list_type": "must be a list",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
}


class FieldProblem(ValueError):
    """A model's check of how its fields fit together, about one of them: named as that field
    (`listener.concurrency.key: ...`), not as the model that checked it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _phrase(error: Any) -> str:
    kind = error.get("type", "")
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not known"
    if kind in ("less_than_equal", "less_than", "greater_than_equal", "greater_than"):
        words = {
            "less_than_equal": ("le", "must be at most"),
            "less_than": ("lt", "must be less than"),
            "greater_than_equal": ("ge", "must be at least"),
            "greater_than": ("gt", "must be greater than"),
        }[kind]
        return f"{words[1]} {ctx.get(words[0])}"
    if kind in ("too_long", "too_short") and ("max_length" in ctx or "min_length" in ctx):
        bound, least = (ctx.get("max_length"), "most") if kind == "too_long" else (ctx.get("min_length"), "least")
        count = f" ({ctx['actual_length']} given)" if ctx.get("actual_length") is not None else ""
        return f"must have at {least} {bound} item{'' if bound == 1 else 's'}{count}"
    if kind == "literal_error" and "expected" in ctx:
        return f"must be one of {ctx['expected']}"
    if kind == "union_tag_invalid" and "expected_tags" in ctx:
        return f"{str(ctx.get('discriminator', 'tag')).strip(chr(39))} must be one of {ctx['expected_tags']}"
    if kind in _TYPE_WORDS:
        return _TYPE_WORDS[kind]
    message = str(error.get("msg", "is invalid"))
    for prefix in _VALUE_ERROR_PREFIXES:
        if message.startswith(prefix):
            return message[len(prefix) :]
    return message


def _location(loc: Sequence[int | str], prefix: str, union_tags: Collection[str], kind: str) -> str:
    parts = [prefix] if prefix else []
    after_tag = False
    for index, part in enumerate(loc):
        # pydantic puts a discriminated union's tag in the location, after the union's own place
        # (`action.workflow.alias`, `filter.where.0.where_condition`); the user wrote `action.alias` and
        # `filter.where.0`, so the tag is dropped. What follows a tag is a field, even one spelt as a tag
        # (`action.workflow.workflow` is the action's `workflow`), and a key refused as unknown is the user's.
        is_tag = index > 0 and not after_tag and isinstance(part, str) and part in union_tags
        if is_tag and not (kind == "extra_forbidden" and index + 1 == len(loc)):
            after_tag = True
            continue
        after_tag = False
        parts.append(str(part))
    return ".".join(parts)


def field_errors_message(exc: pydantic.ValidationError, prefix: str, *, union_tags: Collection[str] = ()) -> str:
    """`prefix.loc: message; ...` for each error in `exc` (at most MAX_ERRORS, then a count of the rest).

    `union_tags` are the tag values of discriminated unions inside the model, left out of locations (an error
    of the value as a whole at a union's place names that place: `filter.where.0: must be a JSON object`).
    """
    errors = exc.errors(include_url=False)
    lines: list[str] = []
    for error in errors[:MAX_ERRORS]:
        where = _location(error["loc"], prefix, union_tags, error.get("type", ""))
        problem = (error.get("ctx") or {}).get("error")
        if isinstance(problem, FieldProblem):
            where = f"{where}.{problem.field}" if where else problem.field
        where = where or "body"
        if error.get("type") == "union_tag_not_found":
            # A union's tag left out (an action with no `type`): the tag's own field is what is missing.
            tag = str((error.get("ctx") or {}).get("discriminator", "type")).strip("'")
            lines.append(f"{where}.{tag}: is required")
            continue
        lines.append(f"{where}: {_phrase(error)}")
    if len(errors) > MAX_ERRORS:
        lines.append(f"and {len(errors) - MAX_ERRORS} more")
    return "; ".join(lines)
