"""What the commands answer: the base of every command's reply model, the shapes several replies share, and the
check that a reply is what its model says.

Owns the reply side of the registry: each command registers a model of its success reply (`reply=`) beside the
model of its arguments, and `docs/commands.md`, the OpenAPI document and the TypeScript client's types are all
read off it. A reply model names every field its command answers: those it always answers are required, those
it answers only sometimes optional (left out, or null, when it does not); nested objects are models of their
own. Models are closed (`extra="forbid"`), so a field a command answers and its model does not name is found:
with `CHECK_ORCHESTRATOR_REPLIES` set (the test suite sets it, `tests/conftest.py` and `scripts/test`), every
success reply is checked against its model as it would go over the wire; a mismatch fails the command loudly
(`internal_error`, logged with the difference) and is noted in the file `CHECK_ORCHESTRATOR_REPLIES_LOG` names,
which fails the suite at its end however the test that met it took its `internal_error`. What someone else wrote
(an object's value, an event's data, a listener body's own fields) is JSON as given. A client should still
ignore a field it does not know: a later release may answer more.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator.core.events import EventExecution, EventItem, EventSource

log = logging.getLogger(__name__)

# Set (to anything but empty or `0`), every success reply is checked against its command's model. Not an
# `ORCHESTRATOR_` setting: a test that starts a process of the platform in a shell without those still passes it on.
CHECK_REPLIES_ENV = "CHECK_ORCHESTRATOR_REPLIES"
# With it, each mismatch is also appended to the file this names (a line of JSON each), from every process.
MISMATCHES_ENV = "CHECK_ORCHESTRATOR_REPLIES_LOG"


class Reply(BaseModel):
    """A command's success reply: `status` and what the command answers."""

    model_config = ConfigDict(extra="forbid", strict=True)

    status: Literal["success"]


class Shape(BaseModel):
    """A nested object of a reply."""

    model_config = ConfigDict(extra="forbid", strict=True)


class ReplyMismatch(AssertionError):
    """A command answered what its reply model does not describe: the model, or the command, is wrong."""


def checking_replies() -> bool:
    return os.environ.get(CHECK_REPLIES_ENV, "") not in ("", "0")


def check_reply(name: str, model: type[Reply], reply: dict[str, Any]) -> None:
    """Raise `ReplyMismatch` when `reply`, as JSON, does not validate against `model`."""
    try:
        text = json.dumps(reply)
    except (TypeError, ValueError) as err:
        raise _mismatch(f"{name}: its reply is not JSON ({err})") from None
    try:
        model.model_validate_json(text, strict=True)
    except ValidationError as err:
        raise _mismatch(f"{name}: its reply does not fit {model.__name__}: {err}\nreply: {text[:2000]}") from None


def _mismatch(problem: str) -> ReplyMismatch:
    """The mismatch, logged and noted where `MISMATCHES_ENV` says."""
    log.error("%s", problem)
    path = os.environ.get(MISMATCHES_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as noted:
            noted.write(json.dumps(problem) + "\n")
    return ReplyMismatch(problem)


# -- a shape several replies share -------------------------------------------------------------------------


class EventEnvelope(Shape):
    """An event's envelope (docs/listeners.md, the paths an event offers)."""

    id: int
    session_id: str
    type: str
    alias: str | None = None
    item: EventItem | None = Field(
        default=None, description="a thread item's event: the item, a preview of its message"
    )
    execution: EventExecution | None = Field(default=None, description="a run's event: the run")
    source: EventSource
    depth: int
    created_at: datetime
    data: dict[str, Any] | None = Field(default=None, description="what the event's type carries")
    cause: dict[str, Any] | None = Field(default=None, description="what caused it")
    graph: list[str] | None = Field(default=None, description="`graph.changed`: the nodes the update changed")
    actor: dict[str, Any] | None = Field(default=None, description="who did it")
