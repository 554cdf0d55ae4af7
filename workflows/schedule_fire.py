"""The workflow a Temporal Schedule starts at each firing: perform the schedule's target once.

Owns only the hand-off from Temporal's clock to the `orchestrator.schedule_fire` activity, which reads the
schedule's definition, writes or starts the target and records the result. The firing carries its scheduled
time (Temporal's `TemporalScheduledStartTime` search attribute), which keys the write and the run record, so
a retried firing writes and records once. The schedule skips a firing while the previous one still runs, and a
firing that started a workflow runs until that run ends (it asks, `SCHEDULE_RUN_RUNNING_ACTIVITY`, between
timers), so a schedule's runs never overlap; the firing's activity gives up after `FIRING_DEADLINE`, so a long
outage ends in one missed tick, not a stuck clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey

SCHEDULE_FIRE_WORKFLOW = "OrchestratorScheduleFire"
SCHEDULE_FIRE_ACTIVITY = "orchestrator.schedule_fire"
SCHEDULE_RUN_RUNNING_ACTIVITY = "orchestrator.schedule_run_running"
# Firings of the release before returned once their run started; a firing that started before this release is
# replayed without the wait.
RUN_AWAITED = "schedule-firing-awaits-its-run"
# How often a firing asks whether its run still runs: soon, then less and less often (a timer between asks, no
# worker slot held meanwhile), at most every 5 minutes (a run of days keeps its firing's history in bounds).
RUN_ASK_FIRST = timedelta(milliseconds=500)
RUN_ASK_MOST = timedelta(minutes=5)
SCHEDULED_START = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")
FIRING_DEADLINE = timedelta(minutes=5)
ATTEMPT_TIMEOUT = timedelta(seconds=30)
RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=10))


class ScheduleFiring(BaseModel):
    """Which schedule fires (the action's argument), and for which scheduled time (set by the workflow)."""

    session_id: str
    alias: str
    schedule_id: str
    scheduled_at: datetime | None = None


class ScheduleRunResult(BaseModel):
    status: str
    message: str | None = None
    event_id: int | None = None
    execution_id: str | None = None


async def perform(firing: ScheduleFiring, scheduled: datetime) -> ScheduleRunResult:
    """One firing, from a workflow: the activity that performs the target for `scheduled` and records it."""
    result: ScheduleRunResult = await workflow.execute_activity(
        SCHEDULE_FIRE_ACTIVITY,
        firing.model_copy(update={"scheduled_at": scheduled}),
        result_type=ScheduleRunResult,
        start_to_close_timeout=ATTEMPT_TIMEOUT,
        schedule_to_close_timeout=FIRING_DEADLINE,
        retry_policy=RETRY,
    )
    if result.execution_id is not None and workflow.patched(RUN_AWAITED):
        # The schedule's overlap policy (skip) holds for its runs, not only for its firings.
        pause = RUN_ASK_FIRST
        while await workflow.execute_local_activity(
            SCHEDULE_RUN_RUNNING_ACTIVITY,
            result.execution_id,
            result_type=bool,
            start_to_close_timeout=ATTEMPT_TIMEOUT,
            retry_policy=RETRY,
        ):
            await workflow.sleep(pause)
            pause = min(pause * 2, RUN_ASK_MOST)
    return result


@workflow.defn(name=SCHEDULE_FIRE_WORKFLOW)
class ScheduleFireWorkflow:
    @workflow.run
    async def run(self, firing: ScheduleFiring) -> ScheduleRunResult:
        return await perform(firing, workflow.info().typed_search_attributes.get(SCHEDULED_START) or workflow.now())
