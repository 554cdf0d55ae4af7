"""Starting a run of an application's workflow in a session, the one way every door starts one.

Owns the start of a run (a listener's batch, `start_execution`, a schedule's workflow target): the workflow
is started by its execution id with the platform's memo (`RunTag`, so the run reports its own end, see
`workflows/run_end.py`). `start_run` records it first with its `execution.started` event; a listener's run
is recorded by its batch's record and its event by the batch's finish (`orchestrator/lane_driver.py`). A start
asked again (an activity retried after its start went through) finds the run under its id, running or ended, and starts
nothing: the id is never reused.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

from temporalio.client import Client
from temporalio.common import (
    Priority,
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError

from orchestrator.config import Settings
from orchestrator.core.declaration import MAX_PRIORITY, MIN_PRIORITY
from orchestrator.store.engine_records import EngineRecords
from orchestrator.telemetry import METRICS
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


async def start_run(
    temporal: Client,
    store: EngineRecords,
    settings: Settings,
    tag: RunTag,
    run_input: RunInput,
    priority: Priority = Priority.default,
) -> None:
    """Record the start of `tag.workflow` as `tag.execution_id` and start it (once, however often this is asked).

    Raises whatever Temporal raises when the start cannot be asked (the caller's retry asks again).
    """
    batch = run_input.batch
    record: dict[str, Any] = {
        "execution_id": tag.execution_id,
        "session_id": tag.session_id,
        "workflow": tag.workflow,
        "listener": tag.listener,
        "lane": tag.lane,
        "batch": batch.model_dump(mode="json", exclude={"events", "messages"}) if tag.listener else None,
        "run_key": tag.run_key,
        "depth": tag.depth,
    }
    # Recorded before the start: a run may end (and record its end) before the call that started it returns,
    # and an end is recorded only over a start.
    first = await store.execution_started(record)
    await start_workflow_run(temporal, settings, tag, run_input, priority)
    if first and tag.listener is not None:
        commits = [datetime.fromisoformat(e["created_at"]) for e in batch.events if "created_at" in e]
        METRICS.run_started(tag.listener, min(commits, default=None), datetime.now(UTC))


async def start_workflow_run(
    temporal: Client, settings: Settings, tag: RunTag, run_input: RunInput, priority: Priority = Priority.default
) -> None:
    """Start `tag.workflow` as `tag.execution_id` on Temporal, once however often this is asked (an earlier
    attempt that started it, even one that has ended since, counts). Its record is the caller's."""
    with contextlib.suppress(WorkflowAlreadyStartedError):
        await temporal.start_workflow(
            tag.workflow,
            run_input,
            id=tag.execution_id,
            task_queue=settings.task_queue,
            memo={RUN_MEMO: tag},
            search_attributes=search_attributes(tag.session_id, tag.listener) if settings.search_attributes else None,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            # The run's first workflow task comes back with the start when this worker has room for it.
            request_eager_start=True,
            priority=priority,
        )
