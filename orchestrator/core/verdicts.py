"""The checks every batch passes before its action (SPEC section 5), a repeat's included, in order.

Owns the verdict: act, consume with no run and no outcome (the listener switched off in the session, or
deleted), or stop with an outcome. Everything it reads is in the lane's snapshot: the throttle's count of
fires in the last minute (the store keeps the count exact by checking it again, under the listener's lock,
when it records the batch), and the executions running in the session (checked again, under the session's lock,
when a run is recorded: a record that finds the limit reached is stale, and the verdict on the next read refuses).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from orchestrator.core.declaration import ListenerDeclaration
from orchestrator.core.filters import listener_accepts
from orchestrator.core.lane_snapshot import ACT, CONSUME, LaneSnapshot, Queued, Stop, Verdict
from orchestrator.core.limits import Limits, executions_refusal
from orchestrator.core.routing import own_silence


def accepts(decl: ListenerDeclaration, listener: str, lane: str, envelope: dict[str, Any]) -> bool:
    """Whether the listener as declared now wants an event (its own `lane.idle` always): what a store reads
    into `Queued.accepted` (the in-memory twin by this; PostgreSQL by `orchestrator_accepts`)."""
    return listener_accepts(decl, envelope) or own_silence(envelope) == (listener, lane)


def batch_verdict(
    snap: LaneSnapshot,
    decl: ListenerDeclaration,
    entries: Sequence[Queued],
    depth: int,
    limits: Limits,
    registered: Collection[str] | None,
    workflow: str | None,
) -> Verdict:
    """The checks in order: switched off, session closed, unmatched after a re-save, depth, throttle; then,
    for a run, its workflow registered and room for one more execution in the session.

    `depth` is the batch's deepest event's; `workflow` the one a run would start (None: a write action);
    `registered` the workflows the worker runs (None: not known here, so not checked).
    """
    assert snap.listener is not None
    if snap.listener.switched_off:
        return CONSUME
    if snap.session_status != "open":
        return Stop("skipped", "session_not_open")
    if not any(entry.accepted for entry in entries):
        return Stop("skipped", "unmatched")
    if depth >= limits.listener_chain_depth:
        return Stop("skipped", "depth", f"depth {depth} reached listener_chain_depth")
    if snap.fires_last_minute >= limits.listener_fires_per_minute:
        return Stop("throttled", None, f"{snap.fires_last_minute} fires in the last minute")
    if workflow is not None:
        if registered is not None and workflow not in registered:
            return Stop(
                "invocation_error",
                None,
                f"action.workflow: {workflow!r} is not registered: no worker runs it; start a worker whose app"
                " has it, or change the listener's action.workflow",
            )
        if snap.running_executions >= limits.executions_per_session:
            return Stop("refused", None, executions_refusal(snap.running_executions))
    return ACT
