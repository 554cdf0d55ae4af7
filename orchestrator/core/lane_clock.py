"""The lane's clock: when a lane fires next, announces its silence, or ends, from what the store told it.

Owns the whole state of a lane workflow beyond its address: it is O(1) in the lane's waiting events, which
stay in the store. The store speaks to the lane in two ways: a nudge (a signal from the router when the
lane's queue goes from empty to pending, or from the record of a run's end that frees its slot or sets a
repeat's due time) and the report of each fire. Both carry ages measured by PostgreSQL's clock (how long
ago the oldest waiting event and the newest event were committed), which the lane turns into its own time,
so a window is measured from its first event's commit however late the nudge arrives, and no two clocks
are compared. The report of a fire is newer than any nudge the lane has seen, so it replaces what they said.

A lane that found no slot free waits for a nudge; it asks again after SLOT_RECHECK_SECONDS in any case, so a
nudge lost with a crashed worker costs a minute, not the lane.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, ConfigDict

SLOT_RECHECK_SECONDS = 60.0


class Declared(BaseModel):
    """What the lane needs of its listener's declaration: the window (or debounce) and the idle timer."""

    model_config = ConfigDict(frozen=True)

    window_seconds: float = 0.0
    idle_after_seconds: float | None = None
    debounce_seconds: float | None = None
    max_wait_seconds: float | None = None


class LaneNews(BaseModel):
    """What the store says of the lane, at a nudge or after a fire (ages in seconds, by the store's clock).

    `pending_age` is None when nothing waits; `retry_due_in` None when no repeat waits. At a nudge, a field
    left None says nothing (only a fire's report says "nothing waits").
    """

    model_config = ConfigDict(frozen=True)

    declared: Declared | None = None
    pending_age: float | None = None
    last_event_id: int | None = None
    last_event_age: float | None = None
    retry_due_in: float | None = None
    # A fire's report: whether it found every slot taken (the lane waits for a nudge that frees one).
    waiting_slot: bool = False
    # A nudge's: a run of this lane ended (or a key slot was handed to it), so a slot is free.
    slot_freed: bool = False


class LaneClock(BaseModel):
    """The lane's timers, in workflow seconds."""

    declared: Declared = Declared()
    # When the oldest waiting event was committed (its window opened then); None: nothing waits.
    pending_since: float | None = None
    waiting_slot: bool = False
    slot_recheck_at: float | None = None
    retry_due_at: float | None = None
    last_event_id: int = 0
    last_event_at: float | None = None
    # The last event whose silence was announced with `lane.idle` (announced once per silence).
    idle_announced_after: int | None = None
    # When the store last spoke to the lane: it ends once this is `idle_exit_seconds` old with nothing to do.
    active_at: float = 0.0
    fires: int = 0


def _learn_events(clock: LaneClock, news: LaneNews, now: float) -> LaneClock:
    update: dict[str, object] = {"active_at": now}
    if news.declared is not None:
        update["declared"] = news.declared
    if news.last_event_id is not None and news.last_event_age is not None and news.last_event_id >= clock.last_event_id:
        update["last_event_id"] = news.last_event_id
        update["last_event_at"] = now - news.last_event_age
    return clock.model_copy(update=update)


def nudged(clock: LaneClock, news: LaneNews, now: float) -> LaneClock:
    """The clock after a nudge: events wait since `pending_age` ago, a slot was freed, a repeat is due."""
    clock = _learn_events(clock, news, now)
    update: dict[str, object] = {}
    if news.pending_age is not None:
        since = now - news.pending_age
        update["pending_since"] = since if clock.pending_since is None else min(clock.pending_since, since)
    if news.slot_freed:
        update["waiting_slot"], update["slot_recheck_at"] = False, None
    if news.retry_due_in is not None:
        due = now + news.retry_due_in
        update["retry_due_at"] = due if clock.retry_due_at is None else min(clock.retry_due_at, due)
    return clock.model_copy(update=update)


