"""The lane's clock: when a lane steps next, announces its silence, or ends, from what it was last told.

Owns the whole state of a lane workflow beyond its address, O(1) in its waiting events, which stay in the
store. Whether a window has closed is never judged here: the lane step judges it on the database's clock
(`lane_step.py`). The clock only keeps when the step said to look again, told in seconds from now (`due_in`)
by a nudge (the router's, when the lane's queue goes from empty to pending; a run's end, when it frees a
slot the lane waits for) or by the report of the lane's own drive, so no two clocks are ever compared. A
timer on a real Temporal server resolves to about a second, so the lane wakes `early` (its server's timer
resolution) and the drive waits out the rest on its own.

A lane waiting for a slot sets no timer: a run's end hands the slot on. It asks again after
SLOT_RECHECK_SECONDS in any case, so a hand-on lost with a crashed worker costs a minute, not the lane.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, ConfigDict

SLOT_RECHECK_SECONDS = 60.0
# How early a lane wakes for a step on a cluster, whose timers resolve to about a second (the deployment's
# `temporal_timer_resolution_seconds`); whoever drives the lane waits out the rest itself (at most this long).
# The test server's timers are exact.
TIMER_RESOLUTION_SECONDS = 1.0


def early_for(time_skipping: bool, resolution: float = TIMER_RESOLUTION_SECONDS) -> float:
    """How long a driver may wait out on its own before a step on this server: a timer's resolution."""
    return 0.0 if time_skipping else resolution


class Declared(BaseModel):
    """A listener's window (or debounce) and idle timer, as a lane and a connection listener read them."""

    model_config = ConfigDict(frozen=True)

    window_seconds: float = 0.0
    idle_after_seconds: float | None = None
    debounce_seconds: float | None = None
    max_wait_seconds: float | None = None


class LaneNews(BaseModel):
    """What a lane is told, by a nudge or its drive's report (seconds from now, however measured).

    `due_in` None: at a nudge it says nothing of when; in a report, nothing is due on a timer (the lane
    waits for a slot, or for nothing). `last_event_*` is its newest event that is not its own `lane.idle`.
    """

    model_config = ConfigDict(frozen=True)

    due_in: float | None = None
    waiting_slot: bool = False
    idle_after_seconds: float | None = None
    last_event_id: int | None = None
    last_event_age: float | None = None


class LaneClock(BaseModel):
    """The lane's timers, in workflow seconds."""

    idle_after_seconds: float | None = None
    # When the step should run again; None: when told.
    due_at: float | None = None
    waiting_slot: bool = False
    slot_recheck_at: float | None = None
    last_event_id: int = 0
    last_event_at: float | None = None
    # The last event whose silence was announced with `lane.idle` (announced once per silence).
    idle_announced_after: int | None = None
    # When the lane was last told anything: it ends once this is `idle_exit_seconds` old with nothing to do.
    active_at: float = 0.0
    steps: int = 0


def _learn(clock: LaneClock, news: LaneNews, now: float) -> LaneClock:
    # Whoever tells the lane anything knows its listener as declared now.
    update: dict[str, object] = {"active_at": now, "idle_after_seconds": news.idle_after_seconds}
    if news.last_event_id is not None and news.last_event_age is not None and news.last_event_id >= clock.last_event_id:
        update["last_event_id"] = news.last_event_id
        update["last_event_at"] = now - news.last_event_age
    return clock.model_copy(update=update)


def nudged(clock: LaneClock, news: LaneNews, now: float) -> LaneClock:
    """The clock after a nudge: the step is due in `due_in` (or sooner, if it already was)."""
    clock = _learn(clock, news, now)
    if news.due_in is None:
        return clock
    due = now + max(news.due_in, 0.0)
    return clock.model_copy(
        update={
            "due_at": due if clock.due_at is None else min(clock.due_at, due),
            # Nudged with work: whatever the lane believed of its slots, it steps when told.
            "waiting_slot": False,
            "slot_recheck_at": None,
        }
    )


def reported(clock: LaneClock, news: LaneNews, now: float) -> LaneClock:
    """The clock after the lane's own drive: its report replaces what the lane believed."""
    clock = _learn(clock, news, now)
    return clock.model_copy(
        update={
            "due_at": None if news.due_in is None else now + max(news.due_in, 0.0),
            "waiting_slot": news.waiting_slot,
            "slot_recheck_at": now + SLOT_RECHECK_SECONDS if news.waiting_slot else None,
            "steps": clock.steps + 1,
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

    `window_seconds` after the oldest; debounced, once the newest has been quiet `debounce_seconds` (and the
    window open `window_seconds`, 0 unless declared), or `max_wait_seconds` after the oldest, whichever comes
    first. The lane step, `list_session_listeners` and a connection listener's stream all judge a window by this
    rule.
    """
    if declared.debounce_seconds is None:
        return first + declared.window_seconds
    quiet = max(first if last is None else last, first) + declared.debounce_seconds
    closes = max(quiet, first + declared.window_seconds)
    if declared.max_wait_seconds is not None:
        closes = min(closes, first + declared.max_wait_seconds)
    return closes


def step_due(clock: LaneClock, now: float, early: float) -> bool:
    """Whether the lane should step now: it was told to by now (less `early`), or its slot recheck is due."""
    if clock.due_at is not None and now >= clock.due_at - early:
        return True
    return clock.waiting_slot and clock.slot_recheck_at is not None and now >= clock.slot_recheck_at


def silence_at(clock: LaneClock) -> float | None:
    """When the lane's silence is due to be announced (declared `idle`, not yet announced), or None."""
    idle = clock.idle_after_seconds
    if idle is None or clock.last_event_at is None or clock.idle_announced_after == clock.last_event_id:
        return None
    return clock.last_event_at + idle


def busy(clock: LaneClock) -> bool:
    """Whether the lane has anything to do or wait for besides its silence."""
    return clock.due_at is not None or clock.waiting_slot


def done(clock: LaneClock, now: float, idle_exit_seconds: float) -> bool:
    """Whether the lane may end: nothing to do, no silence owed, and quiet for `idle_exit_seconds`."""
    return not busy(clock) and silence_at(clock) is None and now - clock.active_at >= idle_exit_seconds


def next_deadline(clock: LaneClock, idle_exit_seconds: float, early: float) -> float | None:
    """The next time something is due on a timer: a step (less `early`), a slot recheck, a silence, the end."""
    deadlines: list[float] = []
    if clock.due_at is not None:
        deadlines.append(clock.due_at - early)
    if clock.waiting_slot and clock.slot_recheck_at is not None:
        deadlines.append(clock.slot_recheck_at)
    silence = silence_at(clock)
    if silence is not None:
        deadlines.append(silence)
    elif not busy(clock):
        deadlines.append(clock.active_at + idle_exit_seconds)
    return min(deadlines) if deadlines else None
