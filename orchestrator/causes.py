"""What caused an event: the outside request, a run and its batch, a listener's batch, a schedule's firing.

Owns the `cause` every event records (SPEC sections 2 and 12) and the context it is taken from: whoever
acts (a command's dispatch, a run's session call, the lane driver acting on a batch, a schedule firing) says
so with `caused_by`, and the store stamps each event it writes meanwhile with `current_cause()`. Like the
traceparent beside it in `telemetry`, it travels with the task, so no write can forget it.
"""

from __future__ import annotations

import contextlib
import contextvars
import secrets
from collections.abc import Iterator
from typing import Any

from orchestrator.core.lane_snapshot import LaneAddress, Take

_CAUSE: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("orchestrator_cause", default=None)
_REQUEST: contextvars.ContextVar[str | None] = contextvars.ContextVar("orchestrator_request", default=None)


def current_cause() -> dict[str, Any] | None:
    return _CAUSE.get()


@contextlib.contextmanager
def caused_by(cause: dict[str, Any] | None) -> Iterator[None]:
    token = _CAUSE.set(cause)
    try:
        yield
    finally:
        _CAUSE.reset(token)


@contextlib.contextmanager
def request_id(value: str | None) -> Iterator[None]:
    """The outside request a door is serving (its `X-Request-Id`, when a caller gave one)."""
    token = _REQUEST.set(value)
    try:
        yield
    finally:
        _REQUEST.reset(token)


def request_cause(client: str | None, key: str) -> dict[str, Any]:
    """An outside request's: its id (the caller's, or one made here), the client it named, and the key it was
    made with (`orchestrator.core.access.Principal`), which the store records as the event's actor."""
    request: dict[str, Any] = {"id": _REQUEST.get() or f"req_{secrets.token_hex(8)}"}
    if client is not None:
        request["client"] = client
    request["key"] = key
    return {"request": request}


def batch_cause(address: LaneAddress, take: Take) -> dict[str, Any]:
    """A listener's batch's (what its action wrote, its receipt, its run's start). A replay of a batch takes the
    same events, so it says which replay it is (`replay`, left out for the lane's own batch)."""
    batch: dict[str, Any] = {
        "listener": address.listener,
        "lane": address.lane,
        "first_id": take.first_id,
        "last_id": take.last_id,
        "retry": take.retry,
    }
    if take.replay_number:
        batch["replay"] = take.replay_number
    return {"batch": batch}


def run_cause(execution_id: str, batch: dict[str, Any] | None) -> dict[str, Any]:
    """A run's (what it wrote): its execution, and the batch whose run it is when a listener started it."""
    cause: dict[str, Any] = {"execution": execution_id}
    if batch is not None:
        cause["batch"] = batch
    return cause


def schedule_cause(alias: str, due_at: str, set_by: str | None = None) -> dict[str, Any]:
    """A schedule's firing: which schedule, when it was due, and for a timer a run set, that run's execution (so a
    chain of causes goes on through it)."""
    schedule = {"alias": alias, "due_at": due_at}
    if set_by is not None:
        schedule["set_by"] = set_by
    return {"schedule": schedule}
