"""Authorization of a command: the target the core's decision needs, found in the store, and the decision kept.

Owns what a validated request acts on (its session, the aliases it writes, the event types it emits, the alias
of a session it opens), the lookups behind them, and a session's write rate. `dispatch` calls `authorize`
before any handler, so a refused command changes nothing; the decision itself is `core.access.decide`. A
caller with no `Caller` (the in-process door: tests, `orchestrator call --local`, an app's start-up) is the
platform's own and is not checked.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from orchestrator.core.access import SESSION_NEEDS, Principal, Target, decide, need_of
from orchestrator.core.errors import CommandError
from orchestrator.core.rate_leases import retry_after
from orchestrator.core.scopes import Grant

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext

# The key name an in-process caller acts as (an event's actor `{"key": "local"}`); never a created key's name.
LOCAL = "local"
LOCAL_PRINCIPAL = Principal(LOCAL, Grant.of(["admin"]))

# Commands that write events into their session, and how many (a session's write rate counts events).
_ONE_WRITE = frozenset({"write_object", "delete_object", "post_thread_item", "emit_event", "update_graph"})


class Guard(Protocol):
    """What a door adds to a caller: a session's alias (cached), and whether a session may take more writes."""

    async def session_alias(self, session_id: str) -> tuple[bool, str | None]: ...

    async def session_writes(self, session_id: str, count: int) -> float | None:
        """None: the writes may go; else the seconds until they may."""
        ...


@dataclass(frozen=True)
class Caller:
    """Who sends a command through a door that checks keys, and that door's guard."""

    principal: Principal
    guard: Guard | None = None


_CALLER: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("orchestrator_caller", default=None)


def current_principal() -> Principal:
    """Who runs the command being handled (the platform's own caller when no door checks keys)."""
    caller = _CALLER.get()
    return LOCAL_PRINCIPAL if caller is None else caller.principal


@contextlib.contextmanager
def calling(caller: Caller | None) -> Iterator[None]:
    token = _CALLER.set(caller)
    try:
        yield
    finally:
        _CALLER.reset(token)


def _aliases(name: str, request: Any) -> tuple[str, ...]:
    if name == "write_objects":
        return tuple(o.alias for o in request.objects)
    if name in ("write_object", "delete_object", "post_thread_item", "post_thread_items"):
        return (request.alias,)
    return ()


def _types(name: str, request: Any) -> dict[str, str]:
    """Each event type the command emits, with the field it first came in."""
    if name == "emit_event":
        return {request.type: "type"}
    if name == "emit_events":
        first: dict[str, str] = {}
        for n, event in enumerate(request.events):
            first.setdefault(event.type, f"events.{n}.type")
        return first
    return {}


def writes_of(name: str, request: Any) -> int:
    """How many events a command writes into its session (0: it writes none a key could flood it with)."""
    if name in _ONE_WRITE:
        return 1
    if name == "write_objects":
        return len(request.objects)
    if name == "post_thread_items":
        return len(request.items)
    if name == "emit_events":
        return len(request.events)
    return 0


async def target_of(platform: CommandContext, caller: Caller, name: str, request: Any) -> Target:
    session_id = getattr(request, "session_id", None)
    if need_of(name) not in SESSION_NEEDS or not isinstance(session_id, str):
        return Target(new_session_alias=getattr(request, "alias", None) if name == "open_session" else None)
    lookup = caller.guard.session_alias if caller.guard is not None else platform.store.session_alias
    found, alias = await lookup(session_id)
    emits: tuple[tuple[str, tuple[str, ...] | None], ...] = ()
    types = _types(name, request)
    if types and found:
        allows = await platform.store.event_type_allows(tuple(types))
        emits = tuple((t, None if allows.get(t) is None else tuple(allows[t] or ())) for t in types)
    alias_fields = tuple(f"objects.{n}.alias" for n in range(len(request.objects))) if name == "write_objects" else ()
    return Target(
        session_id,
        found,
        alias,
        _aliases(name, request),
        emits,
        alias_fields=alias_fields,
        emit_fields=tuple(types.values()) if emits else (),
    )


async def authorize(platform: CommandContext, caller: Caller, name: str, request: Any) -> None:
    """Refuse the command (`not_found`, `access_denied`, `rate_limited`) unless the caller may run it now."""
    principal = caller.principal
    if not principal.grant.admin:
        target = await target_of(platform, caller, name, request)
        verdict = decide(principal.grant, name, target)
        if verdict.code is not None:
            raise CommandError(verdict.code, verdict.message)
        if getattr(request, "explain", False) is True and decide(principal.grant, "explain_event", target).code:
            # What routing made of the write is `explain_event`'s answer: a read of the session.
            raise CommandError(
                "access_denied",
                "explain: what routing made of the write is a read of the session, and this key does not read it;"
                " leave explain out",
            )
    if principal.limited and caller.guard is not None:
        count = writes_of(name, request)
        if count:
            wait = await caller.guard.session_writes(str(request.session_id), count)
            if wait is not None:
                seconds = retry_after(wait)
                raise CommandError(
                    "rate_limited",
                    f"session_id: the session takes no more writes for now; retry in {seconds} s",
                    retry_after=seconds,
                )


async def authorize_stream(platform: CommandContext, caller: Caller, session_id: str) -> None:
    """Refuse a stream of the session unless the caller may listen to it (`not_found` when it cannot see it)."""
    if caller.principal.grant.admin:
        return
    lookup = caller.guard.session_alias if caller.guard is not None else platform.store.session_alias
    found, alias = await lookup(session_id)
    verdict = decide(caller.principal.grant, "stream", Target(session_id, found, alias))
    if verdict.code is not None:
        raise CommandError(verdict.code, verdict.message)
