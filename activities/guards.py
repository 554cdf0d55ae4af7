"""The checks every batch passes before its action (SPEC section 5), a repeat's included, in order.

Owns the verdict: act (None), consume with no run and no outcome (the listener switched off or deleted), or
stop with an outcome. The throttle counts fires as they are taken, under the listener's lock in the fire's
own transaction (`LaneQueues.fires_in_last_minute`), so lanes of one listener firing at once cannot all pass
it. What a run's start checks besides (the workflow registered, room for one more execution) is
`start_verdict`'s, asked just before the start.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.core.declaration import ListenerDeclaration
from orchestrator.core.filters import listener_accepts
from orchestrator.core.limits import Limits
from orchestrator.core.routing import own_silence
from orchestrator.store.connection import Connection
from orchestrator.store.engine_records import EngineRecords

# A verdict is stored with its batch (`batches.verdict`), so a fire that finishes a dead one's batch acts on
# the same verdict: None to act, CONSUMED, or the outcome's status, reason and message.
Verdict = dict[str, Any] | None
CONSUMED: dict[str, Any] = {"consumed": True}


def stop(status: str, reason: str | None = None, message: str | None = None) -> dict[str, Any]:
    return {"status": status, "reason": reason, "message": message}


def accepts(decl: ListenerDeclaration, listener: str, lane: str, entry: dict[str, Any]) -> bool:
    """Whether the listener as declared now wants the entry (its own `lane.idle` always)."""
    return listener_accepts(decl, entry) or own_silence(entry) == (listener, lane)


@dataclass(frozen=True)
class Standing:
    """What the guards read of the session before a fire takes its lane's lock: read first, so that a fire
    holding its transaction never waits for a second connection from the pool."""

    session: dict[str, Any]
    switched_off: bool


async def batch_verdict(
    store: EngineRecords,
    conn: Connection,
    limits: Limits,
    now: Standing,
    lane: str,
    decl: ListenerDeclaration,
    entries: Sequence[dict[str, Any]],
    depth: int,
) -> Verdict:
    """The checks in order: switched off, session closed, unmatched after a re-save, depth, throttle.

    `depth` is the batch's deepest event's. Only the throttle reads, in the fire's own transaction (`conn`).
    """
    if now.switched_off:
        return CONSUMED
    session = now.session
    if session["status"] != "open":
        return stop("skipped", "session_not_open")
    if not any(accepts(decl, decl.name, lane, entry) for entry in entries):
        return stop("skipped", "unmatched")
    if depth >= limits.listener_chain_depth:
        return stop("skipped", "depth", f"depth {depth} reached listener_chain_depth")
    fired = await store.fires_in_last_minute(conn, session["id"], decl.name)
    if fired >= limits.listener_fires_per_minute:
        return stop("throttled", None, f"{fired} fires in the last minute")
    return None


async def start_verdict(
    store: EngineRecords, limits: Limits, registered: Collection[str], session_id: str, workflow: str
) -> Verdict:
    """The checks before a run of `workflow` starts (a repeat's too): registered, and room for it."""
    if registered and workflow not in registered:
        return stop("invocation_error", None, f"action.workflow: {workflow!r} is not registered")
    running = await store.running_executions(session_id)
    if running >= limits.executions_per_session:
        return stop("refused", None, f"executions_per_session: {running} running")
    return None
