"""Nudging a lane: the one signal a lane workflow takes, sent with signal-with-start.

Owns the start of lanes: a nudge starts the lane's workflow when none runs (it ended when idle, was
terminated, or never ran), so whoever nudges (the router, a run's end, a command) never needs to know
whether the lane lives. What a nudge says is `LaneNews`: when the lane should step, in seconds from now.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from temporalio.client import Client
from temporalio.common import WorkflowIDReusePolicy

from orchestrator.config import Settings
from orchestrator.core.lane_clock import LaneNews
from orchestrator.core.lane_snapshot import LaneAddress
from orchestrator.telemetry import LANE_WORKFLOW
from orchestrator.workflows.messages import NUDGE_SIGNAL, LaneStart
from orchestrator.workflows.messages import LaneAddress as LaneName

log = logging.getLogger(__name__)


class Nudger:
    """Sends nudges to lanes on one Temporal client, and counts them (for benchmarks and status)."""

    # Every nudge this process has sent, whoever sent it (the router, a run's end, a command).
    sent_total = 0

    def __init__(self, temporal: Client, settings: Settings) -> None:
        self.temporal = temporal
        self.settings = settings
        self.sent = 0

    async def nudge(self, address: LaneAddress, news: LaneNews) -> None:
        await self.temporal.start_workflow(
            LANE_WORKFLOW,
            LaneStart(
                address=LaneName(session_id=address.session_id, listener=address.listener, lane=address.lane),
                history_limit=self.settings.lane_history_limit,
                idle_exit_seconds=self.settings.lane_idle_exit_seconds,
                time_skipping=self.settings.temporal_time_skipping,
                timer_resolution=self.settings.temporal_timer_resolution_seconds,
            ),
            id=address.workflow_id,
            task_queue=self.settings.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            start_signal=NUDGE_SIGNAL,
            start_signal_args=[news],
        )
        self.sent += 1
        Nudger.sent_total += 1

    async def nudge_quietly(self, address: LaneAddress, news: LaneNews) -> None:
        """A nudge whose loss costs a delay, not an event (the lane rechecks, the router's poll nudges again)."""
        try:
            await self.nudge(address, news)
        except Exception:
            log.warning("could not nudge lane %s", address.workflow_id, exc_info=True)


async def nudge_lanes(temporal: Client | None, settings: Settings, lanes: Iterable[LaneAddress]) -> None:
    """Nudge the lanes a command has given work (a resume, a replay) to step now. A door without Temporal
    leaves them to the router's poll, which nudges lanes whose events wait past their window and a grace."""
    if temporal is None:
        return
    nudger = Nudger(temporal, settings)
    for address in lanes:
        await nudger.nudge_quietly(address, LaneNews(due_in=0.0))
