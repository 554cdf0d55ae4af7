"""The reference of the commands, read off the registry: a JSON Schema per command and for a listener body, and
each command's arguments (type, default, bounds, meaning), summary, reply and errors.

Owns turning the pydantic models into what people and editors read; `docs/commands.md`, `GET /v1/schema` and
`orchestrator call --help` all come from here (the markdown and the terminal text are `reference_text`'s),
so the reference cannot drift from what the commands validate. An argument's meaning is its field's
`description`, else the shared one for its name below. What a command answers is read off its reply model the
same way (`reply_schema`, and `reply_line` for the line the reference shows), so it cannot drift from what the
suite checks each reply against (`replies.py`).
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orchestrator.commands.registry import COMMANDS, CommandSpec
from orchestrator.core.declaration import ListenerDeclaration

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
# A shape documented on a page of its own rather than field by field under each command that takes it.
LINKED_SHAPES = {
    "ListenerDeclaration": "a listener body (docs/listeners.md; JSON Schema at `GET /v1/schema/listener`)",
}
# What an argument means when its field says nothing: the names every command uses the same way.
SHARED_MEANINGS = {
    "command": "the command's name",
    "session_id": "the session's id (`ses_...`), as `open_session` answers it",
    "client": "the caller's client id, kept in the event's `source.client` (a listener may leave its own out)",
    "idempotency_key": "a retry with the same key answers the first request's result instead of writing again; the"
    " key of another write of the session is refused",
    "name": "the listener's name",
    "listener": "the listener's name",
}

# What each error code means, for the reference page and the OpenAPI document (their HTTP status is the door's).
ERROR_MEANINGS = {
    "invalid_request": "the body, or a field of it, is wrong; the message starts with the field. Nothing changed.",
    "not_found": "what the command names (a session, an object, a listener, a batch) is not there",
    "session_not_open": "the session is closed (`reopen_session` opens it again)",
    "rev_conflict": "`if_rev` is not the stored rev",
    "limit_exceeded": "a deployment limit refuses the request as it is (a payload's size, runs at once, a range)",
    "access_denied": "outside the scopes of the caller's key (or what schedules may write); nothing changed",
    "unauthorized": "HTTP only: no key, or one that is wrong, revoked or expired (401); a browser session's request"
    " without its CSRF token (403)",
    "past_retention": "the history asked about was there, and retention has deleted it",
    "rate_limited": "over the key's request rate or the session's write rate; `Retry-After` says when to come back",
    "unavailable": (
        "the database or Temporal is out of reach for now (stopped, restarting, a pooler down, or no answer within"
        " the door's deadline; the message names which); `Retry-After` says when to try again. A write whose"
        " connection broke at its commit, or cut at the deadline, may have been made (the message says so):"
        " retried with its `idempotency_key`, it is not made twice"
    ),
    "internal_error": "the platform failed; the message says no more, the logs do",
}


@dataclass(frozen=True)
class Argument:
    """One field of a command or of a shape it takes, as the reference shows it."""

    name: str
    type: str
    required: bool
    default: str | None
    bounds: str
    meaning: str


@dataclass(frozen=True)
class Shape:
    """A nested object a command takes (`ThreadItem` in `post_thread_item`), with its own fields."""

    name: str
    meaning: str
    arguments: tuple[Argument, ...]


@dataclass(frozen=True)
class CommandReference:
    name: str
    summary: str
    arguments: tuple[Argument, ...]
    shapes: tuple[Shape, ...]
    reply: str
    errors: tuple[str, ...]
    group: str
    example: dict[str, Any] | None = None


def schema_without(schema: Any, drop: Callable[[str, Any], bool], *, in_mapping: bool = False) -> Any:
    """`schema` without the keywords `drop` names (by keyword and value), at every level; a name in `properties` or
    `$defs` is a name, not a keyword, and stays."""
    if isinstance(schema, list):
        return [schema_without(item, drop) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if in_mapping:
        return {key: schema_without(value, drop) for key, value in schema.items()}
    return {
        key: schema_without(value, drop, in_mapping=key in ("properties", "$defs"))
        for key, value in schema.items()
        if not drop(key, value)
    }


def _without_titles(schema: Any) -> Any:
    """`schema` without pydantic's generated `title`s ("Session Id"): noise beside the names themselves."""
    return schema_without(schema, lambda key, value: key == "title" and isinstance(value, str))


def summary_of(spec: CommandSpec) -> str:
    """The handler's docstring, as one paragraph."""
    return " ".join(inspect.cleandoc(spec.handler.__doc__ or "").split())


