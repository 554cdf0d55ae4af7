"""The application's own event types: a dotted name, a JSON Schema for `data`, who may emit it from outside.

Owns the rules of a declared type (SPEC section 12): its name (dotted lower-case segments, never one of the
platform's own families), its schema (valid JSON Schema, at most `MAX_SCHEMA_BYTES`, checked when saved),
an emitted event's `data` against it (each failure named by its path, `data.items.0.sku`), and whether a
path into `data` can ever be held by it (a listener's `where`, key or `distinct_by` that could not is
refused at save). Storing and emitting are the store's and the commands'.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Annotated, Any

from jsonschema import Draft202012Validator, SchemaError
from jsonschema.validators import validator_for
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from orchestrator.core.fast_schemas import fast_check
from orchestrator.core.scopes import emitting_scope

# The families of the platform's own events: a declared name may not start with one of them.
PLATFORM_FAMILIES = frozenset({"object", "thread", "execution", "graph", "listener", "lane", "session", "schedule"})
MAX_SCHEMA_BYTES = 64 * 1024
MAX_ERRORS = 5
_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")


def check_type_name(name: str) -> str:
    if len(name) > 128 or not _NAME.match(name):
        raise ValueError("must be dotted lower-case segments (letters, digits, _), at least two: 'ticket.escalated'")
    family = name.split(".")[0]
    if family in PLATFORM_FAMILIES:
        raise ValueError(f"the {family}.* types are the platform's own")
    return name


def check_schema(schema: Any) -> dict[str, Any]:
    """A JSON Schema (an object), valid for the draft it names (2020-12 when it names none)."""
    if not isinstance(schema, dict):
        raise ValueError("must be a JSON Schema object")
    if len(json.dumps(schema, separators=(",", ":"))) > MAX_SCHEMA_BYTES:
        raise ValueError(f"must be at most {MAX_SCHEMA_BYTES} bytes as JSON")
    try:
        validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except SchemaError as err:
        where = ".".join(str(p) for p in err.path)
        raise ValueError(f"not a valid JSON Schema{f' at {where}' if where else ''}: {err.message}") from None
    return schema


class EventTypeDeclaration(BaseModel):
    """A `save_event_type` body."""

    model_config = ConfigDict(extra="forbid", strict=True, serialize_by_alias=True)

    name: str
    schema_: dict[str, Any] = Field(alias="schema")
    # The scopes that may emit it from outside (section 13): a key holding one of them, as written, may; None:
    # any `emit:` scope whose type glob matches it, or a `write:` scope on the whole session (`core.scopes`).
    allow: list[Annotated[str, AfterValidator(emitting_scope)]] | None = Field(default=None, max_length=50)
    description: str | None = Field(default=None, max_length=2000)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_type_name(value)

    @field_validator("schema_")
    @classmethod
    def _schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_schema(value)


# What is wrong with `data` under a schema, each named by its path from `field` (empty: it fits).
DataCheck = Callable[[Any, str], list[str]]


def data_check(schema: Mapping[str, Any]) -> DataCheck:
    """The check of `data` under `schema`, its validator built once (kept for the schemas seen last): building
    one per event was most of a bulk emit's time at the door, before the data was even looked at."""
    return _check_of(json.dumps(schema, sort_keys=True, separators=(",", ":")))


@functools.lru_cache(maxsize=256)
def _check_of(canonical: str) -> DataCheck:
    schema = json.loads(canonical)
    validator = validator_for(schema, default=Draft202012Validator)(schema)
    # A plain schema's yes is decided by a compiled check; a no, and any other schema, by jsonschema.
    fits = fast_check(schema) or validator.is_valid

    def check(data: Any, field: str) -> list[str]:
        if fits(data):
            return []
        errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
        return [
            f"{'.'.join([field, *(str(p) for p in e.absolute_path)])}: {e.message}"[:500] for e in errors[:MAX_ERRORS]
        ]

    return check


def can_hold(schema: Any, path: Sequence[str]) -> bool:
    """Whether a value under `schema` can have something at `path` (segments below `data`).

    Refuses only what the schema rules out for certain: a property it does not list where no others are
    allowed, a step into a value that can only be a string, number, boolean or null. Whatever it cannot read
    for certain (references, conditionals) it lets through.
    """
    if not path:
        return True
    if not isinstance(schema, dict):
        return schema is not False
    branches = [b for key in ("anyOf", "oneOf") for b in schema.get(key, [])]
    if branches and not any(can_hold(b, path) for b in branches):
        return False
    if any(not can_hold(b, path) for b in schema.get("allOf", [])):
        return False
    if "$ref" in schema or "if" in schema or "$dynamicRef" in schema:
        return True
    kinds = schema.get("type")
    kinds = {kinds} if isinstance(kinds, str) else set(kinds or [])
    head, rest = path[0], path[1:]
    if kinds and not kinds & {"object", "array"}:
        return False
    if "object" in kinds or "properties" in schema or not kinds:
        properties = schema.get("properties", {})
        if head in properties:
            return can_hold(properties[head], rest)
        for pattern, sub in schema.get("patternProperties", {}).items():
            if re.search(pattern, head):
                return can_hold(sub, rest)
        additional = schema.get("additionalProperties", True)
        if additional is not False and ("object" in kinds or not kinds):
            return can_hold(additional, rest) if isinstance(additional, dict) else True
    if ("array" in kinds or not kinds) and head.isdigit():
        items = schema.get("items", True)
        return can_hold(items, rest) if isinstance(items, dict) else items is not False
    return False


def why_data_unresolvable(path: str, schemas: Iterable[Mapping[str, Any]]) -> str | None:
    """Why no event of these declared types can carry `path` (`data.<...>`), or None when one can."""
    field, _, rest = path.partition(".")
    if field != "data" or not rest:
        return None
    segments = rest.split(".")
    listed = list(schemas)
    if not listed or any(can_hold(schema, segments) for schema in listed):
        return None
    return "no declared type of the listener's has it in its schema"
