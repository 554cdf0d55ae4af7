"""The lane workflow: one per (session, listener, lane key), a durable timer over a queue in the store.

Owns when its lane steps, announces its silence, continues as new and ends; its events, batches and slots
live in PostgreSQL, and what a step does is the lane driver's (`orchestrator/lanes/driver.py`, through the
`orchestrator.fire` local activity). The lane's state is its clock (`orchestrator.core.lane_clock`), O(1) in
its waiting events: a nudge (the one signal) or its step's report says when to step again, in seconds from
now. The signal handler only calls the clock. A real server's timers resolve to about a second, so the lane
wakes that much early and the step waits out the rest; the test server's are exact.

The step is a local activity: one marker in the history instead of three events and a workflow task. That is
safe because the store, not the workflow, decides what a step takes: a step run again (a workflow task that
failed and was replayed, an attempt retried) takes the next step the store holds, never the same events twice.
A step that keeps failing (the database away) is retried with backoff, and the lane says so in its `state`
query (since when, the last error).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, ApplicationErrorCategory

with workflow.unsafe.imports_passed_through():
    from orchestrator.core.lane_clock import (
        LaneNews,
        done,
        early_for,
        next_deadline,
        nudged,
        reported,
        silence_at,
        step_due,
    )
    from orchestrator.core.outcomes import Outcome
    from orchestrator.workflows.messages import (
        LANE_OUTCOMES,
        NUDGE_SIGNAL,
        FireReport,
        FireRequest,
        IdleNotice,
        LaneStart,
        LaneTrouble,
        LaneView,
    )

ACTIVITY_TIMEOUT = timedelta(seconds=30)
# A few quick attempts inside the activity; past them the lane waits on a timer of its own (so a long
# outage costs a timer now and then, not a workflow task per attempt) and says it is in trouble.
FIRE_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=5), maximum_attempts=5
)
TROUBLE_BACKOFF_MAX_SECONDS = 60.0


@workflow.defn(name="OrchestratorLane", sandboxed=False)
class LaneWorkflow:
    @workflow.init
    def __init__(self, start: LaneStart) -> None:
        self.state = start
        self._wake = False
        self._alarms: list[float] = []

    # -- the signal: the clock's reducer only ------------------------------------------------------------

    @workflow.signal(name=NUDGE_SIGNAL)
    def nudge(self, news: LaneNews) -> None:
        self.state.clock = nudged(self.state.clock, news, workflow.time())
        self._wake = True

    # -- queries ---------------------------------------------------------------------------------------------

    @workflow.query(name="state")
    def view(self) -> LaneView:
        return LaneView(address=self.state.address, clock=self.state.clock, trouble=self.state.trouble)

    @workflow.query(name="outcomes")
    def outcomes(self) -> list[Outcome]:
        return list(self.state.outcomes)

    # -- the loop --------------------------------------------------------------------------------------------

    @workflow.run
    async def run(self, start: LaneStart) -> None:
        early = early_for(self.state.time_skipping, self.state.timer_resolution)
        while True:
            # Cleared before the work, not after: a nudge that lands while a step runs must wake the next wait.
            self._wake = False
            if self._should_continue_as_new():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self.state)
            now, clock, exit_after = workflow.time(), self.state.clock, self.state.idle_exit_seconds
            trouble = self.state.trouble
            if trouble is not None and now < trouble.retry_at:
                self._alarm_at(trouble.retry_at)
            elif step_due(clock, now, early) or trouble is not None:
                await self._fire(early)
                continue
            elif (silence := silence_at(clock)) is not None and now >= silence:
                await self._announce_silence()
                continue
            elif done(clock, now, exit_after):
                await workflow.wait_condition(workflow.all_handlers_finished)
                if done(self.state.clock, workflow.time(), exit_after):
                    return
                continue
            deadline = next_deadline(self.state.clock, exit_after, early)
            if deadline is not None:
                self._alarm_at(deadline)
            await workflow.wait_condition(lambda: self._wake)

    def _should_continue_as_new(self) -> bool:
        info = workflow.info()
        return info.is_continue_as_new_suggested() or info.get_current_history_length() >= self.state.history_limit

    def _alarm_at(self, deadline: float) -> None:
        """Wake the loop at `deadline` (workflow time), unless an alarm already rings at or before it.

        Alarms are never cancelled: one that rings early only makes the loop look again and set the next.
        Cancelling a timer in the activation it fires in is what a workflow must not ask of the server,
        and it would cost history events for every nudge besides.
        """
        if any(alarm <= deadline for alarm in self._alarms):
            return
        self._alarms.append(deadline)

        async def ring() -> None:
            await asyncio.sleep(max(deadline - workflow.time(), 0.001))
            self._alarms.remove(deadline)
            self._wake = True

        asyncio.create_task(ring())  # noqa: RUF006 - a workflow task runs until its timer fires

    async def _fire(self, early: float) -> None:
        state = self.state
        # Woken early for a step: the driver waits out the rest before it reads the lane, not after.
        due = state.clock.due_at
        settle = 0.0 if due is None else min(max(due - workflow.time(), 0.0), early)
        try:
            report: FireReport = await workflow.execute_local_activity(
                "orchestrator.fire",
                FireRequest(
                    address=state.address,
                    lane_now=workflow.now().timestamp(),
                    early=early,
                    settle=settle,
                    time_skipping=state.time_skipping,
                ),
                result_type=FireReport,
                start_to_close_timeout=ACTIVITY_TIMEOUT,
                retry_policy=FIRE_RETRY,
            )
        except (ActivityError, ApplicationError) as err:
            self._in_trouble(err)
            return
        state.trouble = None
        state.clock = reported(state.clock, report.news, workflow.time())
        state.outcomes = [*state.outcomes, *report.outcomes][-LANE_OUTCOMES:]

    def _in_trouble(self, err: ActivityError | ApplicationError) -> None:
        """A step failed past its quick retries: try again later, on a timer, and say so (`trouble`)."""
        # A local activity's failure may come as its own error, not wrapped in an ActivityError.
        cause = err.cause if isinstance(err, ActivityError) else err
        state, now = self.state, workflow.time()
        failures = (state.trouble.failures if state.trouble else 0) + 1
        delay = min(2.0**failures, TROUBLE_BACKOFF_MAX_SECONDS)
        state.trouble = LaneTrouble(
            since=state.trouble.since if state.trouble else now,
            failures=failures,
            error=str(cause or err)[:1000],
            retry_at=now + delay,
        )
        # The database away (`engine.quiet_outages` makes that a benign error) is every lane's at once: the worker's
        # router says it once, and each lane's `trouble` keeps it; a line a lane a retry would bury the rest.
        away = isinstance(cause, ApplicationError) and cause.category == ApplicationErrorCategory.BENIGN
        say = workflow.logger.debug if away else workflow.logger.warning
        say("lane step failed %d times; trying again in %.0f s: %s", failures, delay, cause)

    async def _announce_silence(self) -> None:
        """Write the `lane.idle` event (once per silence); the router queues it back into this lane."""
        state = self.state
        clock = state.clock
        after = clock.idle_after_seconds
        assert after is not None
        try:
            later: LaneNews | None = await workflow.execute_local_activity(
                "orchestrator.lane_idle",
                IdleNotice(
                    address=state.address,
                    lane_workflow_id=workflow.info().workflow_id,
                    last_event_id=clock.last_event_id,
                    after_seconds=after,
                ),
                result_type=LaneNews,
                start_to_close_timeout=ACTIVITY_TIMEOUT,
                retry_policy=FIRE_RETRY,
            )
        except (ActivityError, ApplicationError) as err:
            self._in_trouble(err)
            return
        if later is not None:
            # Events came that no nudge told of (a lane with events waiting is not nudged again): the silence is
            # counted again from the newest, and nothing was written. (None: written; all a step before this said.)
            state.clock = nudged(clock, later, workflow.time())
            return
        state.clock = clock.model_copy(update={"idle_announced_after": clock.last_event_id})
