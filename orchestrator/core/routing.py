"""Routing: which lanes of which listeners an event goes to.

Owns the matching of committed events against every listener version: the version in effect at the
event's commit (saved listeners take effect after the activation delay; events committed before are not
theirs), its filter, never a listener named in the event's `source.listener`, and the lane key. A lane's
own `lane.idle` event (its silence, which the lane wrote itself) goes back to that lane whatever the filter
says. Reading the stream, queueing and nudging are the router's (`orchestrator/engine/router.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from orchestrator.core.declaration import ListenerDeclaration
from orchestrator.core.filters import listener_accepts, mismatch
from orchestrator.core.lane_keys import lane_key


@dataclass(frozen=True)
class ListenerVersion:
    name: str
    version: int
    effective_at: datetime
    declaration: ListenerDeclaration
    body: dict[str, Any]


def versions_by_name(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[ListenerVersion]]:
    """Stored listener versions (`name`, `version`, `effective_at` as ISO text, `body`), grouped by name in
    the order given."""
    versions: dict[str, list[ListenerVersion]] = {}
    for row in rows:
        versions.setdefault(row["name"], []).append(
            ListenerVersion(
                name=row["name"],
                version=row["version"],
                effective_at=datetime.fromisoformat(row["effective_at"]),
                declaration=ListenerDeclaration.model_validate(row["body"]),
                body=row["body"],
            )
        )
    return versions


@dataclass
class LaneDelivery:
    """What one lane gets from one routing round: the newest version that matched, and its events."""

    listener: str
    lane: str
    version: int
    declaration: ListenerDeclaration
    events: list[dict[str, Any]] = field(default_factory=list)


def own_silence(envelope: dict[str, Any]) -> tuple[str, str] | None:
    """The (listener, lane) whose own `lane.idle` event this is, or None for any other event."""
    data = envelope.get("data")
    if envelope.get("type") != "lane.idle" or not isinstance(data, dict):
        return None
    listener, lane = data.get("listener"), data.get("lane")
    return (listener, lane) if isinstance(listener, str) and isinstance(lane, str) else None


def in_effect(versions: Sequence[ListenerVersion], created_at: datetime) -> ListenerVersion | None:
    """The newest version (versions ascending) that had taken effect when the event was committed."""
    for version in reversed(versions):
        if version.effective_at <= created_at:
            return version
    return None


def route(
    events: Iterable[tuple[dict[str, Any], datetime]],
    listeners: Mapping[str, Sequence[ListenerVersion]],
) -> list[LaneDelivery]:
    """Group (envelope, commit time) pairs, in id order, into one delivery per (listener, lane)."""
    deliveries: dict[tuple[str, str], LaneDelivery] = {}
    for envelope, created_at in events:
        silence = own_silence(envelope)
        for name in sorted(listeners):
            version = in_effect(listeners[name], created_at)
            if version is None:
                continue
            if silence is not None and silence[0] == name:
                lane = silence[1]
            elif listener_accepts(version.declaration, envelope):
                lane = lane_key(version.declaration.concurrency, envelope)
            else:
                continue
            delivery = deliveries.get((name, lane))
            if delivery is None:
                delivery = deliveries[(name, lane)] = LaneDelivery(name, lane, version.version, version.declaration)
            elif version.version > delivery.version:
                delivery.version, delivery.declaration = version.version, version.declaration
            delivery.events.append(envelope)
    return list(deliveries.values())


def routing_decision(
    name: str, versions: Sequence[ListenerVersion], envelope: dict[str, Any], committed: datetime
) -> dict[str, Any]:
    """Whether routing gives the event to the listener, and the lane; or why not (`reason`: `activation`,
    `self_wake` or `filter`, with a `message`). `route` decides the same, for many events at once."""
    version = in_effect(versions, committed)
    if version is None:
        return {"matched": False, "reason": "activation", "message": "no version had taken effect at its commit"}
    silence = own_silence(envelope)
    if silence is not None and silence[0] == name:
        return {"matched": True, "version": version.version, "lane": silence[1]}
    source = envelope.get("source") or {}
    if source.get("listener") == name:
        return {"matched": False, "reason": "self_wake", "message": "written by this listener's own run or action"}
    why = mismatch(version.declaration.filter, envelope)
    if why is not None:
        return {"matched": False, "reason": "filter", "message": why}
    return {"matched": True, "version": version.version, "lane": lane_key(version.declaration.concurrency, envelope)}
