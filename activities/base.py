"""What every platform activity class is built with, by the worker's composition root."""

from __future__ import annotations

from collections.abc import Collection

from temporalio.client import Client

from orchestrator.config import Settings
from orchestrator.store.engine_records import EngineRecords


class PlatformActivities:
    """The store, the settings, the Temporal client (None where no activity needs one) and the names of
    the workflows the worker registers (empty: not checked)."""

    def __init__(
        self,
        store: EngineRecords,
        settings: Settings,
        temporal: Client | None = None,
        registered_workflows: Collection[str] = (),
    ) -> None:
        self.store = store
        self.settings = settings
        self.temporal = temporal
        self.registered_workflows = frozenset(registered_workflows)
