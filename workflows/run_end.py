"""A run reports its own end: a worker interceptor around every workflow the platform started.

Owns the last step of a run started by a listener (or by `start_execution`, or a schedule): in the same
workflow task that completes or fails it, a local activity (`orchestrator.run_ended`) records its end, its
`execution.ended` event, and frees its slot or sets its repeat's due time. The platform starts runs with a
memo (`RunTag`) naming them; a workflow without one is left alone. One marker in the run's history replaces
a wrapper workflow around every run. Any exception the run's code lets out ends it `failed` (a `KeyError` as an
`ApplicationError` does), so a listener's retry, `listener.failed` and an inbox hear of it, as they would on any
queue; only Temporal's own errors of the worker (nondeterminism after an incompatible deploy, a call the sandbox
forbids) fail the workflow task, which Temporal retries until a fixed worker runs it: not an end. A run
terminated from outside (which runs no code) is found by the router's sweep.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ApplicationError,
    CancelledError,
    FailureError,
    TemporalError,
    is_cancelled_exception,
)
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

with workflow.unsafe.imports_passed_through():
    from orchestrator.workflows.messages import RUN_MEMO, RunEnd, RunTag

RUN_ENDED_ACTIVITY = "orchestrator.run_ended"
ACTIVITY_TIMEOUT = timedelta(seconds=30)
RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=10))
# How much of a failed run's error its record and events keep; the full failure stays in its history.
ERROR_CHARS = 4_000
# An error's type is a name: one longer than this is cut as its message is.
ERROR_TYPE_CHARS = 200


class RunEndInterceptor(Interceptor):
    """Added to the worker: reports the end of every run that carries the platform's memo."""

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor]:
        return _ReportsItsEnd


class _ReportsItsEnd(WorkflowInboundInterceptor):
    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        if RUN_MEMO not in workflow.memo():
            return await super().execute_workflow(input)
        tag = workflow.memo_value(RUN_MEMO, type_hint=RunTag)
        try:
            result = await super().execute_workflow(input)
        except (asyncio.CancelledError, CancelledError) as err:
            # Asked to cancel (`cancel_on`, a graceful `stop_execution`, or from Temporal): the record of the
            # ask, when there is one, gives the end its reason and cause.
            await _report(tag, "cancelled", str(err) or "cancelled")
            raise
        except FailureError as err:
            if is_cancelled_exception(err) or _asked_to_cancel():
                # Cancelled while in an activity or a child, or its clean-up failed after it was asked to stop:
                # what ends the run is its cancellation (not repeated, not a listener's failure).
                await _report(tag, "cancelled", str(err) or "cancelled")
                raise
            kind = err.type if isinstance(err, ApplicationError) and err.type else type(err).__name__
            # The error's own message: `str()` of an ApplicationError puts its type in front, which is said apart.
            await _report(tag, "failed", err.message, kind)
            raise
        except TemporalError:
            raise  # the worker's (nondeterminism, the sandbox): the task fails and is retried, the run goes on
        except Exception as err:
            if _asked_to_cancel():
                await _report(tag, "cancelled", str(err) or "cancelled")
                raise ApplicationError(str(err), type=type(err).__name__, non_retryable=True) from err
            kind = type(err).__name__
            await _report(tag, "failed", str(err) or kind, kind)
            raise ApplicationError(str(err) or kind, type=kind, non_retryable=True) from err
        if _asked_to_cancel():
            # It heard its cancellation, cleaned up and returned: it ended because it was asked to, as one that
            # let the cancellation through does.
            await _report(tag, "cancelled", "cancelled")
            return result
        await _report(tag, "completed", None)
        return result


def _asked_to_cancel() -> bool:
    """Whether Temporal asked this run to cancel (`cancel_on`, a graceful `stop_execution`, a cancel from outside),
    whatever its code made of it."""
    return workflow.cancellation_reason() is not None


async def _report(tag: RunTag, status: str, error: str | None, error_type: str | None = None) -> None:
    end = RunEnd(
        tag=tag,
        status=status,
        error=None if error is None else error[:ERROR_CHARS],
        error_type=None if error_type is None else error_type[:ERROR_TYPE_CHARS],
        at=workflow.now().timestamp(),
    )
    if tag.platform_task_queue is not None:
        # A run on a queue its action names, whose worker has not the platform's activities: the platform's
        # queue records its end (as a run in another language reports its own).
        await workflow.execute_activity(
            RUN_ENDED_ACTIVITY,
            end,
            task_queue=tag.platform_task_queue,
            start_to_close_timeout=ACTIVITY_TIMEOUT,
            retry_policy=RETRY,
        )
        return
    await workflow.execute_local_activity(
        RUN_ENDED_ACTIVITY, end, start_to_close_timeout=ACTIVITY_TIMEOUT, retry_policy=RETRY
    )
