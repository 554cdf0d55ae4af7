"""Commands on what listeners and runs did: `list_session_listeners`, `list_executions`, `start_execution`.

Everything comes from PostgreSQL: outcomes with their counts, executions, and each lane's queue (what
waits past `fired_through`) and the runs holding its slots.
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import StringConstraints

from orchestrator.commands.fields import ListenerName, SessionId
from orchestrator.commands.registry import Request, command
from orchestrator.core.declaration import ListenerDeclaration
from orchestrator.core.errors import CommandError

if TYPE_CHECKING:
    from orchestrator.platform import Platform

WorkflowName = Annotated[str, StringConstraints(min_length=1, max_length=200)]
# Lanes with work waiting are asked whether their fire is in trouble: at most this many, this quickly.
LANES_ASKED = 20
LANE_QUERY_SECONDS = 1.0


class SessionListeners(Request):
    command: Literal["list_session_listeners"]
    session_id: SessionId


class ListExecutions(Request):
    command: Literal["list_executions"]
    session_id: SessionId
    listener: ListenerName | None = None
    status: Literal["running", "completed", "failed", "stopped"] | None = None


class StartExecution(Request):
    command: Literal["start_execution"]
    session_id: SessionId
    workflow: WorkflowName
    input: Any = None


async def _troubles(platform: Platform, lanes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """For lanes with work waiting, the trouble their fire is in (it keeps failing: since when, the last
    error), from each lane's `state` query; a lane that does not answer in time is left out."""
    if platform.temporal is None or not lanes:
        return {}
    temporal = platform.temporal

    async def ask(workflow_id: str) -> tuple[str, dict[str, Any]]:
        try:
            handle = temporal.get_workflow_handle(workflow_id)
            state = await handle.query("state", rpc_timeout=timedelta(seconds=LANE_QUERY_SECONDS))
        except Exception:  # the lane ended, or the server cannot answer now
            return workflow_id, {}
        view = state if isinstance(state, dict) else state.model_dump(mode="json")
        trouble = view.get("trouble")
        if not trouble:
            return workflow_id, {}
        since = datetime.fromtimestamp(float(trouble["since"]), UTC).isoformat()
        return workflow_id, {"trouble": {"since": since, "failures": trouble["failures"], "error": trouble["error"]}}

    answers = await asyncio.gather(*(ask(lane["workflow_id"]) for lane in lanes[:LANES_ASKED]))
    return {workflow_id: found for workflow_id, found in answers if found}


@dataclass(frozen=True)
class _WaitContext:
    decl: ListenerDeclaration
    paused: bool
    throttled_until: datetime | None


def _with_why(shown: dict[str, Any], row: dict[str, Any], context: _WaitContext) -> dict[str, Any]:
    """The lane with `waiting`: why it is not firing now, in words and as `{reason, until?, ...}`."""
    shown["waiting"] = why_waiting(row, context)
    return shown


def why_waiting(row: dict[str, Any], context: _WaitContext) -> dict[str, Any] | None:
    """Why a lane does not fire: the first that holds of paused, retry waiting, slot held, queued for a key
    slot, throttled, debouncing, window open; None when nothing waits (or it is about to fire)."""
    runs = list(row["runs"])
    waiting_repeat = [r for r in runs if r["state"] == "waiting"]
    if waiting_repeat:
        return {"reason": "retry_waiting", "until": waiting_repeat[0]["due_at"], "run": waiting_repeat[0]["run_key"]}
    if not row["pending"]:
        return None
    if context.paused:
        return {"reason": "paused"}
    running = [r for r in runs if r["state"] == "running"]
    if running and row["waiting_slot"]:
        return {"reason": "slot_held", "run": running[0]["execution_id"], "since": running[0]["since"]}
    if row["key_slot_place"] is not None:
        return {"reason": "queued_for_key_slot", "place": int(row["key_slot_place"])}
    if context.throttled_until is not None:
        return {"reason": "throttled", "until": context.throttled_until.isoformat()}
    batch = context.decl.batch
    since = row["pending_since"]
    if since is None:
        return None
    if batch.debounce_seconds is not None:
        last = row["last_event_at"] or since
        until = last + timedelta(seconds=batch.debounce_seconds)
        if batch.max_wait_seconds is not None:
            until = min(until, since + timedelta(seconds=batch.max_wait_seconds))
        return {"reason": "debouncing", "until": until.isoformat()}
    return {"reason": "window_open", "until": (since + timedelta(seconds=batch.window_seconds)).isoformat()}


