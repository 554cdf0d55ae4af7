"""A listener's own throttle (`throttle`): at most `runs` of its batches act per `per_seconds`, per key, in a session.

Owns the rule: which key an event counts under, when a key lets the next batch go, and how much of a lane's
queue may go now. Where the starts are kept is the store's (0028_listener_throttle.sql: each key's newest
`runs` start times, one row a key). A key lets a batch go while it has started fewer than `runs`, or once the
oldest of its newest `runs` starts is `per_seconds` old: that is the whole rule, and it stays exact when a
re-save changes either number (a start older than the newest `runs` can never decide). A batch counts once for
each key among its entries, and only a batch that acts (its run starts, or it writes; a repeat too). Unlike the
deployment's `listener_fires_per_minute`, which consumes a batch past it as `throttled`, a batch held here
waits in its lane, which says so and until when (`lane_step.next_move`), and is woken then by its own clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from orchestrator.core.declaration import ThrottleSpec
from orchestrator.core.envelope_paths import resolve_in_event
from orchestrator.core.lane_keys import SHARED_LANE_KEY, key_text
from orchestrator.core.lane_snapshot import Queued
from orchestrator.core.paths import MISSING

# The one key of a throttle with no `key`: every batch of the listener in the session counts under it.
UNKEYED = "_"


def throttle_key(throttle: ThrottleSpec | None, envelope: Mapping[str, Any]) -> str | None:
    """The key an event counts under (None: the listener has no throttle): its value at `key` as a lane key's
    text (`~` when missing, as the lanes share), or `_` when the throttle has no key."""
    if throttle is None:
        return None
    if throttle.key is None:
        return UNKEYED
    value = resolve_in_event(dict(envelope), throttle.key)
    return SHARED_LANE_KEY if value is MISSING else key_text(value)


def free_at(starts: Sequence[float], throttle: ThrottleSpec) -> float | None:
    """When a key whose batches started at `starts` (oldest first) lets the next one go: None while it has
    started fewer than `runs`, else `per_seconds` after the oldest of its newest `runs` starts."""
    if len(starts) < throttle.runs:
        return None
    return starts[-throttle.runs] + throttle.per_seconds


def started(starts: Sequence[float], at: float, runs: int) -> list[float]:
    """A key's starts after one more at `at`: its newest `runs`, oldest first (what the store keeps)."""
    return [*starts, at][-runs:]


def held_until(keys: Iterable[str | None], free: Mapping[str, float], now: float) -> float | None:
    """Until when the throttle holds a batch of these keys (None: it may go now): the latest time one of them
    lets a batch go, of those that do not yet by `now`."""
    times = [free[k] for k in keys if k is not None and k in free and free[k] > now]
    return max(times) if times else None


def free_prefix(waiting: Sequence[Queued], free: Mapping[str, float], now: float) -> tuple[Queued, ...]:
    """The waiting events up to the first whose key the throttle holds: what a batch may take now (a lane keeps
    its order, so what comes after a held event waits with it)."""
    for n, queued in enumerate(waiting):
        if held_until((queued.throttle_key,), free, now) is not None:
            return tuple(waiting[:n])
    return tuple(waiting)
