"""The application's own event types: a dotted name, a JSON Schema for `data`, who may emit it from outside.

Owns the rules of a declared type (SPEC section 12): its name (dotted lower-case segments, never one of the
platform's own families), its schema (valid JSON Schema, at most `MAX_SCHEMA_BYTES`, checked when saved),
an emitted event's `data` against it (each failure named by its path, `data.items.0.sku`), and whether a
path into `data` can ever be held by it (a listener's `where`, key or `distinct_by` that could not is
refused at save). Storing and emitting are the store's and the commands'.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any

from jsonschema import Draft202012Validator, SchemaError
from jsonschema.validators import validator_for
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from referencing import Registry, Resource, Specification
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012, specification_with

from orchestrator.core.fast_schemas import fast_check
from orchestrator.core.linear_equality import linear
from orchestrator.core.linear_patterns import refused_patterns, search
from orchestrator.core.scopes import emitting_scope
from orchestrator.core.validation import FieldProblem

if TYPE_CHECKING:
    from referencing._core import Resolver  # what `Registry.resolver` answers (not exported by name)

# The families of the platform's own events: a declared name may not start with one of them.
PLATFORM_FAMILIES = frozenset({"object", "thread", "execution", "graph", "listener", "lane", "session", "schedule"})
MAX_SCHEMA_BYTES = 64 * 1024
MAX_ERRORS = 5
# How many of the data's failures are read to choose those said (the first by path): each is a message, and an
# array of 20,000 values outside an enum of 5,000 made 500 MB of them.
ERRORS_READ = 100
_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")


def check_type_name(name: str) -> str:
    if len(name) > 128 or not _NAME.fullmatch(name):
        raise ValueError("must be dotted lower-case segments (letters, digits, _), at least two: 'ticket.escalated'")
    family = name.split(".")[0]
    if family in PLATFORM_FAMILIES:
        raise ValueError(f"the {family}.* types are the platform's own")
    return name


def check_schema(schema: Any, *, held: bool = False) -> dict[str, Any]:
    """A JSON Schema (an object), valid for the draft it names (2020-12 when it names none), whose references
    all lead somewhere inside it and never back to where they began without a step into the value, and whose
    patterns RE2 matches (`held`: the type holds this schema already, saved before that rule: kept as it is)."""
    if not isinstance(schema, dict):
        raise ValueError("must be a JSON Schema object")
    if not isinstance(schema.get("$schema", ""), str):
        raise ValueError("$schema: must be a string (the draft's URI)")
    if len(json.dumps(schema, separators=(",", ":"))) > MAX_SCHEMA_BYTES:
        raise ValueError(f"must be at most {MAX_SCHEMA_BYTES} bytes as JSON")
    try:
        validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except SchemaError as err:
        where = ".".join(str(p) for p in err.path)
        raise ValueError(f"not a valid JSON Schema{f' at {where}' if where else ''}: {err.message}") from None
    for where, why in () if held else refused_patterns(schema):
        raise FieldProblem(where, why)
    kinds = schema.get("type")
    if kinds is not None and "object" not in ([kinds] if isinstance(kinds, str) else kinds):
        # An event's data is a JSON object (`emit_event.data`): a type that takes none could never be emitted.
        raise FieldProblem("type", "an event's data is a JSON object: the schema's type must take 'object'")
    _check_references(schema)
    return schema


# Keywords whose subschemas apply to the value itself, not to a part of it: a cycle through these alone never ends.
_SAME_VALUE_LISTS = ("allOf", "anyOf", "oneOf")
_SAME_VALUE_ONE = ("not", "if", "then", "else")
_SAME_VALUE_MAPS = ("dependentSchemas",)
_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")


def _root_resolver(schema: dict[str, Any]) -> tuple[Specification[Any], Resource[Any], Resolver[Any]]:
    """The schema's draft, the schema as a resource of it, and a resolver of references within it alone: nothing is
    ever fetched."""
    specification = specification_with(schema.get("$schema", DRAFT202012.id_of({}) or ""), default=DRAFT202012)
    resource = specification.create_resource(schema)
    base = resource.id() or ""
    return specification, resource, Registry().with_resource(base, resource).resolver(base_uri=base)


def _check_references(schema: dict[str, Any]) -> None:
    """Every `$ref` resolves inside the schema, and no chain of references (and of keywords that apply to the same
    value) leads back to where it began: such a schema can never finish checking a value."""
    specification, resource, resolver = _root_resolver(schema)
    same_value: dict[int, list[tuple[Any, Resolver[Any]]]] = {}
    pending = [(resource, resolver)]
    while pending:
        current, where = pending.pop()
        contents = current.contents
        if isinstance(contents, dict) and id(contents) not in same_value:
            nexts: list[tuple[Any, Resolver[Any]]] = []
            for keyword in _REFERENCES:
                ref = contents.get(keyword)
                if isinstance(ref, str):
                    try:
                        found = where.lookup(ref)
                    except Unresolvable:
                        raise ValueError(
                            f"{keyword} {ref!r} leads nowhere inside the schema (a schema may refer only to itself)"
                        ) from None
                    nexts.append((found.contents, found.resolver))
                    # Walked too: a reference may lead where the draft's own walk does not go (a key it does not
                    # know, `$defs` in draft 7).
                    pending.append((specification.create_resource(found.contents), found.resolver))
            nexts += [(sub, where) for key in _SAME_VALUE_LISTS for sub in contents.get(key) or []]
            nexts += [(contents[key], where) for key in _SAME_VALUE_ONE if key in contents]
            nexts += [(sub, where) for key in _SAME_VALUE_MAPS for sub in (contents.get(key) or {}).values()]
            same_value[id(contents)] = nexts
            for sub in current.subresources():
                pending.append((sub, where.in_subresource(sub)))
    _refuse_cycles(same_value)


def _refuse_cycles(same_value: dict[int, list[tuple[Any, Resolver[Any]]]]) -> None:
    done: set[int] = set()
    for start in same_value:
        if start in done:
            continue
        on_path: set[int] = {start}
        stack = [(start, iter(same_value[start]))]
        while stack:
            node, edges = stack[-1]
            step = next(edges, None)
            if step is None:
                stack.pop()
                on_path.discard(node)
                done.add(node)
                continue
            target = id(step[0])
            if target in on_path:
                raise ValueError("$ref: a reference leads back to where it began without a step into the value")
            if target not in done and target in same_value:
                on_path.add(target)
                stack.append((target, iter(same_value[target])))


# The validation context's key for the schema a type holds now (`EventTypeDeclaration`).
HELD = "held_schema"


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
    def _schema(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        # `held`, in the context: the schema the type holds now (`HELD`), which is kept as it is.
        return check_schema(value, held=value == (info.context or {}).get(HELD))


# What is wrong with `data` under a schema, each named by its path from `field` (empty: it fits).
DataCheck = Callable[[Any, str], list[str]]


def data_check(schema: Mapping[str, Any]) -> DataCheck:
    """The check of `data` under `schema`, its validator built once (kept for the schemas seen last): building
    one per event was most of a bulk emit's time at the door, before the data was even looked at."""
    return _check_of(json.dumps(schema, sort_keys=True, separators=(",", ":")))


@functools.lru_cache(maxsize=256)
def _check_of(canonical: str) -> DataCheck:
    schema = json.loads(canonical)
    # An empty registry: a reference outside the schema is never fetched.
    # `enum` and `uniqueItems` decided in linear time (`linear_equality`).
    validator = linear(validator_for(schema, default=Draft202012Validator))(schema, registry=Registry())
    # A plain schema's yes is decided by a compiled check; a no, and any other schema, by jsonschema.
    fits = fast_check(schema) or validator.is_valid

    def check(data: Any, field: str) -> list[str]:
        try:
            if fits(data):
                return []
            found = itertools.islice(validator.iter_errors(data), ERRORS_READ)
            errors = sorted(found, key=lambda e: [str(p) for p in e.absolute_path])
        except (Unresolvable, RecursionError) as err:
            # A type saved before its references were checked at save: it can hold no event until saved again.
            return [
                f"{field}: the type's schema cannot be applied ({type(err).__name__}: it refers to itself without end,"
                " or to what it does not hold); save the type with one that can"
            ]
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
            if search(pattern, head):
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