def _lane(row: dict[str, Any]) -> dict[str, Any]:
    """A lane as the store holds it: what waits (pending), the runs holding its slots, its batches."""
    runs = list(row["runs"])
    last = row["last_batch"] or {}
    return {
        "lane": row["lane"],
        "workflow_id": row["workflow_id"],
        "pending": int(row["pending"]),
        "in_flight": len(runs),
        "runs_in_flight": runs,
        "waiting_for_slot": row["waiting_slot"],
        "routed_through": row["routed_through"],
        "fired_through": row["fired_through"],
        "batches": int(row["batches"]),
        "last_batch_first_id": last.get("first_id"),
        "last_batch_last_id": last.get("last_id"),
    }


@command("list_session_listeners", SessionListeners)
async def list_session_listeners(platform: Platform, req: SessionListeners) -> dict[str, Any]:
    store = platform.store
    await store.get_session(req.session_id)
    listeners = await store.list_listeners()
    disabled = await store.disabled_listeners(req.session_id)
    counts = await store.outcome_counts(req.session_id)
    lanes = await store.lanes_of(req.session_id)
    troubles = await _troubles(platform, [lane for lane in lanes if lane["pending"] or lane["waiting_slot"]])
    paused = await store.paused_listeners(req.session_id)
    fires = await store.fires_lately(req.session_id)
    limits = platform.settings.limits
    answer = []
    for listener in listeners:
        name = listener["name"]
        decl = ListenerDeclaration.model_validate(listener["body"])
        count, oldest = fires.get(name, (0, None))
        throttled_until = (
            oldest + timedelta(seconds=60) if count >= limits.listener_fires_per_minute and oldest else None
        )
        context = _WaitContext(decl, name in paused, throttled_until)
        answer.append(
            {
                "name": name,
                "version": listener["version"],
                "enabled": name not in disabled,
                "paused": name in paused,
                "effective_at": listener["effective_at"],
                "lanes": [
                    _with_why({**_lane(lane), **troubles.get(lane["workflow_id"], {})}, lane, context)
                    for lane in lanes
                    if lane["listener"] == name
                ],
                "recent_outcomes": await store.recent_outcomes(req.session_id, name),
                "counts": counts.get(name, {}),
            }
        )
    return {"listeners": answer}


@command("list_executions", ListExecutions)
async def list_executions(platform: Platform, req: ListExecutions) -> dict[str, Any]:
    return {"executions": await platform.store.list_executions(req.session_id, req.listener, req.status)}


@command("start_execution", StartExecution)
async def start_execution(platform: Platform, req: StartExecution) -> dict[str, Any]:
    """Start a registered workflow in a session; its start and end are events like a listener's runs."""
    from orchestrator.executions import start_run
    from workflows.messages import BatchInfo, RunInput, RunTag

    session = await platform.store.get_session(req.session_id)
    if session["status"] != "open":
        raise CommandError("session_not_open", f"session_id: session {req.session_id!r} is {session['status']}")
    if platform.temporal is None:
        raise CommandError("internal_error", "start_execution needs Temporal, and this door has none")
    limits = platform.settings.limits
    if await platform.store.running_executions(req.session_id) >= limits.executions_per_session:
        raise CommandError("limit_exceeded", f"executions_per_session: {limits.executions_per_session} running")
    execution_id = f"exe:{req.session_id}:{secrets.token_hex(6)}.0"
    run_input = RunInput(
        session_id=req.session_id,
        listener="",
        batch=BatchInfo(first_id=0, last_id=0, count=0, retry=0, lane="", event_ids=[], messages=[], events=[]),
        input=req.input,
        execution_id=execution_id,
    )
    tag = RunTag(execution_id=execution_id, session_id=req.session_id, workflow=req.workflow)
    await start_run(platform.temporal, platform.store, platform.settings, tag, run_input)
    return {"execution": {"id": execution_id, "workflow": req.workflow}}
