"""The command registry: a name, the pydantic model that validates its arguments, and its handler.

Owns how a raw JSON command becomes a validated request and a reply. Handlers live in modules named for
what they act on (sessions, objects, threads, listeners, events) and register themselves here, with the model
of their success reply (`replies.py`) and the errors they answer besides `invalid_request`: the reference
(`docs/commands.md`, `GET /v1/schema`, `orchestrator call --help`), the OpenAPI document and the TypeScript
client's types are generated from this registry (`reference.py`).
"""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from orchestrator.causes import caused_by, request_cause
from orchestrator.commands.access import LOCAL, Caller, authorize, calling
from orchestrator.commands.fields import decoded_from
from orchestrator.commands.replies import Reply, check_reply, checking_replies
from orchestrator.core.errors import CommandError, ErrorCode
from orchestrator.core.json_checks import MAX_JSON_DEPTH, json_trouble, may_hold_trouble
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
    # What a success reply holds: the reference's line (`session {id, alias, status}`), its JSON Schema, and the
    # TypeScript method's type are read off it.
    reply: type[Reply]
    # The error codes it answers besides `invalid_request` (which every command answers), for the reference.
    errors: tuple[ErrorCode, ...] = ()
    # A body of the command, as the reference shows it (`ses_...` stands for a session's id); the test suite
    # sends each one through the HTTP door (tests/docs/test_commands_examples.py).
    example: dict[str, Any] | None = None


COMMANDS: dict[str, CommandSpec] = {}


def command(
    name: str,
    model: type[R],
    *,
    reply: type[Reply],
    errors: tuple[ErrorCode, ...] = (),
    example: dict[str, Any] | None = None,
) -> Callable[[Callable[[CommandContext, R], Awaitable[dict[str, Any]]]], Handler]:
    """Register the decorated handler for `name`, its arguments validated by `model` and its success reply
    described by `reply`; `reply`, `errors` and `example` (and the handler's docstring) are what the reference
    says of it."""

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
        reply = {"status": "success", **await spec.handler(platform, request)}
    if checking_replies():
        check_reply(name, spec.reply, reply)
    return reply
