"""What the platform itself runs beside the user's app: the lane engine's parts, handed to the runtime.

Owns the list of platform workflows, activities and background tasks (the router that reads the event
stream and signals lanes; retention, which deletes what is kept past its time). The runtime calls
`platform_components` once per process and passes the workflows and activities to `build_worker`; each
background task runs until it is cancelled at shutdown.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any, NamedTuple

from temporalio.client import Client

from orchestrator.activities.lanes import LaneActivities
from orchestrator.activities.schedules import ScheduleActivities
from orchestrator.activities.session import SessionActivities
from orchestrator.app_loader import UserApp, workflow_names
from orchestrator.commands.schedules import make_unmade_schedules
from orchestrator.engine.probe_pruning import ProbePruning
from orchestrator.engine.router import Router
from orchestrator.engine.run_sweep import RunSweep
from orchestrator.engine.wait_answers import WaitTeller
from orchestrator.lanes.executions import TemporalRuns
from orchestrator.lanes.registry import WorkflowRegistry
from orchestrator.lanes.retention import Retention
from orchestrator.platform import Platform
from orchestrator.workflows.lane import LaneWorkflow
from orchestrator.workflows.schedule_clock import ScheduleClockWorkflow
from orchestrator.workflows.schedule_fire import ScheduleFireWorkflow

BackgroundTask = Callable[[], Coroutine[Any, Any, None]]
PLATFORM_WORKFLOWS: tuple[type, ...] = (LaneWorkflow, ScheduleFireWorkflow, ScheduleClockWorkflow)


class PlatformComponents(NamedTuple):
    workflows: Sequence[type] = ()
    activities: Sequence[Callable[..., Any]] = ()
    # Long-running coroutines (started once, cancelled on shutdown), e.g. the event router.
    background_tasks: Sequence[BackgroundTask] = ()
    router: Router | None = None
    # The app's workflows, said to the store (`registry.say()` before the worker is announced ready).
    registry: WorkflowRegistry | None = None


def platform_components(platform: Platform, temporal_client: Client, app: UserApp) -> PlatformComponents:
    """The platform's own workflows, activities and background tasks for one worker process."""
    engine = LaneActivities(
        platform.store,
        platform.settings,
        temporal_client,
        workflow_names(app.workflows),
    )
    registry = WorkflowRegistry(platform.store, workflow_names(app.workflows))
    runs = TemporalRuns(temporal_client, platform.settings)
    teller = WaitTeller(platform.store, runs, engine.driver)
    router = Router(
        platform.store,
        platform.store.lanes,
        temporal_client,
        platform.direct_url,
        platform.settings,
        upkeep=[lambda: make_unmade_schedules(platform), ProbePruning(platform.store.pool), teller.upkeep],
        sweep=RunSweep(platform.store.lanes, engine.driver, runs, platform.settings),
        teller=teller,
    )
    return PlatformComponents(
        workflows=PLATFORM_WORKFLOWS,
        activities=[
            *engine.all(),
            *SessionActivities(platform.store, platform.settings, temporal_client).all(),
            *ScheduleActivities(
                platform.store, platform.settings, temporal_client, workflow_names(app.workflows)
            ).all(),
        ],
        background_tasks=(router.run, Retention(platform.store, temporal_client, platform.settings).run, registry.run),
        router=router,
        registry=registry,
    )
