"""Argument types the commands share: ids, aliases, JSON values and their size limits.

Owns the checks that every door needs the same way: an alias's syntax (via the core's `validate_alias`),
that an object value is a JSON object with a `type`, and that a payload fits `max_payload_bytes`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import AfterValidator, Field, StringConstraints

from orchestrator.core.errors import CommandError
from orchestrator.core.globs import MAX_ALIAS_CHARS, validate_alias

SessionId = Annotated[str, StringConstraints(min_length=1, max_length=64)]
Alias = Annotated[str, AfterValidator(validate_alias)]
# The start of an alias: what an alias may hold, cut anywhere (so a trailing `/` is fine).
AliasPrefix = Annotated[str, StringConstraints(max_length=MAX_ALIAS_CHARS, pattern=r"^[A-Za-z0-9_.:@/-]*$")]
ClientId = Annotated[str, StringConstraints(min_length=1, max_length=128)]
IdempotencyKey = Annotated[str, StringConstraints(min_length=1, max_length=200)]
Limit = Annotated[int, Field(ge=1, le=1000)]
ListenerName = Annotated[str, StringConstraints(min_length=1, max_length=64)]


def _json_object_with_type(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object")
    if not isinstance(value.get("type"), str) or not value["type"]:
        raise ValueError("must have a non-empty string field 'type'")
    return value


ObjectValue = Annotated[dict[str, Any], AfterValidator(_json_object_with_type)]


def check_payload(field: str, value: Any, max_bytes: int) -> None:
    """Refuse a payload that is not JSON, or larger than the deployment's limit, naming the field."""
    if isinstance(value, str):
        size = len(value.encode())
    else:
        try:
            size = len(json.dumps(value, separators=(",", ":"), allow_nan=False).encode())
        except (TypeError, ValueError) as err:
            raise CommandError("invalid_request", f"{field}: not a JSON value ({err})") from None
    if size > max_bytes:
        raise CommandError("limit_exceeded", f"{field}: {size} bytes is over the payload limit of {max_bytes}")
