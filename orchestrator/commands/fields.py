"""Argument types the commands share: ids, aliases, JSON values and their size limits.

Owns the checks that every door needs the same way: an alias's syntax (via the core's `validate_alias`),
and that a payload fits `max_payload_bytes` (weighed by the core's `written.py`, which also holds the object
value's and the thread item's models); and
`SchemaOf`, the JSON Schema of an argument a command takes as any JSON and validates itself (a listener
body, a schedule's `repeat`), so the reference shows its real shape.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from orchestrator.core.errors import CommandError
from orchestrator.core.globs import ALIAS_RE, MAX_ALIAS_CHARS, validate_alias
from orchestrator.core.json_checks import MAX_JSON_DEPTH, json_trouble
from orchestrator.core.limits import MAX_WRITES_PER_REQUEST
from orchestrator.core.validation import field_errors_message
from orchestrator.core.written import payload_problem


@dataclass(frozen=True)
class SchemaOf:
    """Annotates an argument validated by the handler (so that its errors name fields the handler's way) with
    the JSON Schema of what it must hold: `Annotated[Any, SchemaOf(ListenerDeclaration)]`. Built only when a
    schema is asked for, so it costs a command's import nothing."""

    shape: Any

    def __get_pydantic_json_schema__(self, core: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return handler(TypeAdapter(self.shape).core_schema)


SessionId = Annotated[str, StringConstraints(min_length=1, max_length=64)]


class _SessionOf(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    session_id: SessionId


def session_id_of(given: Mapping[str, Any]) -> str:
    """The `session_id` a door takes outside a command (a stream's path, a ticket's body), refused as a command's
    would be (`json_trouble`, then the field's type, and a field it does not know), naming the field: a NUL must
    not reach the store."""
    value = dict(given)
    trouble = json_trouble(value, MAX_JSON_DEPTH)
    if trouble is not None:
        raise CommandError("invalid_request", trouble)
    try:
        return _SessionOf.model_validate(value).session_id
    except ValidationError as err:
        raise CommandError("invalid_request", field_errors_message(err, "")) from None


# The schema says what `validate_alias` checks but for its one rule a pattern cannot say simply (no `.` or
# `..` segment).
Alias = Annotated[
    str,
    AfterValidator(validate_alias),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_ALIAS_CHARS,
            "pattern": ALIAS_RE.pattern,
            "description": "an alias: `/`-separated segments of letters, digits and `_.:@-`, no `.` or `..` segment",
        }
    ),
]
# The start of an alias: what an alias may hold, cut anywhere (so a trailing `/` is fine).
AliasPrefix = Annotated[str, StringConstraints(max_length=MAX_ALIAS_CHARS, pattern=r"^[A-Za-z0-9_.:@/-]*$")]
ClientId = Annotated[str, StringConstraints(min_length=1, max_length=128)]
IdempotencyKey = Annotated[str, StringConstraints(min_length=1, max_length=200)]
Limit = Annotated[int, Field(ge=1, le=1000)]
# Ids are PostgreSQL bigints and revs integers: a number past the largest could never name anything, and is
# refused as bad input rather than failing in the database.
MAX_BIGINT = 2**63 - 1
MAX_INTEGER = 2**31 - 1
EventId = Annotated[int, Field(ge=1, le=MAX_BIGINT)]
# A place in a stream: 0 is before its first event.
Position = Annotated[int, Field(ge=0, le=MAX_BIGINT)]
Rev = Annotated[int, Field(ge=0, le=MAX_INTEGER)]
# What the schemas say of a bulk write's list (`emit_events`, `write_objects`, `post_thread_items`); each command
# checks the deployment's `max_writes_per_request`, itself within MAX_WRITES_PER_REQUEST.
BULK = f"at most the deployment's max_writes_per_request (1,000 unless set; never over {MAX_WRITES_PER_REQUEST:,})"
# What a bulk write's `idempotency_key` means (`write_objects`, `post_thread_items`): one key for the request.
BULK_KEY = (
    "the request's key, its writes keyed `<key>:<index>`: a retry with the same key answers the first request's result"
    " instead of writing again; a request with a write the first did not make, or the key of another write of the"
    " session (the single form's too), is refused"
)
ListenerName = Annotated[str, StringConstraints(min_length=1, max_length=64)]


# The size of the JSON text a command was decoded from, when a door read it whole (None: handed a value).
_BODY_BYTES: ContextVar[int | None] = ContextVar("body_bytes", default=None)


@contextmanager
def decoded_from(size: int | None) -> Iterator[None]:
    """While a command decoded from `size` bytes of JSON runs: its values need no encoding to be weighed."""
    token = _BODY_BYTES.set(size)
    try:
        yield
    finally:
        _BODY_BYTES.reset(token)


def check_payload(field: str, value: Any, max_bytes: int, *, in_body: bool = True) -> None:
    """Refuse a payload that is not JSON, or larger than the deployment's limit, naming the field.

    `in_body`: the value is one of the command's as decoded. One decoded from a body of `n` bytes weighs at most
    4.5n: when that fits the limit it is not encoded again to be weighed, which a bulk write paid for every item.
    """
    body = _BODY_BYTES.get()
    # 4.5 is the most a token grows as weighed (`payload_problem`'s encoding): a float's repr writes an exponent
    # up to 15 in full, `1e15` (4 bytes) as `1000000000000000.0` (18); from 16 and below -4 it keeps the exponent
    # (`1e16` is `1e+16`). A string never grows: an escape stands for a character of fewer UTF-8 bytes, or is
    # written again as itself (a control character comes escaped or the body is refused); separators stay one
    # byte, whitespace goes. A factor of 3 let a body of `1e15`s through at 3.8 times the limit's share.
    if in_body and body is not None and 9 * body <= 2 * max_bytes:
        return
    problem = payload_problem(field, value, max_bytes)
    if problem is not None:
        raise CommandError(*problem)
