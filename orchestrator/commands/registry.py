"""The command registry: a name, the pydantic model that validates its arguments, and its handler.

Owns how a raw JSON command becomes a validated request and a reply. Handlers live in modules named for
what they act on (sessions, objects, threads, listeners, events) and register themselves here, with what
their reply holds and the errors they answer besides `invalid_request`: the reference (`docs/commands.md`,
`GET /v1/schema`, `orchestrator call --help`) is generated from this registry (`reference.py`).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from orchestrator.causes import caused_by, request_cause
from orchestrator.commands.access import LOCAL, Caller, authorize, calling
from orchestrator.commands.fields import decoded_from
from orchestrator.core.errors import CommandError, ErrorCode
from orchestrator.core.validation import field_errors_message

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext


class Request(BaseModel):
    """The arguments every command shares; each command's model adds its own."""

    model_config = ConfigDict(extra="forbid", strict=True, serialize_by_alias=True)

    command: str


R = TypeVar("R", bound=Request)
Handler = Callable[["CommandContext", Any], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class CommandSpec:
    model: type[Request]
    handler: Handler
    # What a success reply holds, in a line (`session {id, alias, status}`), for the reference.
    reply: str = ""
    # The error codes it answers besides `invalid_request` (which every command answers), for the reference.
    errors: tuple[ErrorCode, ...] = ()
    # A body of the command, as the reference shows it (`ses_...` stands for a session's id); the test suite
    # sends each one through the HTTP door (tests/docs/test_commands_examples.py).
    example: dict[str, Any] | None = None


COMMANDS: dict[str, CommandSpec] = {}

# How deep a command's JSON may nest. Far beyond any real value, and far below what would exhaust Python's
# stack in the validation, the JSON encoding and the templates a value goes through.
MAX_JSON_DEPTH = 100


# JSON text's strings (its brackets are outside them), its innermost empty containers, and all but brackets.
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_INNERMOST = re.compile(rb"\{\}|\[\]")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
# A JSON number a double cannot hold (it decodes to infinity): an exponent of three digits or more, or a run of
# 309 digits. Some of what it finds is in range (`1e100`); those are only walked.
_HUGE_NUMBER = re.compile(rb"[eE]\+?0*[0-9]{3}|[0-9]{309}")


def may_hold_trouble(raw: bytes, limit: int) -> bool:
    """Whether valid JSON text could decode to what `json_trouble` refuses, read from the text in C-speed passes
    (a bulk write's walk cost the door 8 us an item): a NUL is written `\\u0000` (a raw control character is
    not JSON), a number that decodes to infinity has an exponent of three digits or 309 digits in a row, and
    the nesting is the brackets' once strings are cut, each pass taking off the innermost."""
    if b"\\u0000" in raw:
        return True
    bare = _JSON_STRING.sub(b"", raw)
    if _HUGE_NUMBER.search(bare):
        return True
    skeleton = bare.translate(None, _NOT_BRACKETS)
    for _ in range(limit):
        if not skeleton:
            return False
        skeleton = _INNERMOST.sub(b"", skeleton)
    return bool(skeleton)


def json_trouble(body: dict[str, Any], limit: int) -> str | None:
    """What no command may hold, as the refusal's message, or None: JSON nested deeper than `limit`, or a NUL
    character in a string or a key (PostgreSQL's text cannot hold one). Walked without recursion; a path is
    spelled out only for a container or a string found wanting."""
    stack: list[tuple[Any, str, Any, int]] = [(body, "", None, 0)]
    while stack:
        item, parent, key, depth = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return f"{_joined(parent, key)}: a NUL character (\\u0000) cannot be stored"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{_joined(parent, key)}: a number beyond a double's range (or NaN) cannot be stored"
        elif isinstance(item, dict | list):
            if depth + 1 > limit:
                return f"body: JSON nested deeper than {limit} levels"
            path = _joined(parent, key) if key is not None else parent
            if isinstance(item, dict):
                for name, child in item.items():
                    if isinstance(name, str) and "\x00" in name:
                        return f"{path or 'body'}: a NUL character (\\u0000) cannot be stored, in the key {name!r}"
                    stack.append((child, path, name, depth + 1))
            else:
                stack.extend((child, path, index, depth + 1) for index, child in enumerate(item))
    return None


def _joined(parent: str, key: Any) -> str:
    return f"{parent}.{key}" if parent else str(key)


def command(
    name: str,
    model: type[R],
    *,
    reply: str = "",
    errors: tuple[ErrorCode, ...] = (),
    example: dict[str, Any] | None = None,
) -> Callable[[Callable[[CommandContext, R], Awaitable[dict[str, Any]]]], Handler]:
    """Register the decorated handler for `name`, its arguments validated by `model`; `reply`, `errors` and
    `example` (and the handler's docstring) are what the reference says of it."""

    def register(handler: Callable[[CommandContext, R], Awaitable[dict[str, Any]]]) -> Handler:
        COMMANDS[name] = CommandSpec(model, handler, reply, errors, example)
        return handler

    return register


def unknown_command(name: str) -> CommandError:
    """The refusal of a command name the registry does not hold: the nearest names, then every valid one."""
    near = difflib.get_close_matches(name, COMMANDS, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(n) for n in near)}?" if near else "."
    return CommandError(
        "invalid_request", f"command: unknown command {name!r}{hint} The commands are: {', '.join(sorted(COMMANDS))}"
    )


async def dispatch(
    platform: CommandContext, body: Any, caller: Caller | None = None, raw: bytes | None = None
) -> dict[str, Any]:
    """Validate and run one command; a `caller` (a door that checks keys) is authorized first. `raw`: the JSON
    text `body` was decoded from, when the door has it."""
    if not isinstance(body, dict):
        raise CommandError("invalid_request", "body: a command is a JSON object")
    if raw is None or may_hold_trouble(raw, MAX_JSON_DEPTH):
        trouble = json_trouble(body, MAX_JSON_DEPTH)
        if trouble is not None:
            raise CommandError("invalid_request", trouble)
    name = body.get("command")
    if not isinstance(name, str):
        raise CommandError("invalid_request", "command: required, the command's name as a string")
    spec = COMMANDS.get(name)
    if spec is None:
        raise unknown_command(name)
    try:
        request = spec.model.model_validate(body)
    except ValidationError as err:
        raise CommandError("invalid_request", field_errors_message(err, "")) from None
    if caller is not None:
        await authorize(platform, caller, name, request)
    # What the command writes was caused by this request, made with this key (unless a run or a listener acts
    # through it: they call the store, not the commands).
    client = getattr(request, "client", None)
    key = caller.principal.name if caller is not None else LOCAL
    cause = request_cause(client if isinstance(client, str) else None, key)
    with caused_by(cause), calling(caller), decoded_from(None if raw is None else len(raw)):
        reply = await spec.handler(platform, request)
    return {"status": "success", **reply}
