"""Declared listeners on Temporal and PostgreSQL.

The public surface is `Client` (the Python door to the commands), `CommandError` (an error reply raised by
the client's typed methods) and `Settings`. They load on first use, so that importing a pure submodule
such as `orchestrator.core` (which workflow code does inside Temporal's sandbox) pulls in no HTTP client
and no settings machinery.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.client import Client
    from orchestrator.config import Settings
    from orchestrator.core.errors import CommandError

__all__ = ["Client", "CommandError", "Settings"]

_EXPORTS = {
    "Client": "orchestrator.client",
    "CommandError": "orchestrator.core.errors",
    "Settings": "orchestrator.config",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'orchestrator' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
