"""What the platform itself runs beside the user's app: the lane engine's parts, handed to the runtime.

Owns the list of platform workflows, activities and background tasks (the router that reads the event
stream and signals lanes). The runtime calls `platform_components` once per process and passes the
workflows and activities to `build_worker`; each background task runs until it is cancelled at shutdown.
Until the lane engine lands, the platform contributes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any, NamedTuple

from temporalio.client import Client

from orchestrator.platform import Platform

BackgroundTask = Callable[[], Coroutine[Any, Any, None]]


class PlatformComponents(NamedTuple):
    workflows: Sequence[type] = ()
    activities: Sequence[Callable[..., Any]] = ()
    # Long-running coroutines (started once, cancelled on shutdown), e.g. the event router.
    background_tasks: Sequence[BackgroundTask] = ()


def platform_components(platform: Platform, temporal_client: Client) -> PlatformComponents:
    """The platform's own workflows, activities and background tasks for one worker process."""
    return PlatformComponents()
