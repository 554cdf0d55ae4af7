"""`explain_event`: what happened to an event, listener by listener (matched or why not, lane, batch, run,
outcome, receipt), from the store's own records; what caused it and what it caused; and the wait behind
`"explain": true` on a write.

The decision is the router's (`orchestrator.core.routing`), replayed here on the event with the listener
version in effect at its commit, so the answer is what routing did, not a guess; what followed is read from
the lane's queue, the batches, the executions and the outcomes. Causes come from each event's `cause`: back
through the run or batch that wrote it to the outside request or the clock (`caused_by`, nearest first), and
forward through the batches that took it, their runs and what those wrote (`caused`), each to a bounded
depth and size.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from orchestrator.commands.events import refuse_trimmed
from orchestrator.commands.explanation import Explanation
from orchestrator.commands.fields import EventId, SessionId
from orchestrator.commands.registry import Request, command
from orchestrator.commands.replies import Reply
from orchestrator.core.errors import CommandError
from orchestrator.core.routing import in_effect, routing_decision, versions_by_name

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext

# How long a write with `"explain": true` waits for the router to take its event.
EXPLAIN_WAIT_SECONDS = 5.0
# How many events the forward answer names at most (back, the chain is as long as the event is deep).
CAUSED_EVENTS = 50


class ExplainEvent(Request):
    command: Literal["explain_event"]
    session_id: SessionId
    event_id: EventId = Field(description="the event's id in the session's stream")


class ExplainEventReply(Explanation, Reply):
    """What became of the event."""


async def explain(platform: CommandContext, session_id: str, event_id: int) -> dict[str, Any]:
    store = platform.store
    await store.get_session(session_id)  # not_found for a session being deleted, whose rows may linger
    try:
        event = await store.event_by_id(session_id, event_id)
    except CommandError as err:
        if err.code == "not_found":
            await refuse_trimmed(platform, session_id, event_id, "event_id")
        raise
    envelope = event.envelope()
    versions = versions_by_name(await store.listener_versions())
    routed = await store.routed_position(session_id)
    disabled = await store.disabled_listeners(session_id)
    paused = await store.paused_listeners(session_id)
    # A listener deleted since (and saved again or not) lost its rules with the deletion (0025): what its batches
    # took says what routing did.
    batches = await store.batches_of_event(session_id, event_id)
    took = {b["listener"]: b["lane"] for b in reversed(batches)}
    answer: list[dict[str, Any]] = []
    for name in sorted(versions.keys() | took.keys()):
        if name in took and (name not in versions or in_effect(versions[name], event.created_at) is None):
            found: dict[str, Any] = {"matched": True, "lane": took[name], "deleted_since": True}
        else:
            found = routing_decision(name, versions[name], envelope, event.created_at)
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
    waits = await store.waits_taking(session_id, event_id)
    for wait in waits:
        # A wait took it: its run's own listener's lanes did not (docs/waits.md).
        for found in answer:
            if wait["kind"] == "wait" and found["listener"] == wait["listener"] and found["matched"]:
                found["taken_by_wait"] = {"execution_id": wait["execution_id"], "wait": wait["seq"]}
    return {
        "event": envelope,
        "routed": routed >= event_id,
        "listeners": answer,
        "waits": [
            {
                "execution_id": w["execution_id"],
                "wait": w["seq"],
                "kind": w["kind"],
                "condition": w["matched"],
            }
            for w in waits
        ],
        "caused_by": await what_caused(platform, session_id, envelope),
        "caused": [
            *await what_it_caused(platform, session_id, event_id, [CAUSED_EVENTS], batches),
            *await runs_it_ended(platform, session_id, event_id, waits),
        ],
    }


async def runs_it_ended(
    platform: CommandContext, session_id: str, event_id: int, waits: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The runs a `cancel_on` cancelled for the event, each with the `execution.ended` it caused; one still
    cleaning up as `cancelling`. A run that ended otherwise (another event cancelled it first) is not this one's."""
    found: list[dict[str, Any]] = []
    for wait in waits:
        if wait["kind"] != "cancel":
            continue
        run = {"execution_id": wait["execution_id"]}
        ended = await platform.store.run_ended_by(session_id, wait["execution_id"], event_id)
        if ended is not None:
            found.append({"cancelled": run, "wrote": [{"event": _named(ended.envelope())}]})
        elif ((await platform.store.execution_record(wait["execution_id"])) or {}).get("status") == "running":
            found.append({"cancelling": run, "wrote": []})
    return found


