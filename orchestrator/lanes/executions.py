"""Starting a run of an application's workflow in a session, the one way every door starts one.

Owns the start of a run (a listener's batch, `start_execution`, a schedule's workflow target): the workflow
is started by its execution id with the platform's memo (`RunTag`, so the run reports its own end, see
`workflows/run_end.py`). `start_run` records it first with its `execution.started` event and the input it is
started with; a listener's run is recorded by its batch's record and its event by the batch's finish
(`orchestrator/lanes/driver.py`). A start asked again (an activity retried after its start went through, the
sweep starting a run whose start was lost: `orchestrator/engine/run_sweep.py`) finds the run under its id, running or
ended, and starts nothing: the id is never reused. `TemporalRuns` is Temporal's side of runs as the engine
asks it: start one, and what Temporal says of one (`core/run_checks.py`).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Protocol

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import (
    Priority,
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.config import Settings
from orchestrator.core.declaration import MAX_PRIORITY, MIN_PRIORITY
from orchestrator.core.run_checks import Closed, Running, Unknown, Word
from orchestrator.core.waits import StartMade, StopAsked
from orchestrator.crossings import crossing
from orchestrator.workflows.messages import RUN_MEMO, RunInput, RunTag

SESSION_ATTRIBUTE = SearchAttributeKey.for_keyword("OrchestratorSession")
LISTENER_ATTRIBUTE = SearchAttributeKey.for_keyword("OrchestratorListener")


def search_attributes(session_id: str, listener: str | None) -> TypedSearchAttributes:
    pairs = [SearchAttributePair(SESSION_ATTRIBUTE, session_id)]
    if listener is not None:
        pairs.append(SearchAttributePair(LISTENER_ATTRIBUTE, listener))
    return TypedSearchAttributes(pairs)


def run_priority(priority: int | None, fairness_key: str | None) -> Priority:
    """Temporal's priority for a run: a listener's `priority` (5 first) as a priority key (1 first), and for a
    keyed listener its key as the fairness key, so no key's runs starve behind a busy key's."""
    key = None if priority is None else MAX_PRIORITY + MIN_PRIORITY - priority
    return Priority(priority_key=key, fairness_key=fairness_key)


class RunStarter(Protocol):
    async def start(self, tag: RunTag, run_input: RunInput, priority: Priority) -> None:
        """Start a run (once, however often asked)."""
        ...

    async def stop(self, execution_id: str, reason: str) -> None:
        """End a run from outside (nothing when it has ended or is not there)."""
        ...

    async def cancel(self, execution_id: str) -> bool:
        """Ask a run to cancel: it gets Temporal's cancellation and may clean up. False: no such run is open."""
        ...


# What Temporal's termination of a run says when the run's session was deleted (or is being deleted).
SESSION_DELETED = "its session was deleted"


async def tell_stop(runs: RunStarter, execution_id: str, stop: StopAsked) -> None:
    """Tell a run just started the stop asked of it before its start was made: terminated at once when it has no
    grace (`terminate`), else cancelled. Its end is the run's own report, or the router's poll's, which terminates
    a run still running past its grace and records it (`engine/wait_answers.py`)."""
    if stop.grace_seconds <= 0:
        await runs.stop(execution_id, stop.reason)
    else:
        await runs.cancel(execution_id)


async def after_start(runs: RunStarter, execution_id: str, made: StartMade) -> None:
    """What a start of a run of no lane leaves to do: a record gone meanwhile (its session deleted) ends the run;
    a stop asked before the start is told."""
    if not made.recorded:
        await runs.stop(execution_id, SESSION_DELETED)
    elif made.stop is not None:
        await tell_stop(runs, execution_id, made.stop)


class ExecutionRecords(Protocol):
    async def execution_started(self, record: dict[str, Any], limit: int | None = None) -> bool:
        """Record a run's start and its `execution.started` event, once per execution id (True: new). With `limit`
        (`executions_per_session`), raises `CommandError` `limit_exceeded` for a new run when the session runs that
        many already, counted so that runs recorded at once cannot all pass."""
        ...

    async def execution_start_made(self, execution_id: str) -> StartMade:
        """The run's start was made: the input kept to start it again is let go; answers whether its record still
        stands (its session not being deleted) and a stop asked before the start."""
        ...


def run_queues(named: str | None, platform_queue: str) -> tuple[str | None, str | None]:
    """Where a run starts and where its session calls and its end go: `(elsewhere, home)`, both None for a run on
    the platform's own queue; for one on a queue its action or request names, that queue and the platform's."""
    elsewhere = named if named not in (None, platform_queue) else None
    return elsewhere, platform_queue if elsewhere is not None else None


