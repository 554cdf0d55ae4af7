"""Commands on what listeners and runs did: `list_session_listeners`, `list_executions`, `start_execution`.

The numbers come from PostgreSQL (outcomes with their counts, executions); a lane's live pending and
in-flight counts come from the lane workflow's `state` query, read only for the lanes the router has
delivered to in this session.
"""

from __future__ import annotations

import asyncio
import secrets
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import StringConstraints

from orchestrator.commands.fields import ListenerName, SessionId
from orchestrator.commands.registry import Request, command
from orchestrator.core.errors import CommandError

if TYPE_CHECKING:
    from orchestrator.platform import Platform

WorkflowName = Annotated[str, StringConstraints(min_length=1, max_length=200)]
# A lane that does not answer its query in this time is shown without live counts.
LANE_QUERY_SECONDS = 3.0


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


async def _lane_state(platform: Platform, workflow_id: str) -> dict[str, Any]:
    if platform.temporal is None:
        return {}
    try:
        handle = platform.temporal.get_workflow_handle(workflow_id)
        state = await handle.query("state", rpc_timeout=timedelta(seconds=LANE_QUERY_SECONDS))
    except Exception:  # a lane that finished long ago, or a server that cannot answer now
        return {}
    view: dict[str, Any] = state if isinstance(state, dict) else state.model_dump(mode="json")
    return {
        "pending": view["pending"],
        "in_flight": len(view["in_flight"]),
        "runs_in_flight": view["in_flight"],
        "batches": view["batches"],
        "last_batch_first_id": view["last_batch_first_id"],
        "last_batch_last_id": view["last_batch_last_id"],
    }


@command("list_session_listeners", SessionListeners)
async def list_session_listeners(platform: Platform, req: SessionListeners) -> dict[str, Any]:
    store = platform.store
    await store.get_session(req.session_id)
    listeners = await store.list_listeners()
    disabled = await store.disabled_listeners(req.session_id)
    counts = await store.outcome_counts(req.session_id)
    lanes = await store.lanes_of(req.session_id)
    states = await asyncio.gather(*(_lane_state(platform, lane["workflow_id"]) for lane in lanes))
    answer = []
    for listener in listeners:
        name = listener["name"]
        answer.append(
            {
                "name": name,
                "version": listener["version"],
                "enabled": name not in disabled,
                "effective_at": listener["effective_at"],
                "lanes": [
                    {"lane": lane["lane"], "workflow_id": lane["workflow_id"], "pending": 0, "in_flight": 0, **state}
                    for lane, state in zip(lanes, states, strict=True)
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
    from workflows.messages import BatchInfo, LaneAddress, RunInput, RunPlan

    session = await platform.store.get_session(req.session_id)
    if session["status"] != "open":
        raise CommandError("session_not_open", f"session_id: session {req.session_id!r} is {session['status']}")
    if platform.temporal is None:
        raise CommandError("internal_error", "start_execution needs Temporal, and this door has none")
    limits = platform.settings.limits
    if await platform.store.running_executions(req.session_id) >= limits.executions_per_session:
        raise CommandError("limit_exceeded", f"executions_per_session: {limits.executions_per_session} running")
    run_key = f"run:{req.session_id}:{secrets.token_hex(6)}"
    plan = RunPlan(
        address=LaneAddress(session_id=req.session_id, listener="", lane=""),
        lane_workflow_id=None,
        run_key=run_key,
        workflow=req.workflow,
        input=RunInput(
            session_id=req.session_id,
            listener="",
            batch=BatchInfo(first_id=0, last_id=0, count=0, retry=0, lane="", event_ids=[], messages=[], events=[]),
            input=req.input,
        ),
        task_queue=platform.settings.task_queue,
        search_attributes=platform.settings.search_attributes,
    )
    await platform.temporal.start_workflow("OrchestratorRun", plan, id=run_key, task_queue=platform.settings.task_queue)
    return {"execution": {"id": run_key.replace("run:", "exe:", 1) + ".0", "workflow": req.workflow}}
