"""The end of a run, and a lane's silence: the engine's activities besides the fire.

Owns recording what happened to a run after its start: `run_ended` (reported by the run itself, see
`workflows/run_end.py`, or by the router's sweep for a run that closed without a word) records its end and
its `execution.ended` event, then, in one transaction under its lane's row lock, either keeps the run's slot
for its repeat (due `min(delay * 2^n, 900)` seconds later) or releases it, handing a keyed listener's key
slot to the lane that has waited longest; the lanes concerned are nudged after the commit. A last failure
writes `listener.failed`. `lane_idle` writes a lane's `lane.idle` event.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from temporalio import activity
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from activities.fire import FireActivities
from orchestrator.core.backoff import retry_delay
from orchestrator.core.errors import CommandError
from orchestrator.store.lane_queues import Nudge
from orchestrator.telemetry import METRICS, log_fields
from workflows.messages import FireRequest, IdleNotice, LaneAddress, RunEnd, RunTag
from workflows.run_end import RUN_ENDED_ACTIVITY

log = logging.getLogger(__name__)

# How a closed run's Temporal status reads as an execution's status.
CLOSED_AS = {
    WorkflowExecutionStatus.COMPLETED: "completed",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.TIMED_OUT: "failed",
    WorkflowExecutionStatus.CANCELED: "stopped",
    WorkflowExecutionStatus.TERMINATED: "stopped",
    WorkflowExecutionStatus.CONTINUED_AS_NEW: None,
}


class RunActivities(FireActivities):
    def all(self) -> list[Callable[..., Any]]:
        return [self.fire, self.run_ended, self.lane_idle]

    @activity.defn(name=RUN_ENDED_ACTIVITY)
    async def run_ended(self, end: RunEnd) -> None:
        await self.record_end(end)

    async def record_end(self, end: RunEnd) -> None:
        """Record a run's end (once), then keep its slot for a repeat or release it."""
        tag = end.tag
        record = {
            "execution_id": tag.execution_id,
            "session_id": tag.session_id,
            "workflow": tag.workflow,
            "listener": tag.listener,
            "status": end.status,
            "error": end.error,
            "depth": tag.depth,
        }
        await self.store.execution_ended(record)
        fields = log_fields(tag.session_id, tag.listener, tag.lane, execution=tag.execution_id)
        log.info("run %s", end.status, extra={**fields, "status": end.status})
        if tag.run_key is None or tag.listener is None:
            return
        store = self.store
        nudges: list[Nudge] = []
        # Lanes waiting for the slot this end frees (its own, or the key's longest waiter).
        freed: list[Nudge] = []
        gave_up = None
        lane_id = await store.pool.fetchval("SELECT lane_id FROM lane_runs WHERE run_key = $1", tag.run_key)
        if lane_id is None:
            return  # recorded already (the run's report and the sweep both came)
        async with store.transaction() as conn:
            lane = await store.lock_lane_by_id(conn, lane_id)
            run = await store.lane_run(conn, tag.run_key)
            if run is None or run.execution_id != tag.execution_id or run.state != "running":
                return
            plan = run.plan
            if end.status == "failed" and run.retry < int(plan["attempts"]):
                delay = retry_delay(float(plan["delay_seconds"]), run.retry)
                await store.wait_for_repeat(conn, run.run_key, delay)
                nudges.append(
                    Nudge(lane.session_id, lane.listener, lane.lane, lane.workflow_id, None, retry_due_in=delay)
                )
                METRICS.retries_waiting.add(1, {"listener": lane.listener})
            else:
                await store.release_slot(conn, run.run_key)
                if end.status == "failed":
                    gave_up = run
                if plan.get("key_slots") is not None:
                    granted = await store.release_key_slot(
                        conn, lane.session_id, lane.listener, lane.lane, int(plan["key_slots"])
                    )
                    if granted is not None:
                        key, workflow_id = granted
                        freed.append(Nudge(lane.session_id, lane.listener, key, workflow_id, None, slot_freed=True))
                if lane.waiting_slot:
                    freed.append(
                        Nudge(lane.session_id, lane.listener, lane.lane, lane.workflow_id, None, slot_freed=True)
                    )
        for nudge in nudges:
            await self.nudger.nudge_quietly(nudge)
        for lane_freed in freed:
            await self.hand_on(lane_freed)
        if gave_up is not None:
            await self.report_failure(tag.session_id, tag.listener, tag.lane or "", gave_up, tag.depth)
        if not nudges:  # a draining session closes as its last run ends, not at the router's next poll
            for closed in await store.close_drained_sessions(tag.session_id):
                log.info("session %s drained and closed", closed, extra=log_fields(closed))

    async def hand_on(self, lane: Nudge) -> None:
        """The slot a run freed goes to `lane`, which waits for one: fire its next batch here and now when its
        window has closed (act's drain: whoever frees a slot dispatches what waits for it, which spares the
        lane a nudge and a workflow task per batch), else nudge it to fire when its window closes."""
        due = await self.store.window_due(lane.session_id, lane.listener, lane.lane)
        if due is None:
            await self.nudger.nudge_quietly(lane)
            return
        pending_age, window = due
        if pending_age >= window:
            request = FireRequest(
                address=LaneAddress(session_id=lane.session_id, listener=lane.listener, lane=lane.lane),
                lane_workflow_id=lane.workflow_id,
                task_queue=self.settings.task_queue,
            )
            try:
                report = await self.step(request)
            except Exception:
                log.warning("could not fire lane %s for the slot it was handed", lane.workflow_id, exc_info=True)
                await self.nudger.nudge_quietly(lane)
                return
            if not report.news.waiting_slot and report.news.pending_age is None:
                return  # it fired what waited; its next event nudges it (the router sees it empty)
            if report.news.waiting_slot:
                return  # what is left waits for the next slot, and whoever frees it hands it on again
            lane = replace(lane, pending_age=report.news.pending_age)
        else:
            lane = replace(lane, pending_age=pending_age)
        await self.nudger.nudge_quietly(lane)

    async def run_status(self, execution_id: str) -> str | None:
        """A run's end as its execution's status, or None while it runs (the router's sweep asks)."""
        assert self.temporal is not None
        try:
            status = (await self.temporal.get_workflow_handle(execution_id).describe()).status
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            return "stopped"  # gone from Temporal altogether (its retention passed)
        if status is None or status == WorkflowExecutionStatus.RUNNING:
            return None
        return CLOSED_AS.get(status)

    async def swept(self, row: dict[str, Any], status: str) -> None:
        """The sweep's record of a run found closed: as if it had reported its end itself."""
        tag = RunTag(
            execution_id=row["id"],
            session_id=row["session_id"],
            workflow=row["workflow"],
            run_key=row["run_key"],
            listener=row["listener"],
            lane=row["lane"],
            depth=row["depth"],
        )
        await self.record_end(RunEnd(tag=tag, status=status, error=f"the run closed as {status} without reporting"))

    @activity.defn(name="orchestrator.lane_idle")
    async def lane_idle(self, notice: IdleNotice) -> None:
        """Write a lane's `lane.idle` event (once per silence).

        It carries the listener as its source, so it never reaches that listener by its filter; the router
        queues it back into its own lane, while other listeners that want `lane.idle` events get it as any.
        """
        address = notice.address
        try:
            await self.store.get_listener(address.listener)
        except CommandError:
            return  # the listener is gone: nobody to tell
        await self.store.append_event(
            address.session_id,
            "lane.idle",
            source={"listener": address.listener},
            data={
                "listener": address.listener,
                "lane": address.lane,
                "last_event_id": notice.last_event_id,
                "after_seconds": notice.after_seconds,
            },
            idempotency_key=f"idle:{notice.lane_workflow_id}:{notice.last_event_id}",
        )
