"""Pacing: how often the router signals one lane, and what it holds back between two signals.

Owns the rule that decides, for each routing round, which lanes get a signal now and which keep their new
events back a little longer. Every signal is a workflow task of its lane (about four history events and a
few milliseconds of the server's CPU), while a lane only needs its events by the time its window closes.
So a lane signalled less than its pace ago keeps what is new until that pace has passed, and then gets it
all in one signal. A lane not signalled lately gets its first event at once, so a lone event, the state a
lane shows, and every quiet stream are as prompt as without pacing.

The pace of a lane is its window less a margin, at most PACE_CAP: the events held back reach the lane
before the window that should take them closes. Pacing stops when that window is over: the lane then cuts
the moment its slot is free, and should have everything by then. Each signal says how long its oldest
event was held, and the lane opens a window for it as of then, not as of the signal: holding back never
makes an event wait longer than its window.

A lane that has events it has not fired BLOCKED_AFTER_SECONDS after their window closed is blocked: its
slot has been taken for a while (a slow run in flight, or every key slot of a keyed listener). New events
would only wake it to wait, so they are held until the lane fires (the fire activity records how far it
has fired, `lanes.fired_through`, and tells the router), and then go in one signal, or after
BLOCKED_HOLD_SECONDS at the latest. Under a burst behind a few slots this turns a signal per lane per pace
into a few per batch. What a blocked lane is not sent, its next batch does not take: that is why a
lane is blocked only after a while, so a lane whose runs are short (a serial lane under a burst) keeps
getting its events before its run ends, and its next batch takes them all.

Nothing here is durable; the router saves its position only before the first event it holds
(`first_held_id`), so a router that stops while holding events lets the next one deliver them again. Pure:
every function returns new values and changes none it was given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.core.routing import LaneDelivery

# What a lane's pace leaves of its window for the held events to travel (the signal, the lane's task) so that
# they arrive before the window closes; a window this short or shorter is never paced.
PACE_MARGIN_SECONDS = 0.25
# The longest a lane's new events are held: what a lane's `state` may lag behind the stream, and what the
# router holds in memory and delivers again after a restart.
PACE_CAP_SECONDS = 2.0
# How long after its window closed a lane that has not fired counts as blocked.
BLOCKED_AFTER_SECONDS = 1.0
# The longest a blocked lane's new events are held (what its `state` may lag behind the stream while a long
# run holds its slot).
BLOCKED_HOLD_SECONDS = 5.0

LaneId = tuple[str, str]  # (listener, lane)


def lane_window(declaration: Mapping[str, Any]) -> float:
    return float((declaration.get("batch") or {}).get("window_seconds", 0) or 0)


def lane_pace(declaration: Mapping[str, Any]) -> float:
    """The shortest time between two signals to a lane of this listener (0: signal every round)."""
    return min(max(lane_window(declaration) - PACE_MARGIN_SECONDS, 0.0), PACE_CAP_SECONDS)


@dataclass(frozen=True)
class HeldLane:
    """A lane's events held back since `since` (the router's clock, when it read the oldest of them)."""

    delivery: LaneDelivery
    since: float


@dataclass(frozen=True)
class Pacing:
    """One session's lanes as the router paces them: what each holds, when each may be signalled next, and
    for lanes that may have events they have not fired, the last id signalled and since when they have."""

    held: Mapping[LaneId, HeldLane] = field(default_factory=dict)
    next_at: Mapping[LaneId, float] = field(default_factory=dict)
    sent_through: Mapping[LaneId, int] = field(default_factory=dict)
    unfired_since: Mapping[LaneId, float] = field(default_factory=dict)


@dataclass(frozen=True)
class DueSignal:
    """A lane to signal now with `delivery`, whose oldest event was held `held_seconds`."""

    delivery: LaneDelivery
    held_seconds: float


def merge(older: LaneDelivery, newer: LaneDelivery) -> LaneDelivery:
    """One delivery with both deliveries' events in id order and the newer listener version of the two."""
    version, body = (newer.version, newer.body) if newer.version >= older.version else (older.version, older.body)
    return LaneDelivery(
        listener=older.listener,
        lane=older.lane,
        version=version,
        body=body,
        events=[*older.events, *newer.events],
        traces={**older.traces, **newer.traces},
    )


