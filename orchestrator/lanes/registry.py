"""The workflows a worker runs, said to the store when it starts and every minute after.

Owns the worker's side of `worker_workflows`: `start_execution`, in whatever API process it is called, refuses
a workflow no worker has said it runs within `FRESH_SECONDS`, instead of starting a run nothing can run, which
would hold one of the session's `executions_per_session` for good. (A listener's run is checked by the worker
that starts it, against its own workflows.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from orchestrator.store.connection import DATABASE_TROUBLE
from orchestrator.store.engine_records import EngineRecords

log = logging.getLogger(__name__)

# How often a running worker says it again.
SAY_SECONDS = 60.0
# A workflow no worker has named for this long is one nobody runs (a worker gone, or one that dropped it).
FRESH_SECONDS = 300.0
# How a refusal or a warning says so: one phrase, which `orchestrator dev` knows a warning about the app's own
# workflows by (its worker registers them as it starts, after the plan is applied).
NOT_REGISTERED = "no worker has registered"


def not_registered(field: str, workflow: str) -> str:
    """`field: no worker has registered 'w' in the last 5 minutes`: what the caller says next is its own."""
    return f"{field}: {NOT_REGISTERED} {workflow!r} in the last {FRESH_SECONDS / 60:g} minutes"


def registered_text(registered: Sequence[str]) -> str:
    """The workflows workers registered, as a refusal or a warning names them."""
    return ", ".join(registered) or "none (is a worker running?)"


class WorkflowRegistry:
    def __init__(self, store: EngineRecords, names: Sequence[str]) -> None:
        self.store = store
        self.names = sorted(set(names))

    async def say(self) -> None:
        """Say it now: before the worker is announced ready, so a start right after finds its workflows."""
        if self.names:
            await self.store.register_workflows(self.names)

    async def run(self) -> None:
        """Say it again every SAY_SECONDS until cancelled; a database that is away is waited for."""
        while True:
            try:
                await self.say()
            except DATABASE_TROUBLE as err:
                log.warning("could not say which workflows this worker runs (%s); trying again", err)
            await asyncio.sleep(SAY_SECONDS)
