"""The fire throttle: a sliding 60 s window of fires."""

from __future__ import annotations

from orchestrator.core.throttle import FireWindow, allow, note_fire


def test_allows_up_to_the_limit_within_a_minute() -> None:
    win = FireWindow()
    for second in range(3):
        assert allow(win, float(second), per_minute=3)
        win = note_fire(win, float(second))
    assert not allow(win, 10.0, per_minute=3)


def test_fires_leave_the_window_after_sixty_seconds() -> None:
    win = FireWindow()
    for second in (0.0, 1.0):
        win = note_fire(win, second)
    assert not allow(win, 59.9, per_minute=2)
    assert allow(win, 60.0, per_minute=2)


def test_noting_a_fire_drops_old_entries() -> None:
    win = note_fire(note_fire(FireWindow(), 0.0), 30.0)
    assert note_fire(win, 75.0).fires == [30.0, 75.0]
    assert win.fires == [0.0, 30.0]
