"""What decides when a schedule fires: Temporal's Schedules, or the platform's own clock workflow where the server
has none (the time-skipping test server the kit runs: `settings.temporal_time_skipping`).

Owns the one place the schedule commands reach Temporal: making a schedule's clock, changing it, removing it and
telling its next times. The row in PostgreSQL is the schedule either way; the clock only says when.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleCalendarSpec,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleRange,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.core.errors import NO_TEMPORAL, CommandError
from orchestrator.core.schedule_spec import Calendar, ScheduleTiming, Span
from orchestrator.core.schedule_times import next_times

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext
    from orchestrator.config import Settings

# get_schedule shows this many of the next firing times.
NEXT_INVOCATIONS = 5


class ScheduleClock(Protocol):
    async def make(self, row: dict[str, Any], timing: ScheduleTiming) -> None:
        """Start deciding when the schedule of `row` fires. One found under its id is brought to `row` (the row is
        the truth: left by a schedule whose row is gone, made by another writer of the row, or made from this row
        by a process that died before marking it)."""

    async def change(self, row: dict[str, Any], timing: ScheduleTiming, enabled: bool) -> None: ...

    async def remove(self, schedule_id: str) -> None:
        """Stop it; one already gone is no error."""

    async def describe(self, row: dict[str, Any], timing: ScheduleTiming) -> dict[str, Any]:
        """`next_invocations` (and `invocations`, when the clock counts them) for `get_schedule`."""


def _ranges(spans: tuple[Span, ...]) -> list[ScheduleRange]:
    return [ScheduleRange(span.start, span.end, span.step) for span in spans]


def _calendar(calendar: Calendar) -> ScheduleCalendarSpec:
    return ScheduleCalendarSpec(
        second=_ranges(calendar.second),
        minute=_ranges(calendar.minute),
        hour=_ranges(calendar.hour),
        day_of_month=_ranges(calendar.day_of_month),
        month=_ranges(calendar.month),
        day_of_week=_ranges(calendar.day_of_week),
        year=_ranges(calendar.year),
    )


def temporal_spec(timing: ScheduleTiming) -> ScheduleSpec:
    """Temporal's `ScheduleSpec` for the core's description of a schedule's times."""
    return ScheduleSpec(
        calendars=[_calendar(c) for c in timing.calendars],
        intervals=[]
        if timing.every_seconds is None
        else [ScheduleIntervalSpec(every=timedelta(seconds=timing.every_seconds))],
        start_at=timing.start_at,
        end_at=timing.end_at,
        time_zone_name=timing.time_zone,
    )


def _firing(row: dict[str, Any]) -> Any:
    from orchestrator.workflows.schedule_fire import ScheduleFiring

    return ScheduleFiring(session_id=row["session_id"], alias=row["alias"], schedule_id=row["schedule_id"])


class TemporalSchedules:
    """A Temporal Schedule per schedule, starting `OrchestratorScheduleFire` at each time, overlaps skipped."""

    def __init__(self, client: Client, settings: Settings) -> None:
        self.client = client
        self.settings = settings

    def schedule(self, row: dict[str, Any], timing: ScheduleTiming, enabled: bool) -> Schedule:
        from orchestrator.workflows.schedule_fire import SCHEDULE_FIRE_WORKFLOW

        return Schedule(
            action=ScheduleActionStartWorkflow(
                SCHEDULE_FIRE_WORKFLOW,
                _firing(row),
                id=f"fire:{row['session_id']}:{row['alias']}",
                task_queue=self.settings.task_queue,
            ),
            spec=temporal_spec(timing),
            policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
            state=ScheduleState(
                paused=not enabled,
                limited_actions=timing.fires_once,
                remaining_actions=1 if timing.fires_once else 0,
            ),
        )

    async def make(self, row: dict[str, Any], timing: ScheduleTiming) -> None:
        sid = row["schedule_id"]
        schedule = self.schedule(row, timing, row["enabled"])
        try:
            await self.client.create_schedule(sid, schedule)
        except ScheduleAlreadyRunningError:
            # Brought to this row in place: a delete and a create would leave a moment with no schedule, in which
            # another writer of the same row fails.
            await self.change(row, timing, row["enabled"])

    async def change(self, row: dict[str, Any], timing: ScheduleTiming, enabled: bool) -> None:
        schedule = self.schedule(row, timing, enabled)

        def replace(_: ScheduleUpdateInput) -> ScheduleUpdate:
            return ScheduleUpdate(schedule=schedule)

        await self.client.get_schedule_handle(row["schedule_id"]).update(replace)

    async def remove(self, schedule_id: str) -> None:
        try:
            await self.client.get_schedule_handle(schedule_id).delete()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise

    async def describe(self, row: dict[str, Any], timing: ScheduleTiming) -> dict[str, Any]:
        try:
            described = await self.client.get_schedule_handle(row["schedule_id"]).describe()
        except RPCError:
            return {"next_invocations": []}
        # A paused schedule fires at none (Temporal keeps answering the times it had when it was paused).
        times = described.info.next_action_times[:NEXT_INVOCATIONS] if row["enabled"] else []
        return {
            "next_invocations": [t.astimezone(UTC).isoformat() for t in times],
            "invocations": described.info.num_actions,
        }


class WorkflowClocks:
    """An `OrchestratorScheduleClock` workflow per enabled schedule, under the schedule's id: for a server with no
    Schedules. A change ends it and starts another; the times are the pure core's."""

    def __init__(self, client: Client, settings: Settings) -> None:
        self.client = client
        self.settings = settings

    async def make(self, row: dict[str, Any], timing: ScheduleTiming) -> None:
        from orchestrator.workflows.schedule_clock import SCHEDULE_CLOCK_WORKFLOW

        if not row["enabled"]:
            return
        await self.client.start_workflow(
            SCHEDULE_CLOCK_WORKFLOW,
            _firing(row),
            id=row["schedule_id"],
            task_queue=self.settings.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.TERMINATE_EXISTING,
        )

    async def change(self, row: dict[str, Any], timing: ScheduleTiming, enabled: bool) -> None:
        await self.remove(row["schedule_id"])
        await self.make({**row, "enabled": enabled}, timing)

    async def remove(self, schedule_id: str) -> None:
        with contextlib.suppress(RPCError):  # already ended, or never started (a disabled schedule)
            await self.client.get_workflow_handle(schedule_id).terminate("the schedule changed or was deleted")

    async def describe(self, row: dict[str, Any], timing: ScheduleTiming) -> dict[str, Any]:
        times = next_times(timing, datetime.now(UTC), NEXT_INVOCATIONS) if row["enabled"] else []
        return {"next_invocations": [t.isoformat() for t in times]}


def clock_of(platform: CommandContext) -> ScheduleClock:
    if platform.temporal is None:
        raise CommandError("unavailable", NO_TEMPORAL.format(what="schedules"))
    client: Client = platform.temporal
    if platform.settings.temporal_time_skipping:
        return WorkflowClocks(client, platform.settings)
    return TemporalSchedules(client, platform.settings)
