"""A platform activity that fails because the database is away says so in a line, not a traceback an attempt.

While PostgreSQL restarts, every lane step and every run's end fails and is retried: that is how the platform
rides an outage out. Temporal's SDK logs each failed attempt as a warning with its traceback (some 8,000 in a
worker's log over half an hour of the production mix's faults), which buries what an operator needs. An activity
of the platform's (`orchestrator.*`) that fails on a database out of reach fails instead with a benign
`ApplicationError` (the SDK logs those at debug), retried as before and carrying the error's type and text: a
lane's `trouble` still names it, and the router's "lost the database" warning says it once. An application's
own activities are left as they are.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from orchestrator.store.connection import DATABASE_UNAVAILABLE

PLATFORM_ACTIVITIES = "orchestrator."


class QuietOutages(Interceptor):
    """Added to the worker: the platform's activities fail quietly while the database is away."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Quiet(next)


class _Quiet(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        if not activity.info().activity_type.startswith(PLATFORM_ACTIVITIES):
            return await super().execute_activity(input)
        try:
            return await super().execute_activity(input)
        except DATABASE_UNAVAILABLE as err:
            kind = type(err).__name__
            raise ApplicationError(
                f"database: out of reach ({kind}: {err})", type=kind, category=ApplicationErrorCategory.BENIGN
            ) from err
