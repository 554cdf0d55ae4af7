"""Commands on what listeners and runs did: `list_session_listeners`, `list_executions`, `start_execution`.

Everything comes from PostgreSQL: outcomes with their counts, executions, and each lane's queue (what
waits past `fired_through`) and the runs holding its slots. Why a lane waits is the lane step's own answer
(`lane_step.next_move`) on what the store holds of it, so status says what the engine will do.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, StringConstraints, model_validator
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import Client
from temporalio.service import RPCError

from orchestrator.commands.fields import ListenerName, SessionId, check_payload
from orchestrator.commands.listeners import listener_warnings
from orchestrator.commands.registry import Request, command
from orchestrator.commands.run_views import (
    ListExecutionsReply,
    ListSessionListenersReply,
    StartExecutionReply,
    StopExecutionReply,
)
from orchestrator.core.declaration import (
    DEFAULT_CANCEL_GRACE_SECONDS,
    MAX_CANCEL_GRACE_SECONDS,
    TASK_QUEUE_PATTERN,
    ListenerDeclaration,
    effective_max_parallel,
)
from orchestrator.core.errors import NO_TEMPORAL, CommandError
from orchestrator.core.lane_snapshot import (
    ACT,
    BatchRecord,
    HeldSlot,
    LaneAddress,
    LaneSnapshot,
    ListenerNow,
    PastBatch,
    Replay,
    RunPlan,
    Wait,
)
from orchestrator.core.lane_step import next_move
from orchestrator.core.limits import Limits
from orchestrator.core.validation import FieldProblem
from orchestrator.lanes.registry import FRESH_SECONDS, not_registered, registered_text
from orchestrator.telemetry import METRICS

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext

WorkflowName = Annotated[str, StringConstraints(min_length=1, max_length=200)]
# Lanes with work waiting are asked whether their fire is in trouble: at most this many, this quickly.
LANES_ASKED = 20
LANE_QUERY_SECONDS = 1.0
# How far back from a run's newest history event its failed workflow task is looked for.
TASK_FAILURE_LOOKBACK = 20
# How much of that failure's message a lane's `waiting` shows.
ERROR_CHARS = 1_000


class SessionListeners(Request):
    command: Literal["list_session_listeners"]
    session_id: SessionId


class StopExecution(Request):
    command: Literal["stop_execution"]
    session_id: SessionId
    execution_id: Annotated[str, StringConstraints(min_length=1, max_length=512)] = Field(
        description="the run, as `list_executions` names it"
    )
    mode: Literal["cancel", "terminate"] = Field(
        default="cancel",
        description="`cancel`: the run gets Temporal's cancellation and may clean up, then is terminated after"
        " `grace_seconds`; `terminate`: ended at once, no code of it runs",
    )
    reason: Annotated[str, StringConstraints(min_length=1, max_length=2000)] | None = Field(
        default=None, description="why, kept as the run's error"
    )
    grace_seconds: float = Field(
        default=DEFAULT_CANCEL_GRACE_SECONDS,
        ge=0,
        le=MAX_CANCEL_GRACE_SECONDS,
        description="how long a cancelled run may clean up before it is terminated",
    )
    # "Graceful unless asked to terminate" (SPEC 17), said as a flag.
    terminate: bool | None = Field(default=None, description="true: `mode: terminate`; false: `mode: cancel`")

    @model_validator(mode="after")
    def _terminate(self) -> StopExecution:
        if self.terminate is None:
            return self
        mode: Literal["cancel", "terminate"] = "terminate" if self.terminate else "cancel"
        if "mode" in self.model_fields_set and self.mode != mode:
            raise FieldProblem("terminate", f"{str(self.terminate).lower()} asks otherwise than mode {self.mode!r}")
        self.mode = mode
        return self


class ListExecutions(Request):
    command: Literal["list_executions"]
    session_id: SessionId
    listener: ListenerName | None = Field(default=None, description="only this listener's runs")
    status: Literal["running", "completed", "failed", "stopped", "cancelled"] | None = Field(
        default=None, description="only the runs with this status"
    )
    newest_first: bool = Field(default=False, description="the newest runs first (default: the oldest first)")
    limit: int = Field(default=1000, ge=1, le=1000, description="at most this many runs (`more` says there are)")


class StartExecution(Request):
    command: Literal["start_execution"]
    session_id: SessionId
    workflow: WorkflowName = Field(description="a workflow the worker registers, by its name")
    input: Any = Field(default=None, description="the run's `input` (any JSON value)")
    task_queue: str | None = Field(
        default=None,
        pattern=TASK_QUEUE_PATTERN,
        description="the Temporal task queue the run starts on, where a worker of any language polls (default:"
        " the platform's, whose workers must have registered `workflow`)",
    )


async def _troubles(platform: CommandContext, lanes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """For lanes with work waiting, the trouble their fire is in (it keeps failing: since when, the last
    error), from each lane's `state` query; a lane that does not answer in time is left out."""
    if platform.temporal is None or not lanes:
        return {}
    temporal = platform.temporal

    async def ask(workflow_id: str) -> dict[str, Any]:
        try:
            handle = temporal.get_workflow_handle(workflow_id)
            state = await handle.query("state", rpc_timeout=timedelta(seconds=LANE_QUERY_SECONDS))
        except Exception:  # the lane ended, or the server cannot answer now
            return {}
        view = state if isinstance(state, dict) else state.model_dump(mode="json")
        trouble = view.get("trouble")
        if not trouble:
            return {}
        since = datetime.fromtimestamp(float(trouble["since"]), UTC).isoformat()
        return {"trouble": {"since": since, "failures": trouble["failures"], "error": trouble["error"]}}

    return await _ask_each([lane["workflow_id"] for lane in lanes], ask)


