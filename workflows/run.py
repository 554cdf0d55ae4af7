"""The run workflow: one per listener batch with a workflow action (and one per `start_execution`).

Owns a run from the start of the application's workflow to its end: it records `execution.started` and the
batch's `success` outcome once the child has started, `execution.ended` when it ends, repeats a failed run
after `min(delay * 2^n, 900)` seconds up to `attempts` times (the lane's slot stays held: the lane only
frees it on `run_finished`), writes `listener.failed` when the last attempt fails, and then tells the lane.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import CancelledError, ChildWorkflowError, TerminatedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from orchestrator.core.backoff import retry_delay
    from orchestrator.core.outcomes import Outcome
    from orchestrator.core.templates import batch_context, render
    from workflows.messages import (
        RUN_FINISHED_SIGNAL,
        BatchInfo,
        ExecutionRecord,
        RepeatCheck,
        RepeatVerdict,
        RunFinished,
        RunPlan,
    )

SESSION_ATTRIBUTE = SearchAttributeKey.for_keyword("OrchestratorSession")
LISTENER_ATTRIBUTE = SearchAttributeKey.for_keyword("OrchestratorListener")
ACTIVITY_TIMEOUT = timedelta(seconds=30)
# How much of a failed run's error its execution record and events keep: an event says what happened, and
# it travels in signals and batches that Temporal limits to 2 MB; the full failure stays in the run's history.
ERROR_CHARS = 4_000
ACTIVITY_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=10))
# Runs tell their lane they finished from a local activity; runs recorded before replay the external signal.
FINISH_BY_ACTIVITY = "finish-by-activity"


def search_attributes(session_id: str, listener: str | None) -> TypedSearchAttributes:
    pairs = [SearchAttributePair(SESSION_ATTRIBUTE, session_id)]
    if listener is not None:
        pairs.append(SearchAttributePair(LISTENER_ATTRIBUTE, listener))
    return TypedSearchAttributes(pairs)


@workflow.defn(name="OrchestratorRun", sandboxed=False)
class RunWorkflow:
    @workflow.run
    async def run(self, plan: RunPlan) -> str:
        retry = plan.input.batch.retry
        outcomes: list[Outcome] = []
        listener = plan.input.listener or None
        ended: ExecutionRecord | None = None
        while True:
            # A repeat is a batch of its own: it passes the batch guards again, which may stop it here. (The
            # patch keeps histories recorded before this check replaying as they ran.)
            if ended is not None and workflow.patched("repeat-guards"):
                verdict = await workflow.execute_local_activity(
                    "orchestrator.check_repeat",
                    RepeatCheck(plan=plan, retry=retry, failed=ended),
                    result_type=RepeatVerdict,
                    start_to_close_timeout=ACTIVITY_TIMEOUT,
                    retry_policy=ACTIVITY_RETRY,
                )
                if not verdict.go:
                    outcomes += [verdict.outcome] if verdict.outcome is not None else []
                    break
            execution_id = f"{plan.run_key}.{retry}".replace("run:", "exe:", 1)
            batch = plan.input.batch.model_copy(update={"retry": retry})
            run_input = plan.input.model_copy(
                update={
                    "batch": batch,
                    "input": self._input(plan, batch) if retry != plan.input.batch.retry else plan.input.input,
                    "execution_id": execution_id,
                    "run_key": plan.run_key,
                }
            )
            record = ExecutionRecord(
                execution_id=execution_id,
                session_id=plan.address.session_id,
                workflow=plan.workflow,
                listener=listener,
                lane=plan.address.lane if listener else None,
                status="running",
                batch=run_input.batch.model_dump(mode="json", exclude={"events", "messages"}) if listener else None,
                # What a listener's run causes (its execution events, receipts, listener.failed) is one deeper
                # than its batch, as its writes are: a chain through them stops at listener_chain_depth.
                depth=plan.input.depth + 1 if listener else plan.input.depth,
            )
            handle = await workflow.start_child_workflow(
                plan.workflow,
                run_input,
                id=execution_id,
                task_queue=plan.task_queue,
                parent_close_policy=ParentClosePolicy.ABANDON,
                search_attributes=search_attributes(plan.address.session_id, listener)
                if plan.search_attributes
                else None,
            )
            outcomes += await workflow.execute_local_activity(
                "orchestrator.execution_started",
                args=[record, plan.receipt_alias],
                result_type=list[Outcome],
                start_to_close_timeout=ACTIVITY_TIMEOUT,
                retry_policy=ACTIVITY_RETRY,
            )
            status, error = "completed", None
            try:
                await handle
            except ChildWorkflowError as err:
                cause = err.cause
                status = "stopped" if isinstance(cause, TerminatedError | CancelledError) else "failed"
                error = str(cause or err)[:ERROR_CHARS]
            last = retry >= plan.retry_attempts or status != "failed"
            ended = record.model_copy(update={"status": status, "error": error})
            await workflow.execute_local_activity(
                "orchestrator.execution_ended",
                args=[
                    ended,
                    last and status == "failed",
                    plan.key_slot_max_parallel if last else None,
                ],
                start_to_close_timeout=ACTIVITY_TIMEOUT,
                retry_policy=ACTIVITY_RETRY,
            )
            if last:
                break
            await workflow.sleep(retry_delay(plan.retry_delay_seconds, retry))
            retry += 1
        if plan.lane_workflow_id is not None:
            finished = RunFinished(run_key=plan.run_key, status=status, outcomes=outcomes)
            if workflow.patched(FINISH_BY_ACTIVITY):
                # In the task that records the end, not in one more: an external signal costs the run a
                # workflow task and two history events per batch. A replayed task may send it again; the
                # lane takes a second `run_finished` for a run it no longer holds as a no-op.
                await workflow.execute_local_activity(
                    "orchestrator.run_finished",
                    args=[plan.lane_workflow_id, finished],
                    start_to_close_timeout=ACTIVITY_TIMEOUT,
                    retry_policy=ACTIVITY_RETRY,
                )
            else:
                await workflow.get_external_workflow_handle(plan.lane_workflow_id).signal(RUN_FINISHED_SIGNAL, finished)
        return status

    @staticmethod
    def _input(plan: RunPlan, batch: BatchInfo) -> Any:
        """The action's input rendered for a repeat: the first attempt's context with this `batch.retry`.

        It cannot fail: the template rendered for the first attempt, and a repeat changes only the value of
        `batch.retry`. A plan without a template (a `start_execution` run) keeps its input as it is.
        """
        if plan.input_template is None:
            return plan.input.input
        context = batch_context(
            entries=batch.events,
            retry=batch.retry,
            lane=batch.lane,
            listener={"name": plan.input.listener, "version": plan.version},
            session=plan.session,
            consumed_ids=batch.event_ids,
        )
        return render(plan.input_template, context)
