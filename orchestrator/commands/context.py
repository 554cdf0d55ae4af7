"""What a command's handler is given: the store, the settings, and Temporal (None for a door without it).

A Protocol, so the commands depend on what they use and not on `Platform`, which dispatches to them.
"""

from __future__ import annotations

from typing import Any, Protocol

from orchestrator.config import Settings
from orchestrator.store.engine_records import EngineRecords


class CommandContext(Protocol):
    store: EngineRecords
    settings: Settings
    # A `temporalio.client.Client`, or None where no command needs one (a door with no Temporal).
    temporal: Any
