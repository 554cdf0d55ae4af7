"""An outage is said at its start, again at most once a minute while it lasts, and its end once."""

from __future__ import annotations

from orchestrator.core.outages import Outage


def test_an_outage_is_said_at_its_start_then_once_a_minute_then_its_end_once() -> None:
    outage = Outage(every=60.0)
    assert outage.ended(0.0) is None, "no outage, nothing to say"
    said = [(t, lasted) for t in range(100, 260) if (lasted := outage.failed(float(t))) is not None]
    assert said == [(100, 0.0), (160, 60.0), (220, 120.0)]
    assert outage.ended(261.0) == 161.0
    assert outage.ended(262.0) is None, "its end is said once"


def test_a_new_outage_after_one_ended_is_said_at_once() -> None:
    outage = Outage(every=60.0)
    assert outage.failed(0.0) == 0.0
    assert outage.ended(5.0) == 5.0
    assert outage.failed(10.0) == 0.0, "a new outage, said at its start however soon after the last"
    assert outage.failed(11.0) is None
