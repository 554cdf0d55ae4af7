"""Routing: which lanes of which listeners an event goes to.

Owns the matching of committed events against every listener version: the version in effect at the
event's commit (saved listeners take effect after the activation delay; events committed before are not
theirs), its filter, never a listener named in the event's `source.listener`, and the lane key. Reading
the stream, positions and signalling are the router's (`orchestrator/router.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from orchestrator.core.declaration import ListenerDeclaration
from orchestrator.core.filters import listener_accepts
from orchestrator.core.lane_keys import lane_key


@dataclass(frozen=True)
class ListenerVersion:
    name: str
    version: int
    effective_at: datetime
    declaration: ListenerDeclaration
    body: dict[str, Any]


@dataclass
class LaneDelivery:
    """What one lane gets from one routing round: the newest version that matched, and its events."""

    listener: str
    lane: str
    version: int
    body: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    # The W3C traceparent of each traced event's routing span, by event id (the router fills it in).
    traces: dict[int, str] = field(default_factory=dict)


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
        for name in sorted(listeners):
            version = in_effect(listeners[name], created_at)
            if version is None or not listener_accepts(version.declaration, envelope):
                continue
            lane = lane_key(version.declaration.concurrency, envelope)
            delivery = deliveries.get((name, lane))
            if delivery is None:
                delivery = deliveries[(name, lane)] = LaneDelivery(name, lane, version.version, version.body)
            elif version.version > delivery.version:
                delivery.version, delivery.body = version.version, version.body
            delivery.events.append(envelope)
    return list(deliveries.values())
