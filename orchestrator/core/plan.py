"""An app's declarations as a plan: what applying them adds, changes and removes on the platform.

Owns the comparison of what an app module declares (its event types, captured tables and listeners, each a
command's body) with
what the platform holds and which app declared each (`app_declarations`): a name the app declares and the
platform lacks is added; one whose body differs is changed; one this app declared before and no longer does is
removed, except an event type a capture declares, which is restored (its capture's again). What another app, or a
person through the commands, declared is never removed by this one; a declaration a person saved is adopted by the
app that declares its name (`was`: the caller refuses another app's unless the app takes it over). Pure:
`orchestrator plan` prints it, and `dev` and `worker --app` apply it at start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["event_type", "capture", "listener", "schedule"]
# Added and changed in this order (a capture declares types, a listener may name them, a schedule's firing
# wakes listeners); removed in reverse.
KINDS: tuple[Kind, ...] = ("event_type", "capture", "listener", "schedule")
# `restore`: an event type the app declared and no longer does, handed back to the capture that declares it.
Action = Literal["add", "change", "remove", "keep", "restore"]


@dataclass(frozen=True)
class Step:
    kind: Kind
    name: str
    action: Action
    # The body to save (add, change, restore); None for a removal or a name kept as it is.
    body: Mapping[str, Any] | None = None
    # Who declared it before, when that was another app or nobody's app (a change or a keep adopts it).
    was: str | None = None

    def line(self) -> str:
        adopted = f" (was {self.was}'s)" if self.action == "change" and self.was else ""
        restored = " (its capture's again)" if self.action == "restore" else ""
        return f"{self.action:<7} {self.kind.replace('_', ' ')} {self.name}{adopted}{restored}"


@dataclass(frozen=True)
class Held:
    """What the platform holds under a name: its body as stored, and the app that declared it (None: a person
    through the commands)."""

    body: Mapping[str, Any]
    app: str | None


def declared_name(kind: Kind, body: Mapping[str, Any]) -> str:
    """What names a declaration of `kind`: a capture its table, a schedule its session's alias and its own."""
    if kind == "capture":
        return str(body["table"])
    if kind == "schedule":
        # Aliases hold no space (they may hold `:` and `/`), so " in " parts the two whatever they hold.
        return f"{body['alias']} in {body['session_alias']}"
    return str(body["name"])


def schedule_of(name: str) -> tuple[str, str]:
    """A declared schedule's session alias and its own alias, from its name (`declared_name`)."""
    alias, _, session_alias = name.partition(" in ")
    return session_alias, alias


def plan(
    app: str,
    declared: Mapping[Kind, Sequence[Mapping[str, Any]]],
    held: Mapping[Kind, Mapping[str, Held]],
    captured: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Step]:
    """The steps that bring the platform to `app`'s declarations: event types first, then captures (listeners may
    name the types of either), removals in the reverse order, each kind by name. `captured`: the event types the
    captures declare once the plan is applied, each its capture's body; one the app stops declaring is restored
    to it, never removed (its capture goes on writing its events)."""
    captured = captured or {}
    steps: list[Step] = []
    for kind in KINDS:
        found = held.get(kind, {})
        names = set()
        for body in declared.get(kind, ()):
            name = declared_name(kind, body)
            names.add(name)
            current = found.get(name)
            if current is None:
                steps.append(Step(kind, name, "add", body))
            else:
                was = None if current.app == app else current.app or "nobody"
                action: Action = "change" if dict(current.body) != dict(body) else "keep"
                steps.append(Step(kind, name, action, body if action == "change" else None, was))
        gone = sorted(name for name, current in found.items() if current.app == app and name not in names)
        for name in gone:
            own = captured.get(name) if kind == "event_type" else None
            steps.append(Step(kind, name, "remove") if own is None else Step(kind, name, "restore", own))
    removals = [s for s in steps if s.action == "remove"]
    kept = [s for s in steps if s.action != "remove"]
    return kept + sorted(removals, key=lambda s: (-KINDS.index(s.kind), s.name))


def changes(steps: Sequence[Step]) -> list[Step]:
    """The steps that change something (a plan of only `keep` is empty)."""
    return [s for s in steps if s.action != "keep"]


__all__ = ["KINDS", "Held", "Step", "changes", "declared_name", "plan", "schedule_of"]
