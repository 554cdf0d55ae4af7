"""The schedule activity: what one firing of a schedule does, and the record of what it did.

Owns performing a schedule's target for one scheduled time: an `object` target is written through the
store's ordinary write path (so a tick is an `object.written` that the router delivers to lanes like any
other write), with `source.client` = `schedule:<alias>` and an idempotency key made of the schedule and the
scheduled time; a `workflow` target is started in the session as `start_execution` starts one, under a run
id made of the same two, so a retried firing neither writes nor starts twice. The result is recorded once
per scheduled time: `success`, `invocation_error` (closed or missing session, unregistered workflow, value
over the payload limit, too many executions) or `access_error` (an alias outside `schedule_owns`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from temporalio import activity

from orchestrator.activities.base import PlatformActivities
from orchestrator.causes import caused_by, schedule_cause
from orchestrator.commands.fields import check_payload
from orchestrator.commands.schedules import schedule_owns
from orchestrator.core.errors import CommandError
from orchestrator.core.globs import owned
from orchestrator.core.schedule_spec import (
    ObjectTarget,
    ScheduleDefinition,
    WorkflowTarget,
    firing_key,
    schedule_timing,
)
from orchestrator.core.schedule_times import next_times
from orchestrator.crossings import crossing
from orchestrator.lanes.executions import TemporalRuns, start_run
from orchestrator.workflows.messages import BatchInfo, RunInput, RunTag
from orchestrator.workflows.schedule_clock import SCHEDULE_NEXT_ACTIVITY, Due, NextFiring
from orchestrator.workflows.schedule_fire import (
    SCHEDULE_FIRE_ACTIVITY,
    SCHEDULE_RUN_RUNNING_ACTIVITY,
    ScheduleFiring,
    ScheduleRunResult,
)


def schedule_execution_id(session_id: str, alias: str, scheduled_at: datetime) -> str:
    """The execution of a workflow target's firing: one per schedule and scheduled time."""
    return f"exe:{session_id}:schedule:{alias}:{scheduled_at.astimezone(UTC).strftime('%Y%m%dT%H%M%SZ')}.0"


class ScheduleActivities(PlatformActivities):
    def all(self) -> list[Callable[..., Any]]:
        return [self.fire_schedule, self.next_firing, self.run_running]

    @activity.defn(name=SCHEDULE_NEXT_ACTIVITY)
    async def next_firing(self, question: NextFiring) -> Due:
        """When the schedule fires after `question.after` (its own clock asks: `schedule_clock.py`); none when it
        is gone, replaced, disabled or over."""
        firing = question.firing
        row = await self.store.find_schedule(firing.session_id, firing.alias)
        if row is None or row["schedule_id"] != firing.schedule_id or not row["enabled"]:
            return Due()
        definition = ScheduleDefinition.model_validate({k: row[k] for k in ScheduleDefinition.model_fields if k in row})
        found = next_times(schedule_timing(definition), question.after)
        return Due(at=found[0] if found else None)

    @activity.defn(name=SCHEDULE_FIRE_ACTIVITY)
    async def fire_schedule(self, firing: ScheduleFiring) -> ScheduleRunResult:
        row = await self.store.find_schedule(firing.session_id, firing.alias)
        if row is None or row["schedule_id"] != firing.schedule_id:
            # Deleted after Temporal started this firing: nothing to do and nobody to report to.
            return ScheduleRunResult(status="skipped", message="the schedule no longer exists")
        definition = ScheduleDefinition.model_validate({k: row[k] for k in ScheduleDefinition.model_fields if k in row})
        scheduled_at = firing.scheduled_at or datetime.now(UTC)
        # What the firing writes or starts was caused by the schedule, at the time it was due.
        cause = schedule_cause(firing.alias, scheduled_at.astimezone(UTC).isoformat(), row.get("set_by"))
        with caused_by(cause):
            # A run's timer: the depth of that run's writes, which the firing's write, or its run's batch, has (0: a
            # schedule of the door's).
            depth = int(row.get("depth") or 0)
            if definition.invocation_target_type == "object":
                result = await self._write(firing, definition.object_target(), scheduled_at, depth)
            else:
                result = await self._start(firing, definition.workflow_target(), scheduled_at, cause, depth)
        crossing("schedule.performed")
        await self.store.record_schedule_run(
            firing.session_id,
            firing.alias,
            scheduled_at,
            result.status,
            result.message,
            result.event_id,
            result.execution_id,
        )
        return result

    @activity.defn(name=SCHEDULE_RUN_RUNNING_ACTIVITY)
    async def run_running(self, execution_id: str) -> bool:
        """Whether the run a firing started still runs, as its record says (its firing holds the schedule's next
        firings off meanwhile); a run with no record ran and was swept, or never started: not running."""
        record = await self.store.execution_record(execution_id)
        return record is not None and record["status"] == "running"

    async def _write(
        self, firing: ScheduleFiring, target: ObjectTarget, scheduled_at: datetime, depth: int
    ) -> ScheduleRunResult:
        if not owned(schedule_owns(self.settings), target.alias):
            return ScheduleRunResult(
                status="access_error", message=f"target.alias: {target.alias!r} is outside schedule_owns"
            )
        try:
            check_payload("target.value", target.value, self.settings.limits.max_payload_bytes)
            _, event_id = await self.store.write_object(
                firing.session_id,
                target.alias,
                target.value,
                source={"client": f"schedule:{firing.alias}"},
                depth=depth,
                idempotency_key=firing_key(firing.schedule_id, scheduled_at),
            )
        except CommandError as err:
            return ScheduleRunResult(status="invocation_error", message=err.message)
        return ScheduleRunResult(status="success", event_id=event_id)

    async def _start(
        self, firing: ScheduleFiring, target: WorkflowTarget, scheduled_at: datetime, cause: dict[str, Any], depth: int
    ) -> ScheduleRunResult:
        session_id = firing.session_id
        try:
            session = await self.store.get_session(session_id)
        except CommandError as err:
            return ScheduleRunResult(status="invocation_error", message=err.message)
        if session["status"] != "open":
            message = f"session_id: session {session_id!r} is {session['status']}"
            return ScheduleRunResult(status="invocation_error", message=message)
        if self.registered_workflows and target.workflow not in self.registered_workflows:
            return ScheduleRunResult(
                status="invocation_error", message=f"target.workflow: {target.workflow!r} is not registered"
            )
        assert self.temporal is not None
        execution_id = schedule_execution_id(session_id, firing.alias, scheduled_at)
        run_input = RunInput(
            session_id=session_id,
            listener="",
            batch=BatchInfo(first_id=0, last_id=0, count=0, retry=0, lane="", event_ids=[], messages=[], events=[]),
            input=target.input,
            execution_id=execution_id,
            depth=depth,
            scheduled=cause["schedule"],
        )
        # A retried firing whose run already ran finds it under its id: started once.
        tag = RunTag(execution_id=execution_id, session_id=session_id, workflow=target.workflow, depth=depth)
        # The session's room for it is counted by its record, under the lock lanes and `start_execution` take.
        limit = self.settings.limits.executions_per_session
        try:
            await start_run(TemporalRuns(self.temporal, self.settings), self.store, tag, run_input, limit=limit)
        except CommandError as err:
            return ScheduleRunResult(status="invocation_error", message=err.message)
        return ScheduleRunResult(status="success", execution_id=execution_id)