def _named(envelope: dict[str, Any]) -> dict[str, Any]:
    """An event as a chain of causes names it: what it is, and who did it."""
    return {k: envelope[k] for k in ("id", "type", "alias", "actor") if k in envelope}


async def what_caused(platform: CommandContext, session_id: str, envelope: dict[str, Any]) -> list[dict[str, Any]]:
    """The chain back from an event, nearest first: the run and the batch that wrote it, that batch's first
    event, and so on to the outside request, a schedule's firing, a lane's silence or the application's own
    transaction; a firing of a timer a run set goes on through that run."""
    store, chain, cause = platform.store, [], envelope.get("cause") or {}
    # Each step back is to an earlier event or run, and the chain's events are shallower each step: a bound made
    # of the event's depth stops even records that loop.
    for _ in range(2 * int(envelope.get("depth") or 0) + 4):
        ended = next((k for k in ("request", "schedule", "idle", "transaction") if k in cause), None)
        execution = cause.get("execution")
        if ended is not None:
            chain.append({ended: cause[ended]})
            execution = (cause.get("schedule") or {}).get("set_by")  # a run's timer: on through the run
            if execution is None:
                return chain
        batch = cause.get("batch")
        if execution is not None:
            run = await store.execution_record(str(execution))
            chain.append({"run": {"execution_id": execution, **({"workflow": run["workflow"]} if run else {})}})
            cause = (run or {}).get("cause") or {}
            if "batch" not in cause:
                # A run started from outside (`start_execution`) or by a schedule: on with what started it.
                cause = {k: v for k, v in cause.items() if k in ("request", "schedule")}
                if cause:
                    continue
                return chain
            batch = cause["batch"]
        if batch is None:
            return chain
        chain.append({"batch": batch})
        try:
            first = await store.event_by_id(session_id, int(batch["first_id"]))
        except CommandError:  # gone (retention): the chain stops here
            return chain
        current = first.envelope()
        chain.append({"event": _named(current)})
        cause = current.get("cause") or {}
    return chain


async def what_it_caused(
    platform: CommandContext,
    session_id: str,
    event_id: int,
    budget: list[int],
    batches: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The batches that took the event (`batches`, when the caller read them already), the runs they started, and
    what those and the batch's own action wrote, each with what it caused in turn (`budget`: how many more events
    may be named)."""
    store, found = platform.store, []
    for batch in batches if batches is not None else await store.batches_of_event(session_id, event_id):
        node: dict[str, Any] = {
            "batch": {k: batch[k] for k in ("listener", "lane", "first_id", "last_id", "retry", "replay")},
            "runs": list(batch["executions"]),
            "wrote": [],
        }
        written = {e.id: e for e in await store.events_caused_by(session_id, batch=batch)}
        for execution_id in batch["executions"]:
            written.update({e.id: e for e in await store.events_caused_by(session_id, execution_id=execution_id)})
        for event in sorted(written.values(), key=lambda e: e.id):
            if budget[0] <= 0:
                node["truncated"] = True
                break
            budget[0] -= 1
            # Deeper each step, and `budget` bounds how many steps there are.
            step: dict[str, Any] = {"event": _named(event.envelope())}
            step["caused"] = await what_it_caused(platform, session_id, event.id, budget)
            node["wrote"].append(step)
        found.append(node)
    return found


@command(
    "explain_event",
    ExplainEvent,
    reply=ExplainEventReply,
    errors=("not_found", "past_retention"),
    example={"command": "explain_event", "session_id": "ses_...", "event_id": 2},
)
async def explain_event(platform: CommandContext, req: ExplainEvent) -> dict[str, Any]:
    """What became of an event, listener by listener (matched or why not, its lane, batch, run, outcome and
    receipt), which runs' waits it answered (a wait that took it kept it from its run's own listener's lanes, or a
    `cancel_on` it cancelled a run by), what caused it and what it caused."""
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
