"""The command surface of SPEC section 8: one registry that every door dispatches through."""

from orchestrator.commands import (
    app_events,
    captures,
    events,
    explain,
    graphs,
    keys,
    listeners,
    objects,
    replays,
    runs,
    schedules,
    sessions,
    simulate,
    threads,
)
from orchestrator.commands.registry import COMMANDS, dispatch

__all__ = [
    "COMMANDS",
    "app_events",
    "captures",
    "dispatch",
    "events",
    "explain",
    "graphs",
    "keys",
    "listeners",
    "objects",
    "replays",
    "runs",
    "schedules",
    "sessions",
    "simulate",
    "threads",
]