async def start_run(
    runs: RunStarter,
    records: ExecutionRecords,
    tag: RunTag,
    run_input: RunInput,
    priority: Priority = Priority.default,
    limit: int | None = None,
) -> None:
    """Record the start of a run of no lane (`start_execution`, a schedule's) as `tag.execution_id`, with the
    input that starts it should this start be lost, start it (once, however often this is asked), and let the
    input go: a record that still holds it is a start never known made (`core/run_checks.py`).

    With `limit` (`executions_per_session`) a run the session has no room for is refused by its record
    (`CommandError` `limit_exceeded`), and nothing is started. Raises whatever Temporal raises when the start
    cannot be asked (the caller's retry asks again).
    """
    record: dict[str, Any] = {
        "execution_id": tag.execution_id,
        "session_id": tag.session_id,
        "workflow": tag.workflow,
        "listener": None,
        "lane": None,
        "batch": None,
        "run_key": tag.run_key,
        "depth": tag.depth,
        "start_input": run_input.model_dump(mode="json"),
    }
    # Recorded before the start: a run may end (and record its end) before the call that started it returns,
    # and an end is recorded only over a start.
    await records.execution_started(record, limit)
    crossing("execution.recorded")
    await runs.start(tag, run_input, priority)
    await after_start(runs, tag.execution_id, await records.execution_start_made(tag.execution_id))


async def start_workflow_run(
    temporal: Client, settings: Settings, tag: RunTag, run_input: RunInput, priority: Priority = Priority.default
) -> None:
    """Start `tag.workflow` as `tag.execution_id` on Temporal, on `tag.task_queue` when its action names one (a
    worker of any language polls it) else the platform's, once however often this is asked (an earlier attempt
    that started it, even one that has ended since, counts). Its record is the caller's."""
    with contextlib.suppress(WorkflowAlreadyStartedError):
        await temporal.start_workflow(
            tag.workflow,
            run_input,
            id=tag.execution_id,
            task_queue=tag.task_queue or settings.task_queue,
            memo={RUN_MEMO: tag},
            search_attributes=search_attributes(tag.session_id, tag.listener) if settings.search_attributes else None,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            # The run's first workflow task comes back with the start when this worker has room for it.
            request_eager_start=True,
            priority=priority,
        )


# Temporal out of reach for now (a try later may pass): what a command answers `unavailable` for, and what a run
# recorded before its start was asked is left to the run sweep for.
TEMPORAL_AWAY = (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED)
# How a closed run's Temporal status reads as an execution's status (None: it continued as a run of its own).
CLOSED_AS = {
    WorkflowExecutionStatus.COMPLETED: "completed",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.TIMED_OUT: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
    WorkflowExecutionStatus.TERMINATED: "stopped",
    WorkflowExecutionStatus.CONTINUED_AS_NEW: None,
}
# How long the namespace's retention is trusted before it is asked again.
RETENTION_CACHE_SECONDS = 600.0


class TemporalRuns:
    """Runs on Temporal as the engine asks for them: started with the platform's memo and ids, and what Temporal
    says of one (running, closed with a status, or unknown), with the memo it was started with."""

    def __init__(self, temporal: Client, settings: Settings) -> None:
        self.temporal, self.settings = temporal, settings
        self._retention: tuple[float, float | None] | None = None

    async def start(self, tag: RunTag, run_input: RunInput, priority: Priority) -> None:
        await start_workflow_run(self.temporal, self.settings, tag, run_input, priority)

    async def stop(self, execution_id: str, reason: str) -> None:
        try:
            await self.temporal.get_workflow_handle(execution_id).terminate(reason=reason)
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise

    async def cancel(self, execution_id: str) -> bool:
        """Ask a run to cancel: it gets Temporal's cancellation and may clean up. False: no such run is open."""
        try:
            await self.temporal.get_workflow_handle(execution_id).cancel()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            return False
        return True

    async def signal(self, execution_id: str, name: str, payload: Any) -> bool:
        """Signal a run. False: no such run is open (it ended; nobody is left to tell)."""
        try:
            await self.temporal.get_workflow_handle(execution_id).signal(name, payload)
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            return False
        return True

    async def word(self, execution_id: str) -> tuple[Word, RunTag | None]:
        """Temporal's word on a run, and its memo when it has one. Only NOT_FOUND is `Unknown`: any other error
        says nothing of the run and is raised."""
        try:
            described = await self.temporal.get_workflow_handle(execution_id).describe()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            return Unknown(), None
        try:
            tag: RunTag | None = await described.memo_value(RUN_MEMO, type_hint=RunTag)
        except KeyError:
            tag = None
        status = described.status
        if status is None or status == WorkflowExecutionStatus.RUNNING:
            return Running(), tag
        return Closed(CLOSED_AS.get(status)), tag

    async def retention_seconds(self) -> float | None:
        """How long the namespace keeps closed runs (asked every ten minutes; None: it would not say)."""
        now = time.monotonic()
        if self._retention is not None and now < self._retention[0]:
            return self._retention[1]
        try:
            described = await self.temporal.workflow_service.describe_namespace(
                DescribeNamespaceRequest(namespace=self.temporal.namespace)
            )
            ttl = described.config.workflow_execution_retention_ttl
            seconds: float | None = (
                ttl.ToTimedelta().total_seconds()
                if described.config.HasField("workflow_execution_retention_ttl")
                else None
            )
        except RPCError:
            seconds = None
        self._retention = (now + RETENTION_CACHE_SECONDS, seconds)
        return seconds
