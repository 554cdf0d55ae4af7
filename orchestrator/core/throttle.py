"""The fire throttle: at most `listener_fires_per_minute` fires per listener and session.

Owns a sliding 60 s window of fire times (seconds, workflow time, passed in); which limit applies and
what a refused fire becomes (a `throttled` outcome) are the lane's. A fire exactly 60 s old has left the
window. The window keeps at most one entry per fire in the last minute, so its size is bounded by the
limit itself.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

WINDOW_SECONDS = 60.0


class FireWindow(BaseModel):
    fires: list[float] = Field(default_factory=list)


def _recent(win: FireWindow, now: float) -> list[float]:
    return [at for at in win.fires if now - at < WINDOW_SECONDS]


def allow(win: FireWindow, now: float, per_minute: int) -> bool:
    """Whether one more fire at `now` stays within `per_minute` fires in the last 60 s."""
    return len(_recent(win, now)) < per_minute


def note_fire(win: FireWindow, now: float) -> FireWindow:
    """A new window with a fire at `now` and without the fires that left the last 60 s."""
    return FireWindow(fires=[*_recent(win, now), now])
