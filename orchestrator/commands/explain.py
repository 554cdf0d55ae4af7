"""`explain_event`: what happened to an event, listener by listener (matched or why not, lane, batch, run,
outcome, receipt), from the store's own records; and the wait behind `"explain": true` on a write.

The decision is the router's (`orchestrator.core.routing`), replayed here on the event with the listener
version in effect at its commit, so the answer is what routing did, not a guess; what followed is read from
the lane's queue, the batches, the executions and the outcomes.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from orchestrator.commands.fields import SessionId
from orchestrator.commands.registry import Request, command
from orchestrator.core.filters import mismatch
from orchestrator.core.lane_keys import lane_key
from orchestrator.core.routing import ListenerVersion, in_effect, own_silence, versions_by_name

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext

# How long a write with `"explain": true` waits for the router to take its event.
EXPLAIN_WAIT_SECONDS = 5.0


class ExplainEvent(Request):
    command: Literal["explain_event"]
    session_id: SessionId
    event_id: int


def decision(
    name: str, versions: list[ListenerVersion], envelope: dict[str, Any], committed: datetime
) -> dict[str, Any]:
    """Whether routing gave the event to the listener, and the lane; or why not."""
    version = in_effect(versions, committed)
    if version is None:
        return {"matched": False, "reason": "activation", "message": "no version had taken effect at its commit"}
    silence = own_silence(envelope)
    if silence is not None and silence[0] == name:
        return {"matched": True, "version": version.version, "lane": silence[1]}
    source = envelope.get("source") or {}
    if source.get("listener") == name:
        return {"matched": False, "reason": "self_wake", "message": "written by this listener's own run or action"}
    why = mismatch(version.declaration.filter, envelope)
    if why is not None:
        return {"matched": False, "reason": "filter", "message": why}
    return {"matched": True, "version": version.version, "lane": lane_key(version.declaration.concurrency, envelope)}


async def explain(platform: CommandContext, session_id: str, event_id: int) -> dict[str, Any]:
    store = platform.store
    event = await store.event_by_id(session_id, event_id)
    envelope = event.envelope()
    versions = versions_by_name(await store.listener_versions())
    routed = await store.routed_position(session_id)
    disabled = await store.disabled_listeners(session_id)
    paused = await store.paused_listeners(session_id)
    answer: list[dict[str, Any]] = []
    for name in sorted(versions):
        found = decision(name, versions[name], envelope, event.created_at)
        found["listener"] = name
        if name in disabled:
            found["switched_off"] = True
        if name in paused:
            found["paused"] = True
        if found["matched"]:
            found.update(await store.event_fate(session_id, name, found["lane"], event_id))
            if routed < event_id:
                found["routed"] = False
        answer.append(found)
    return {"event": envelope, "routed": routed >= event_id, "listeners": answer}


@command("explain_event", ExplainEvent)
async def explain_event(platform: CommandContext, req: ExplainEvent) -> dict[str, Any]:
    return await explain(platform, req.session_id, req.event_id)


async def explained_once_routed(platform: CommandContext, session_id: str, event_id: int) -> dict[str, Any]:
    """The routing decision for a write's event, once the router has taken it (waiting at most a few seconds;
    then what is known, with `routed` false)."""
    deadline = time.monotonic() + EXPLAIN_WAIT_SECONDS
    while time.monotonic() < deadline:  # the router is another process: nothing to wait on but its record
        if await platform.store.routed_position(session_id) >= event_id:
            break
        await asyncio.sleep(0.05)
    return await explain(platform, session_id, event_id)