async def _failing_runs(platform: CommandContext, lanes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """For lanes whose slot a run holds while events wait, the runs whose workflow task keeps failing.

    An exception in a workflow that is not a Temporal failure (a bug: a `KeyError`, a `TypeError`) fails its
    workflow task, not the workflow, and Temporal retries the task until a fixed worker runs it: the run
    holds its slot meanwhile, and the lane waits behind it. Keyed by execution id: the task's attempts, when
    the failing task was first scheduled, and the recorded failure's message.
    """
    if platform.temporal is None:
        return {}
    temporal = platform.temporal
    running = [
        run["execution_id"]
        for lane in lanes
        if lane["pending"]
        for run in lane["runs"]
        if run.get("due_at") is None and run.get("execution_id")
    ]

    async def ask(execution_id: str) -> dict[str, Any]:
        try:
            handle = temporal.get_workflow_handle(execution_id)
            described = await handle.describe(rpc_timeout=timedelta(seconds=LANE_QUERY_SECONDS))
        except Exception:  # gone, or the server cannot answer now: the sweep deals with runs that ended
            return {}
        raw = described.raw_description
        task = raw.pending_workflow_task if raw.HasField("pending_workflow_task") else None
        if task is None or task.attempt < 2:
            return {}
        since = task.original_scheduled_time.ToDatetime(tzinfo=UTC).isoformat()
        error = await _task_failure(temporal, execution_id)
        return {"attempts": task.attempt, "since": since, "error": error}

    return await _ask_each(running, ask)


async def _ask_each(ids: list[str], ask: Callable[[str], Awaitable[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Temporal asked about at most `LANES_ASKED` workflows at once, each within `LANE_QUERY_SECONDS`: the
    answers worth showing, by id (an empty answer is left out)."""
    asked = ids[:LANES_ASKED]
    answers = await asyncio.gather(*(ask(workflow_id) for workflow_id in asked))
    return {workflow_id: found for workflow_id, found in zip(asked, answers, strict=True) if found}


async def _task_failure(temporal: Client, execution_id: str) -> str | None:
    """The message of a run's last failed workflow task (Temporal records the first failure of a streak)."""
    request = GetWorkflowExecutionHistoryReverseRequest(
        namespace=temporal.namespace,
        execution=WorkflowExecution(workflow_id=execution_id),
        maximum_page_size=TASK_FAILURE_LOOKBACK,
    )
    try:
        reply = await temporal.workflow_service.get_workflow_execution_history_reverse(
            request, timeout=timedelta(seconds=LANE_QUERY_SECONDS)
        )
    except Exception:
        return None
    for event in reply.history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            message: str = event.workflow_task_failed_event_attributes.failure.message
            return message[:ERROR_CHARS]
    return None


@dataclass(frozen=True)
class Standing:
    """What every lane of one listener shares in the session: the listener now, the session, the throttle."""

    listener: ListenerNow | None
    session_status: str
    session_alias: str | None
    fires: int
    oldest_fire: datetime | None
    running: int
    failing_runs: dict[str, dict[str, Any]]


def _iso(at: float | None) -> str | None:
    return None if at is None else datetime.fromtimestamp(at, UTC).isoformat()


def _runs(row: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "run_key": r["run_key"],
            "execution_id": r["execution_id"],
            "retry": r["retry"],
            "state": "running" if r.get("due_at") is None else "waiting",
            "due_at": _iso(r.get("due_at")),
            "since": _iso(r.get("since")),
        }
        for r in row["runs"]
    ]


def lane_summary(row: dict[str, Any], standing: Standing) -> LaneSnapshot:
    """A lane as the step sees it, from a `lanes_of` row: counts and times, no envelopes."""
    return LaneSnapshot(
        address=LaneAddress("", row["listener"], row["lane"], row["workflow_id"]),
        lane_id=int(row["id"]),
        seq=int(row["seq"]),
        fired_through=int(row["fired_through"]),
        now=float(row["now"]),
        session_status=standing.session_status,
        session_alias=standing.session_alias,
        listener=standing.listener,
        pending=int(row["pending"]),
        oldest_at=None if row["oldest_at"] is None else float(row["oldest_at"]),
        newest_at=None if row["newest_at"] is None else float(row["newest_at"]),
        newest_id=int(row["newest_id"]),
        runs=tuple(
            HeldSlot(
                run_key=r["run_key"],
                batch_id=int(r["batch_id"]),
                execution_id=r["execution_id"],
                retry=int(r["retry"]),
                plan=RunPlan.from_json(r["plan"]),
                due_at=r.get("due_at"),
                since=r.get("since"),
            )
            for r in row["runs"]
        ),
        claimed=_CLAIMED if row["claimed"] else None,
        replay=_REPLAY if row["replay"] else None,
        key_slot=row["key_slot"],
        keys_held=int(row["keys_held"]),
        fires_last_minute=standing.fires,
        running_executions=standing.running,
    )


# Stand-ins for a claimed batch and a replay in a summary: what `next_move` needs is that there is one.
_CLAIMED = PastBatch(batch=BatchRecord(0, 0, 0, (), (), 0, ACT), entries=())
_REPLAY = Replay(id=0, events=(), replay_of=None, number=0)


def why_waiting(
    row: dict[str, Any], standing: Standing, limits: Limits, trouble: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """Why a lane does not step now, by the step's own rule: its step failing, a retry waiting, paused, its
    run's workflow task failing, its slot held, held by its listener's throttle, queued for a key slot, debouncing,
    its window open, or past `listener_fires_per_minute`; None when nothing waits or it is about to step."""
    if trouble:
        return {"reason": "fire_failing", **trouble}
    snap = lane_summary(row, standing)
    move = next_move(snap, snap.now, limits)
    if (held := _held_by_throttle(row, standing, move, snap.now)) is not None:
        return held
    if not isinstance(move, Wait):
        if snap.pending and snap.listener is not None and snap.fires_last_minute >= limits.listener_fires_per_minute:
            until = standing.oldest_fire + timedelta(seconds=60) if standing.oldest_fire else None
            return {
                "reason": "throttled",
                "until": until.isoformat() if until else None,
                "limit": "listener_fires_per_minute",
            }
        return None
    reason = move.reason
    if reason == "nothing":
        return None
    if reason == "paused":
        return {"reason": "paused"} if snap.pending or snap.runs else None
    if reason == "retry_waiting":
        assert move.run is not None
        return {"reason": "retry_waiting", "until": _iso(move.run.due_at), "run": move.run.run_key}
    if reason == "slot_held":
        for run in snap.runs:
            if run.due_at is None and (failing := standing.failing_runs.get(run.execution_id)):
                return {"reason": "run_failing", "run": run.execution_id, **failing}
        run = move.run or snap.runs[0]
        return {"reason": "slot_held", "run": run.execution_id, "since": _iso(run.since)}
    if reason == "queued_for_key_slot":
        # No place while every slot is taken but the lane has not joined the queue yet (it does at its step).
        place = row["key_slot_place"]
        return {"reason": "queued_for_key_slot", "place": None if place is None else int(place)}
    return {"reason": reason, "until": _iso(move.until)}


def _held_by_throttle(row: dict[str, Any], standing: Standing, move: Any, now: float) -> dict[str, Any] | None:
    """The lane held by its listener's own throttle, as its step last said (`throttled_until`), where the step
    judges the throttle: after its runs' slots and a pause, before a key slot, and before a window that closes
    sooner. The summary holds no throttle of its own: the step's word is what its clock was told."""
    until = row.get("throttled_until")
    decl = standing.listener.declaration if standing.listener is not None else None
    if until is None or float(until) <= now or decl is None or decl.throttle is None:
        return None
    if isinstance(move, Wait):
        window = move.reason in ("window_open", "debouncing") and (move.until or 0.0) <= float(until)
        if not window and move.reason != "queued_for_key_slot":
            return None
    throttle = decl.throttle
    return {
        "reason": "throttled",
        "until": _iso(float(until)),
        "limit": "throttle",
        "throttle": throttle.model_dump(mode="json", exclude_none=True),
    }


def waiting_text(waiting: dict[str, Any]) -> str:
    """A lane's `waiting` in words, as `orchestrator status` and the dashboard print it."""
    reason = waiting["reason"]
    if reason == "fire_failing":
        return f"its fire keeps failing since {waiting['since']} ({waiting['failures']} failures): {waiting['error']}"
    if reason == "retry_waiting":
        return f"retry of {waiting['run']} waiting until {waiting['until']}"
    if reason == "paused":
        return "paused (resume_listener fires what waits)"
    if reason == "run_failing":
        error = waiting.get("error") or "see its history"
        return (
            f"slot held by run {waiting['run']}, whose workflow task has failed {waiting['attempts'] - 1} times"
            f" since {waiting['since']} (a bug in the workflow?): {error}"
        )
    if reason == "slot_held":
        return f"slot held by run {waiting['run']} since {waiting['since']}"
    if reason == "queued_for_key_slot":
        if waiting["place"] is None:
            return "waiting for a key slot (every one is taken; it joins the queue at its next step)"
        return f"queued for a key slot (place {waiting['place']})"
    if reason == "throttled" and waiting.get("limit") == "throttle":
        throttle = waiting["throttle"]
        per = f" per {throttle['key']}" if "key" in throttle else ""
        return (
            f"held by its throttle ({throttle['runs']} per {throttle['per_seconds']:g} s{per}) until {waiting['until']}"
        )
    if reason == "throttled":
        return f"throttled until {waiting['until']} (listener_fires_per_minute: what comes due meanwhile is dropped)"
    if reason == "debouncing":
        return f"debouncing until {waiting['until']}"
    if reason == "window_open":
        return f"window open until {waiting['until']}"
    return str(reason)


def _lane(row: dict[str, Any], waiting: dict[str, Any] | None) -> dict[str, Any]:
    """A lane as the store holds it: what waits (pending), the runs holding its slots, its batches, and why
    it waits (`waiting`, with its `text`)."""
    last = row["last_batch"] or {}
    runs = _runs(row)
    return {
        "lane": row["lane"],
        "workflow_id": row["workflow_id"],
        "pending": int(row["pending"]),
        "in_flight": len(runs),
        "runs_in_flight": runs,
        "waiting_for_slot": waiting is not None
        and waiting["reason"] in ("slot_held", "run_failing", "queued_for_key_slot"),
        "routed_through": row["routed_through"],
        "fired_through": row["fired_through"],
        "batches": int(row["batches"]),
        "last_batch_first_id": last.get("first_id"),
        "last_batch_last_id": last.get("last_id"),
        "waiting": None if waiting is None else {**waiting, "text": waiting_text(waiting)},
    }


@command(
    "list_session_listeners",
    SessionListeners,
    reply=ListSessionListenersReply,
    errors=("not_found",),
    example={"command": "list_session_listeners", "session_id": "ses_..."},
)
async def list_session_listeners(platform: CommandContext, req: SessionListeners) -> dict[str, Any]:
    """Each listener as it stands in the session: switched on or off, paused, its lanes (what waits, the runs
    holding slots, why each lane waits), its recent outcomes and its counts by status."""
    store = platform.store
    session = await store.get_session(req.session_id)
    listeners = await store.list_listeners()
    disabled = await store.disabled_listeners(req.session_id)
    counts = await store.outcome_counts(req.session_id)
    lanes = await store.lanes_of(req.session_id)
    troubles, failing_runs = await asyncio.gather(
        _troubles(platform, [lane for lane in lanes if lane["pending"] or lane["runs"]]),
        _failing_runs(platform, lanes),
    )
    paused = await store.paused_listeners(req.session_id)
    fires = await store.fires_lately(req.session_id)
    running = await store.running_executions(req.session_id)
    registered = await store.registered_workflows(FRESH_SECONDS)
    limits = platform.settings.limits
    answer = []
    for listener in listeners:
        name = listener["name"]
        decl = ListenerDeclaration.model_validate(listener["body"])
        count, oldest = fires.get(name, (0, None))
        now_listener = ListenerNow(int(listener["version"]), decl, name in disabled, name in paused)
        standing = Standing(now_listener, session["status"], session.get("alias"), count, oldest, running, failing_runs)
        shown = []
        for lane in lanes:
            if lane["listener"] != name:
                continue
            trouble = troubles.get(lane["workflow_id"], {})
            waiting = why_waiting(lane, standing, limits, trouble.get("trouble"))
            shown.append({**_lane(lane, waiting), **trouble})
        answer.append(
            {
                "name": name,
                "version": listener["version"],
                "enabled": name not in disabled,
                "paused": name in paused,
                "effective_at": listener["effective_at"],
                "lanes": shown,
                "recent_outcomes": await store.recent_outcomes(req.session_id, name),
                "counts": counts.get(name, {}),
                "warnings": listener_warnings(decl, registered, platform.settings.task_queue, limits),
            }
        )
    return {"listeners": answer}


@command(
    "list_executions",
    ListExecutions,
    reply=ListExecutionsReply,
    errors=("not_found",),
    example={"command": "list_executions", "session_id": "ses_...", "listener": "respond"},
)
async def list_executions(platform: CommandContext, req: ListExecutions) -> dict[str, Any]:
    """The session's runs, oldest first (or the newest first): a listener's (with the batch that started it) and
    those started by hand, at most `limit`, `more` saying whether others match. A run that waits for events says on
    what (`waiting`: its wait's number, conditions, position and deadline)."""
    found = await platform.store.list_executions(
        req.session_id, req.listener, req.status, limit=req.limit + 1, newest_first=req.newest_first
    )
    executions = found[: req.limit]
    waiting = await platform.store.open_waits([e["id"] for e in executions if e["status"] == "running"])
    for execution in executions:
        if execution["id"] in waiting:
            execution["waiting"] = waiting[execution["id"]]
    return {"executions": executions, "more": len(found) > req.limit}


@command(
    "start_execution",
    StartExecution,
    reply=StartExecutionReply,
    errors=("not_found", "session_not_open", "limit_exceeded"),
    example={
        "command": "start_execution",
        "session_id": "ses_...",
        "workflow": "responder",
        "input": {"thread": "chats/7"},
    },
)
async def start_execution(platform: CommandContext, req: StartExecution) -> dict[str, Any]:
    """Start a registered workflow in a session; its start and end are events like a listener's runs. A workflow
    no worker has registered lately is refused (`not_found`). The run is recorded before Temporal is asked: when
    Temporal is out of reach it is answered all the same, and starts, by the id answered, once Temporal answers
    (the workers' run sweep, within `run_check_seconds`); a retry would start a second run."""
    from orchestrator.lanes.executions import TEMPORAL_AWAY, TemporalRuns, run_queues, start_run
    from orchestrator.workflows.messages import BatchInfo, RunInput, RunTag

    check_payload("input", req.input, platform.settings.limits.max_payload_bytes)
    session = await platform.store.get_session(req.session_id)
    if session["status"] != "open":
        raise CommandError("session_not_open", f"session_id: session {req.session_id!r} is {session['status']}")
    if platform.temporal is None:
        raise CommandError("unavailable", NO_TEMPORAL.format(what="start_execution"))
    settings = platform.settings
    # A queue the request names is another worker's, of any language: what it registers is not known here.
    elsewhere, home = run_queues(req.task_queue, settings.task_queue)
    registered = await platform.store.registered_workflows(FRESH_SECONDS)
    if elsewhere is None and req.workflow not in registered:
        # Started, it would wait for a worker that never comes, holding one of the session's runs for good.
        raise CommandError(
            "not_found",
            f"{not_registered('workflow', req.workflow)}; the workflows registered: {registered_text(registered)}",
        )
    execution_id = f"exe:{req.session_id}:{secrets.token_hex(6)}.0"
    run_input = RunInput(
        session_id=req.session_id,
        listener="",
        batch=BatchInfo(first_id=0, last_id=0, count=0, retry=0, lane="", event_ids=[], messages=[], events=[]),
        input=req.input,
        execution_id=execution_id,
        platform_task_queue=home,
    )
    tag = RunTag(
        execution_id=execution_id,
        session_id=req.session_id,
        workflow=req.workflow,
        task_queue=elsewhere,
        platform_task_queue=home,
    )
    try:
        # Refused (`limit_exceeded`) by its record when the session runs `executions_per_session` already: the
        # count is taken under the lock a lane's record of a run takes, so starts made at once cannot all pass.
        await start_run(
            TemporalRuns(platform.temporal, settings),
            platform.store,
            tag,
            run_input,
            limit=settings.limits.executions_per_session,
        )
    except RPCError as err:
        if err.status not in TEMPORAL_AWAY:
            raise
        # Recorded with its input, and not known started: the run sweep starts it (by this id) once Temporal
        # answers. Answered as made, since a caller's retry would make a second run under a new id.
        log.warning("execution %s recorded; Temporal is out of reach, so the run sweep starts it", execution_id)
    return {"execution": {"id": execution_id, "workflow": req.workflow}}


@command(
    "stop_execution",
    StopExecution,
    reply=StopExecutionReply,
    errors=("not_found",),
    example={"command": "stop_execution", "session_id": "ses_...", "execution_id": "exe:ses_...:respond:chats/7:2.0"},
)
async def stop_execution(platform: CommandContext, req: StopExecution) -> dict[str, Any]:
    """Stop a run. By default it is cancelled: the run gets Temporal's cancellation and may clean up, and is
    terminated if it still runs after `grace_seconds`; it ends `stopped`, with the reason as its error. With
    `mode` `terminate` it is ended at once, with no clean-up. Either way its batch's slot follows as for a run
    stopped from outside (freed, handed on; a stopped run is not repeated). A run that had ended already answers
    how it ended, and nothing changes, but for a failed run whose repeat waits out its delay: the repeat is called
    off (the slot held for it freed and handed on, no `listener.failed`), and the answer says `repeat` `stopped`. A
    run recorded and not on Temporal yet (a run is recorded before its start
    is made) answers `stopping`: whoever makes its start tells it the stop then, and it ends `stopped`. A run asked
    to stop ends `stopped` however it ends, and is not repeated."""
    from orchestrator.core.run_checks import Running, Unknown
    from orchestrator.lanes.driver import log as driver_log
    from orchestrator.lanes.driver import say_run_end
    from orchestrator.lanes.executions import TemporalRuns
    from orchestrator.lanes.nudges import nudge_lanes
    from orchestrator.store.lane_store import Ending

    found = await platform.store.find_execution(req.session_id, req.execution_id)
    if found is None:
        raise CommandError("not_found", f"execution_id: no run {req.execution_id!r} in session {req.session_id!r}")
    if found["status"] == "failed" and found["listener"] is not None:
        drive = await platform.store.lanes.stop_repeat(
            req.session_id, req.execution_id, await key_slots_of(platform, found["listener"])
        )
        if drive is not None:
            # Its repeat called off: the lanes its slot went to step now (without Temporal, the router's poll
            # finds them).
            if platform.temporal is not None:
                await nudge_lanes(platform.temporal, platform.settings, drive)
            METRICS.retries_waiting.add(-1, {"listener": found["listener"]})
            return {"execution": {"id": req.execution_id, "status": "failed", "repeat": "stopped"}}
    if found["status"] != "running":
        return {"execution": {"id": req.execution_id, "status": found["status"]}}
    if platform.temporal is None:
        raise CommandError("unavailable", NO_TEMPORAL.format(what="stop_execution"))
    runs = TemporalRuns(platform.temporal, platform.settings)
    reason = req.reason or STOPPED_BY_COMMAND
    stopping = {"execution": {"id": req.execution_id, "status": "stopping"}}
    # The stop is recorded first: the run's end reads its reason (and ends `stopped` however it ended), whoever
    # makes the run's start after this tells it, and the router's poll terminates the run past its grace. A
    # `terminate` asked before (a stop with no grace) stands whatever this one asks.
    stop, grace = await platform.store.stop_asked(
        req.session_id, req.execution_id, reason, req.grace_seconds if req.mode == "cancel" else 0.0
    )
    if grace > 0 and await runs.cancel(req.execution_id):
        return await told(platform, req, stop)
    word, tag = await runs.word(req.execution_id)
    if isinstance(word, Unknown) and await still_running(platform, req.session_id, req.execution_id):
        # Recorded and not on Temporal yet: ended here, it would run all the same once started. Whoever makes
        # its start tells it the stop then. (A run Temporal closed whose end is not recorded yet answers the
        # same; its end, when recorded, is `stopped`.)
        return stopping
    if grace > 0 and isinstance(word, Running) and await runs.cancel(req.execution_id):
        # Started since the first ask found nothing: graceful all the same.
        return await told(platform, req, stop)
    await platform.store.answers_told([stop])
    await runs.stop(req.execution_id, reason)
    ended = await platform.store.lanes.end_run(
        Ending(
            execution_id=req.execution_id,
            session_id=req.session_id,
            status="stopped",
            error=reason,
            listener=found["listener"],
            keyed=tag is not None and tag.key_slots is not None,
            key_max=(tag.key_slots or 0) if tag is not None else 0,
        )
    )
    # As recorded: a `cancel_on` that answered first (the run in its grace) made it `cancelled`.
    say_run_end(
        driver_log,
        req.session_id,
        found["listener"],
        found["lane"],
        req.execution_id,
        ended.status or "stopped",
        ended.error if ended.recorded else reason,
        ended.recorded,
    )
    # The lanes its slot went to step now, as after any run's end.
    await nudge_lanes(platform.temporal, platform.settings, ended.drive)
    status = (
        "stopped"
        if ended.recorded
        else (await platform.store.find_execution(req.session_id, req.execution_id) or found)["status"]
    )
    return {"execution": {"id": req.execution_id, "status": status}}


async def told(platform: CommandContext, req: StopExecution, stop: int) -> dict[str, Any]:
    """A stop Temporal took: `stopping`, or how the run ended when its end was recorded before the stop was (a
    failed run's repeat then stands, as for a stop of a run that had ended). A run that took the stop and ended
    `stopped` already (a quick clean-up) answers `stopping` too: what the stop did, whichever came first."""
    await platform.store.answers_told([stop])
    now = await platform.store.find_execution(req.session_id, req.execution_id)
    status = "stopping" if now is None or now["status"] in ("running", "stopped") else now["status"]
    return {"execution": {"id": req.execution_id, "status": status}}


async def key_slots_of(platform: CommandContext, listener: str) -> int:
    """A keyed listener's key slots as declared now (0: not keyed, or deleted), as its lanes' next step takes
    them."""
    try:
        body = (await platform.store.get_listener(listener))["body"]
    except CommandError:
        return 0
    concurrency = ListenerDeclaration.model_validate(body).concurrency
    return effective_max_parallel(concurrency, platform.settings.limits) if concurrency.mode == "keyed" else 0


async def still_running(platform: CommandContext, session_id: str, execution_id: str) -> bool:
    found = await platform.store.find_execution(session_id, execution_id)
    return found is not None and found["status"] == "running"


STOPPED_BY_COMMAND = "stopped by stop_execution"
