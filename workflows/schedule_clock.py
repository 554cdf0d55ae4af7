"""A schedule's own clock, for a Temporal server without Schedules (the time-skipping test server of the kit).

Where Temporal's Schedules are, they decide when a schedule fires (`schedule_fire.py`). Where they are not, the
platform starts this workflow per schedule under the same id: it asks when the schedule fires next (a local
activity over the schedule's row: the times are the pure core's, `core/schedule_times.py`), sleeps until then,
and performs the firing with the same activity a Schedule's firing runs, keyed by its scheduled time. A firing
is performed before the next is asked for, so firings never overlap and a late one skips what it missed, as a
Schedule's `SKIP` policy does. Changing or deleting the schedule ends this workflow; the command starts a new one.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from orchestrator.workflows.schedule_fire import ScheduleFiring, perform

SCHEDULE_CLOCK_WORKFLOW = "OrchestratorScheduleClock"
SCHEDULE_NEXT_ACTIVITY = "orchestrator.schedule_next"
# A clock continues as new after this many firings, so its history stays short however long it runs.
FIRINGS_PER_RUN = 200


class NextFiring(BaseModel):
    """The question: when does this schedule fire after `after`."""

    firing: ScheduleFiring
    after: datetime


class Due(BaseModel):
    """The answer: the next firing time; none when the schedule is gone, disabled or over."""

    at: datetime | None = None


@workflow.defn(name=SCHEDULE_CLOCK_WORKFLOW)
class ScheduleClockWorkflow:
    @workflow.run
    async def run(self, firing: ScheduleFiring) -> None:
        for _ in range(FIRINGS_PER_RUN):
            next_one: Due = await workflow.execute_local_activity(
                SCHEDULE_NEXT_ACTIVITY,
                NextFiring(firing=firing, after=firing.scheduled_at or workflow.now()),
                result_type=Due,
                start_to_close_timeout=timedelta(seconds=10),
            )
            due = next_one.at
            if due is None:
                return
            wait = (due - workflow.now()).total_seconds()
            if wait > 0:
                await workflow.sleep(wait)
            await perform(firing, due)
            # The next is after this one, or after now when this one ran late: what a late firing missed is skipped.
            firing = firing.model_copy(update={"scheduled_at": max(due, workflow.now())})
        workflow.continue_as_new(firing)