def fired(clock: LaneClock, news: LaneNews, now: float, *, asked_repeat: bool) -> LaneClock:
    """The clock after a fire: its report replaces what the lane believed of its waiting events and slots.

    `asked_repeat`: the fire was asked to start the repeat that was due (`repeat_due` when it was asked).
    """
    clock = _learn_events(clock, news, now)
    retry_due_at = None if news.retry_due_in is None else now + news.retry_due_in
    if retry_due_at is not None and clock.retry_due_at is not None and not asked_repeat:
        # A repeat the lane already waits for keeps its time: the store measures the backoff by its own
        # clock, which may run slower than the lane's (Temporal's time-skipping test server).
        retry_due_at = min(retry_due_at, clock.retry_due_at)
    return clock.model_copy(
        update={
            "pending_since": None if news.pending_age is None else now - news.pending_age,
            "waiting_slot": news.waiting_slot,
            "slot_recheck_at": now + SLOT_RECHECK_SECONDS if news.waiting_slot else None,
            "retry_due_at": retry_due_at,
            "fires": clock.fires + 1,
        }
    )


class WindowRule(Protocol):
    """A window's declaration: a lane's `Declared`, or a stream's `BatchSpec`."""

    @property
    def window_seconds(self) -> float: ...
    @property
    def debounce_seconds(self) -> float | None: ...
    @property
    def max_wait_seconds(self) -> float | None: ...


def window_close(first: float, last: float | None, declared: WindowRule) -> float:
    """When a window closes, on whichever clock `first` (its oldest event) and `last` (its newest) are read.

    `window_seconds` after the oldest; debounced, once the newest has been quiet `debounce_seconds`, or
    `max_wait_seconds` after the oldest, whichever comes first. The lane, the fire, `list_session_listeners`
    and a connection listener's stream all judge a window by this rule.
    """
    if declared.debounce_seconds is None:
        return first + declared.window_seconds
    closes = max(first if last is None else last, first) + declared.debounce_seconds
    if declared.max_wait_seconds is not None:
        closes = min(closes, first + declared.max_wait_seconds)
    return closes


def window_closes_at(clock: LaneClock) -> float | None:
    """When the waiting events' window closes, or None when nothing waits.

    The lane hears of newer events at each fire's report, so a debounced window it thought closed may be
    found still open by the fire, which takes nothing and reports the newer event.
    """
    if clock.pending_since is None:
        return None
    return window_close(clock.pending_since, clock.last_event_at, clock.declared)


def repeat_due(clock: LaneClock, now: float) -> bool:
    """Whether a failed run's repeat is due by the lane's clock (the fire takes the one due first).

    The lane's clock decides, not the store's: on Temporal's time-skipping test server the two part ways.
    """
    return clock.retry_due_at is not None and now >= clock.retry_due_at


def fire_due(clock: LaneClock, now: float) -> bool:
    """Whether the lane should fire now: a window has closed with a slot free, a repeat or a recheck is due."""
    closes = window_closes_at(clock)
    if closes is not None and not clock.waiting_slot and now >= closes:
        return True
    if repeat_due(clock, now):
        return True
    return clock.waiting_slot and clock.slot_recheck_at is not None and now >= clock.slot_recheck_at


def silence_at(clock: LaneClock) -> float | None:
    """When the lane's silence is due to be announced (declared `idle`, not yet announced), or None."""
    idle = clock.declared.idle_after_seconds
    if idle is None or clock.last_event_at is None or clock.idle_announced_after == clock.last_event_id:
        return None
    return clock.last_event_at + idle


def busy(clock: LaneClock) -> bool:
    """Whether the lane has anything to do or wait for besides its silence."""
    return clock.pending_since is not None or clock.waiting_slot or clock.retry_due_at is not None


def done(clock: LaneClock, now: float, idle_exit_seconds: float) -> bool:
    """Whether the lane may end: nothing to do, no silence owed, and quiet for `idle_exit_seconds`."""
    return not busy(clock) and silence_at(clock) is None and now - clock.active_at >= idle_exit_seconds


def next_deadline(clock: LaneClock, idle_exit_seconds: float) -> float | None:
    """The next time something is due on a timer: a window, a repeat, a slot recheck, a silence, the end."""
    deadlines: list[float] = []
    closes = window_closes_at(clock)
    # While every slot is taken a window that closed matters only once a nudge frees one: an alarm for it
    # would ring at once, again and again, for as long as the run lasts.
    if closes is not None and not clock.waiting_slot:
        deadlines.append(closes)
    if clock.retry_due_at is not None:
        deadlines.append(clock.retry_due_at)
    if clock.waiting_slot and clock.slot_recheck_at is not None:
        deadlines.append(clock.slot_recheck_at)
    silence = silence_at(clock)
    if silence is not None:
        deadlines.append(silence)
    elif not busy(clock):
        deadlines.append(clock.active_at + idle_exit_seconds)
    return min(deadlines) if deadlines else None
