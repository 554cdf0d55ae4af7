"""The engine's activities: a lane's steps, a run's end, a lane's silence.

Owns the Temporal face of the lane driver (`orchestrator/lanes/driver.py`): `orchestrator.fire`, the local
activity a lane workflow steps its lane with; `orchestrator.run_ended`, which a run reports its own end with (see
`workflows/run_end.py`); and `orchestrator.lane_idle`, which writes a lane's `lane.idle` event.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from temporalio import activity

from orchestrator.activities.base import PlatformActivities
from orchestrator.activities.writes import StoreWriter
from orchestrator.core.errors import CommandError
from orchestrator.core.lane_clock import LaneNews
from orchestrator.core.lane_snapshot import LaneAddress
from orchestrator.lanes.driver import LaneDriver
from orchestrator.lanes.executions import TemporalRuns
from orchestrator.lanes.nudges import Nudger
from orchestrator.telemetry import METRICS
from orchestrator.workflows.messages import FireReport, FireRequest, IdleNotice, RunEnd
from orchestrator.workflows.run_end import RUN_ENDED_ACTIVITY

log = logging.getLogger(__name__)

# Lanes whose next batch a worker reads while their run runs, at most: a thousand envelopes each.
READ_AHEAD_LANES = 8


class LaneActivities(PlatformActivities):
    def all(self) -> list[Callable[..., Any]]:
        return [self.fire, self.run_ended, self.lane_idle]

    @functools.cached_property
    def driver(self) -> LaneDriver:
        """The driver of a worker: its store's lanes, runs on Temporal, writes through the store. One per worker,
        so a lane's read ahead (taken when its drive ends waiting for its run) is there for its run's end."""
        assert self.temporal is not None
        return LaneDriver(
            self.store.lanes,
            self.settings,
            TemporalRuns(self.temporal, self.settings),
            StoreWriter(self.store, self.settings),
            Nudger(self.temporal, self.settings),
            self.registered_workflows,
            read_ahead=READ_AHEAD_LANES,
        )

    @activity.defn(name="orchestrator.fire")
    async def fire(self, request: FireRequest) -> FireReport:
        """Step the lane until it waits, and hand on the slots its steps freed."""
        address = request.address
        lane = LaneAddress(address.session_id, address.listener, address.lane, activity.info().workflow_id or "")
        driver = self.driver
        try:
            drive = await driver.drive(
                lane,
                lane_now=request.lane_now,
                early=request.early,
                settle=request.settle,
                time_skipping=request.time_skipping,
            )
        except Exception:
            METRICS.fire_failures.add(1, {"listener": address.listener})
            raise
        if drive.handed:
            await driver.hand_on(drive.handed)
        return FireReport(news=drive.news(), outcomes=drive.outcomes)

    @activity.defn(name=RUN_ENDED_ACTIVITY)
    async def run_ended(self, end: RunEnd) -> None:
        await self.driver.end(end.tag, end.status, end.error, end.error_type, at=end.at)

    @activity.defn(name="orchestrator.lane_idle")
    async def lane_idle(self, notice: IdleNotice) -> LaneNews | None:
        """Write a lane's `lane.idle` event (once per silence), unless events came to the lane that it was not
        told of: then nothing is written and its newest event is answered, for the lane to count from. A lane is
        nudged only when it turns pending, so one whose events wait (paused, its slot held, throttled) learns of
        later events only here or at its next step.

        It carries the listener as its source, so it never reaches that listener by its filter; the router
        queues it back into its own lane, while other listeners that want `lane.idle` events get it as any.
        """
        address = notice.address
        try:
            await self.store.get_listener(address.listener)
        except CommandError:
            return None  # the listener is gone: nobody to tell
        newest = await self.store.lane_newest(address.session_id, address.listener, address.lane)
        if newest is not None and newest[0] > notice.last_event_id:
            # The silence is the newest event's: counted from it (announced at once when it is over already).
            return LaneNews(idle_after_seconds=notice.after_seconds, last_event_id=newest[0], last_event_age=newest[1])
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
            # Time caused it: the lane's silence after its last event.
            cause={"idle": {"listener": address.listener, "lane": address.lane, "after": notice.last_event_id}},
        )
        return None