def pace(
    pacing: Pacing, deliveries: Sequence[LaneDelivery], now: float, fired: Mapping[LaneId, int] | None = None
) -> tuple[list[DueSignal], Pacing]:
    """Add this round's `deliveries` to what is held; answer the lanes to signal now, and the new pacing.

    `fired` is how far each lane has fired (None: not looked up this round; `unfired` tells when to). A lane
    that has fired all it was signalled is ready for more at once. Otherwise a lane is due when its pace has
    passed since its last signal and it is not blocked, or when its oldest held event has waited
    BLOCKED_HOLD_SECONDS. A due lane's next signal may go no earlier than its pace from now.
    """
    held = dict(pacing.held)
    for delivery in deliveries:
        lane = (delivery.listener, delivery.lane)
        before = held.get(lane)
        held[lane] = HeldLane(merge(before.delivery, delivery), before.since) if before else HeldLane(delivery, now)
    next_at = {lane: at for lane, at in pacing.next_at.items() if at > now}
    sent_through, unfired_since = dict(pacing.sent_through), dict(pacing.unfired_since)
    for lane in list(unfired_since):
        if fired is not None and fired.get(lane, 0) >= sent_through[lane]:
            del unfired_since[lane], sent_through[lane]
            next_at.pop(lane, None)
    due: list[DueSignal] = []
    for lane, waiting in sorted(held.items()):
        closed = _window_over_at(lane, waiting, unfired_since)
        blocked = closed is not None and now >= closed + BLOCKED_AFTER_SECONDS
        paced = lane in next_at and now < _paced_until(next_at[lane], closed)
        if (blocked or paced) and now < waiting.since + BLOCKED_HOLD_SECONDS:
            continue
        due.append(DueSignal(waiting.delivery, max(now - waiting.since, 0.0)))
        del held[lane]
        sent_through[lane] = max(int(e["id"]) for e in waiting.delivery.events)
        unfired_since.setdefault(lane, waiting.since)
        every = lane_pace(waiting.delivery.body)
        if every > 0:
            next_at[lane] = now + every
    return due, Pacing(held=held, next_at=next_at, sent_through=sent_through, unfired_since=unfired_since)


def _window_over_at(lane: LaneId, waiting: HeldLane, unfired_since: Mapping[LaneId, float]) -> float | None:
    """When the lane's open window is over (it cuts as soon as its slot is free, with what it has by then)."""
    if lane not in unfired_since:
        return None
    return unfired_since[lane] + lane_window(waiting.delivery.body)


def _paced_until(next_at: float, window_over_at: float | None) -> float:
    """Until when pacing holds a lane's events: its next signal, but never past its window (less the margin)."""
    return next_at if window_over_at is None else min(next_at, window_over_at - PACE_MARGIN_SECONDS)


def unfired(pacing: Pacing) -> bool:
    """Whether some lane may have events it has not fired: the router then looks up how far lanes fired."""
    return bool(pacing.unfired_since)


def first_held_id(pacing: Pacing) -> int | None:
    """The smallest event id held back for any lane: the router's saved position must stay below it."""
    ids = [int(held.delivery.events[0]["id"]) for held in pacing.held.values() if held.delivery.events]
    return min(ids, default=None)


def next_due(pacing: Pacing, now: float) -> float | None:
    """When a held lane may next fall due on the clock (router's), or None when nothing is held.

    A blocked lane falls due when it has fired too, which the router learns by a notification.
    """
    times = []
    for lane, held in pacing.held.items():
        times.append(held.since + BLOCKED_HOLD_SECONDS)
        if lane in pacing.next_at:
            times.append(_paced_until(pacing.next_at[lane], _window_over_at(lane, held, pacing.unfired_since)))
    # A time already past is left out (a blocked lane's pace, say: the lane waits for its fire, not the clock),
    # unless nothing is left: then a lane held its longest while the round was signalling, and is due now.
    later = [t for t in times if t > now]
    return min(later, default=now if times else None)