_KEYWORDS_OF_KIND = ("type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "not")


def _admits_null(schema: dict[str, Any]) -> bool:
    if not any(key in schema for key in _KEYWORDS_OF_KIND):
        return True  # any JSON
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if None in schema.get("enum", ()) or ("const" in schema and schema["const"] is None):
        return True
    return any(_admits_null(option) for key in ("anyOf", "oneOf") for option in schema.get(key, ()))


def _defaults_fit(schema: dict[str, Any]) -> None:
    """An argument checked by its handler (`SchemaOf`) defaults to null whatever it must hold: a required one
    has no default, and an optional one admits the null it defaults to (leaving it out, or null, changes
    nothing)."""
    required = set(schema.get("required", ()))
    for name, field in schema.get("properties", {}).items():
        if "default" not in field or field["default"] is not None or _admits_null(field):
            continue
        if name in required:
            del field["default"]
            continue
        shape = {key: value for key, value in field.items() if key not in ("default", "description")}
        for key in shape:
            del field[key]
        field["anyOf"] = [shape, {"type": "null"}]


def command_schema(name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one command's body."""
    spec = COMMANDS[name]
    schema = _without_titles(spec.model.model_json_schema())
    schema["properties"]["command"] = {"const": name, "description": SHARED_MEANINGS["command"]}
    _defaults_fit(schema)
    return {"$schema": JSON_SCHEMA_DIALECT, "title": name, "description": summary_of(spec), **schema}


def listener_schema() -> dict[str, Any]:
    """The JSON Schema of a listener body, as `save_listener` takes it."""
    schema = _without_titles(ListenerDeclaration.model_json_schema())
    return {
        "$schema": JSON_SCHEMA_DIALECT,
        "title": "listener",
        "description": "A listener declaration body (docs/listeners.md). The save also checks what a schema "
        "cannot say: paths against the event types, `owns`, the deployment's limits.",
        **schema,
    }


def reply_schema(name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one command's success reply, titled with its model's name."""
    model = COMMANDS[name].reply
    return {"$schema": JSON_SCHEMA_DIALECT, "title": model.__name__, **_without_titles(model.model_json_schema())}


# How deep the reference's line of a reply names nested fields; deeper objects show as `{...}`.
REPLY_LINE_DEPTH = 2


def shapes_by_name(schemas: list[dict[str, Any]]) -> dict[str, Any]:
    """Every `$defs` shape of these schemas, by name, for the clients' generated types: one name is one shape."""
    shapes: dict[str, Any] = {}
    for schema in schemas:
        for name, shape in schema.get("$defs", {}).items():
            if shapes.setdefault(name, shape) != shape:
                raise ValueError(f"two shapes are named {name!r}: the generated types would confuse them")
    return shapes


def reply_line(schema: dict[str, Any]) -> str:
    """A reply's fields in a line, from its schema: `` `object` {alias, rev}, `event_id` (its event), `explain`? ``
    (`?`: answered only sometimes; a value in parentheses: the field's description), then the model's own
    description."""
    defs: dict[str, Any] = schema.get("$defs", {})
    words = _fields_words(schema, defs, 0)
    note = " ".join(str(schema.get("description", "")).split()).rstrip(".")
    return f"{words}. {note}" if note else words


def _fields_words(schema: dict[str, Any], defs: dict[str, Any], depth: int) -> str:
    required = set(schema.get("required", ()))
    words = []
    for name, field in schema.get("properties", {}).items():
        if depth == 0 and name == "status":
            continue
        shown = f"`{name}`" if depth == 0 else name
        mark = "" if name in required else "?"
        meaning = " ".join(str(field.get("description", "")).split())
        words.append(f"{shown}{mark}{_shape_words(field, defs, depth)}{f' ({meaning})' if meaning else ''}")
    if schema.get("additionalProperties") is True:
        words.append("...")
    return ", ".join(words)


def _resolved(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its `$ref` followed and a null it admits left out (`X | None`)."""
    options = [option for option in schema.get("anyOf", ()) if option.get("type") != "null"]
    if len(options) == 1:
        schema = options[0]
    name = _ref_name(schema)
    if name is None:
        return schema
    found: dict[str, Any] = defs.get(name, {})
    return found


def _shape_words(field: dict[str, Any], defs: dict[str, Any], depth: int) -> str:
    """What a field holds, when it is more than a value: ` {a, b}`, ` [{a, b}]`, `: value` for a constant."""
    shape = _resolved(field, defs)
    if "const" in shape:
        return f": {json.dumps(shape['const'])}"
    if shape.get("type") == "array":
        inner = _shape_words(shape.get("items", {}), defs, depth)
        return f" [{inner.strip()}]" if inner.startswith(" {") else ""
    if "properties" not in shape:
        return ""
    if depth + 1 >= REPLY_LINE_DEPTH:
        return " {...}"
    return f" {{{_fields_words(shape, defs, depth + 1)}}}"


@functools.cache
def schema_index() -> dict[str, Any]:
    """Every schema at once: `GET /v1/schema` (built once: the registry is fixed once imported). Not to be
    changed by its callers."""
    return {
        "listener": listener_schema(),
        "commands": {name: command_schema(name) for name in sorted(COMMANDS)},
    }


def _ref_name(schema: dict[str, Any]) -> str | None:
    ref = schema.get("$ref")
    return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _number_bounds(schema: dict[str, Any]) -> str:
    low = (
        f">= {_number(schema['minimum'])}"
        if "minimum" in schema
        else f"> {_number(schema['exclusiveMinimum'])}"
        if "exclusiveMinimum" in schema
        else ""
    )
    high = (
        f"<= {_number(schema['maximum'])}"
        if "maximum" in schema
        else f"< {_number(schema['exclusiveMaximum'])}"
        if "exclusiveMaximum" in schema
        else ""
    )
    return ", ".join(part for part in (low, high) if part)


def _count_bounds(schema: dict[str, Any], low_key: str, high_key: str, unit: str) -> str:
    low, high = schema.get(low_key), schema.get(high_key)
    if low is not None and high is not None:
        return f"{low} to {high} {unit}"
    if low is not None:
        return f"at least {low} {unit}"
    if high is not None:
        return f"at most {high} {unit}"
    return ""


def describe_type(schema: dict[str, Any], defs: dict[str, Any]) -> tuple[str, str]:
    """A schema's type and its bounds, in words: ("array of string", "at least 1 item")."""
    if not schema:
        return "any JSON", ""
    name = _ref_name(schema)
    if name is not None:
        target = defs.get(name, {})
        return ("any JSON", "") if not target else (name, "")
    if schema.get("title") in LINKED_SHAPES or schema.get("$id") in LINKED_SHAPES:
        return "listener body", ""
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [option for option in schema[key] if option.get("type") != "null"]
            described = [describe_type(option, defs) for option in options]
            if len(described) == 1:
                return described[0]
            return " or ".join(kind for kind, _ in described), "; ".join(b for _, b in described if b)
    if "const" in schema:
        return json.dumps(schema["const"]), ""
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(value) for value in schema["enum"]), ""
    kind = schema.get("type")
    if kind == "string":
        bounds = [_count_bounds(schema, "minLength", "maxLength", "characters")]
        if "pattern" in schema:
            bounds.append(f"matching `{schema['pattern']}`")
        return "string", ", ".join(b for b in bounds if b)
    if kind in ("integer", "number"):
        return str(kind), _number_bounds(schema)
    if kind == "boolean":
        return "boolean", ""
    if kind == "array":
        item, item_bounds = describe_type(schema.get("items", {}), defs)
        bounds = [_count_bounds(schema, "minItems", "maxItems", "items")]
        if item_bounds:
            bounds.append(f"each {item_bounds}")
        return f"array of {item}", ", ".join(b for b in bounds if b)
    if kind == "object":
        values = schema.get("additionalProperties")
        size = _count_bounds(schema, "minProperties", "maxProperties", "keys")
        if isinstance(values, dict) and values:
            value, value_bounds = describe_type(values, defs)
            return f"object of {value}", ", ".join(b for b in (size, value_bounds) if b)
        return "object", size
    return "any JSON", ""


def arguments_of(schema: dict[str, Any], defs: dict[str, Any]) -> tuple[Argument, ...]:
    """The fields of an object schema, in the model's order."""
    required = set(schema.get("required", ()))
    found = []
    for name, field in schema.get("properties", {}).items():
        kind, bounds = describe_type(field, defs)
        # A default of null is no default: the argument is optional.
        default = None if field.get("default") is None or name in required else json.dumps(field["default"])
        meaning = field.get("description") or _ref_description(field, defs) or SHARED_MEANINGS.get(name, "")
        found.append(Argument(name, kind, name in required, default, bounds, " ".join(meaning.split())))
    return tuple(found)


def _ref_description(field: dict[str, Any], defs: dict[str, Any]) -> str:
    name = _ref_name(field)
    if name is None:
        return ""
    first = str(defs.get(name, {}).get("description", "")).split("\n\n", 1)[0]
    return first


def _shapes(schema: dict[str, Any]) -> tuple[Shape, ...]:
    """The nested objects a command's arguments name ($defs), in the order they are first met, but for a
    shape with a page of its own (a listener body)."""
    defs: dict[str, Any] = schema.get("$defs", {})
    order: list[str] = []

    def visit(node: Any, *, inside_linked: bool = False) -> None:
        if isinstance(node, list):
            for item in node:
                visit(item, inside_linked=inside_linked)
            return
        if not isinstance(node, dict):
            return
        linked = inside_linked or node.get("title") in LINKED_SHAPES
        name = _ref_name(node)
        if name is not None and name not in order and not linked and defs.get(name):
            order.append(name)
            visit(defs[name])
        for key, value in node.items():
            if key != "$defs":
                visit(value, inside_linked=linked)

    visit(schema.get("properties", {}))
    return tuple(
        Shape(name, " ".join(str(defs[name].get("description", "")).split()), arguments_of(defs[name], defs))
        for name in order
    )


def reference(name: str) -> CommandReference:
    """What the reference says of one command."""
    spec = COMMANDS[name]
    raw = spec.model.model_json_schema()
    defs = raw.get("$defs", {})
    arguments = tuple(a for a in arguments_of(raw, defs) if a.name != "command")
    group = spec.handler.__module__.rsplit(".", 1)[-1]
    errors = ("invalid_request", *spec.errors)
    reply = reply_line(reply_schema(name))
    return CommandReference(name, summary_of(spec), arguments, _shapes(raw), reply, errors, group, spec.example)
