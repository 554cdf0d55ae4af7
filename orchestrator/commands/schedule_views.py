"""What the schedule commands answer (`schedules.py`): a schedule as stored, with its next firings when asked, and
its firings.

Owns these replies' models only (`replies.py` says what a reply model is). A schedule's `repeat` is the core's
model of it (`schedule_spec`), as its row keeps it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from orchestrator.commands.replies import Reply, Shape
from orchestrator.core.schedule_spec import Repeat

WARNINGS = "when it starts a workflow no worker has said it runs (its firings fail until one does)"


class ScheduleView(Shape):
    """A schedule: where it is, its definition as stored, and whether it fires."""

    session_id: str
    alias: str
    schedule_id: str = Field(description="its Temporal Schedule's id")
    repeat: Repeat
    start_date: str | None
    end_date: str | None
    invocation_target_type: Literal["object", "workflow"]
    target: dict[str, Any] = Field(description="the object it writes (`alias`, `value`) or the workflow it starts")
    origin: dict[str, Any] | None = Field(description="the seed's names for the target, as given")
    depth: int | None = Field(default=None, description="a run's timer: the depth its firings' writes carry")
    set_by: str | None = Field(default=None, description="a run's timer: the run that set it")
    enabled: bool
    created_at: datetime
    updated_at: datetime


class DescribedSchedule(ScheduleView):
    """A schedule, with when it fires next."""

    next_invocations: list[datetime] = Field(description="its next firings (none while it is disabled)")
    invocations: int | None = Field(default=None, description="how often it has fired, when Temporal keeps it")


class ScheduleReply(Reply):
    schedule: ScheduleView
    warnings: list[str] | None = Field(default=None, description=WARNINGS)


class GetScheduleReply(Reply):
    schedule: DescribedSchedule


class DeleteScheduleReply(Reply):
    """The schedule as it was."""

    schedule: ScheduleView


class ListSchedulesReply(Reply):
    schedules: list[ScheduleView]


class ScheduleRun(Shape):
    """One firing of a schedule."""

    scheduled_at: datetime
    status: str
    message: str | None = None
    event_id: int | None = Field(default=None, description="the event it wrote")
    execution_id: str | None = Field(default=None, description="the run it started")
    created_at: datetime


class ListScheduleRunsReply(Reply):
    runs: list[ScheduleRun] = Field(description="oldest first")
