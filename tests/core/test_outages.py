"""An outage is said at its start, again at most once a minute while it lasts, and its end once."""

from __future__ import annotations

from orchestrator.core.outages import Outage


def test_an_outage_is_said_at_its_start_then_once_a_minute_then_its_end_once() -> None:
    outage = Outage(every=60.0)
    assert outage.ended(0.0) is None, "no outage, nothing to say"
    said = [(t, lasted) for t in range(100, 260) if (lasted := outage.failed(float(t))) is not None]
    assert said == [(100, 0.0), (160, 60.0), (220, 120.0)]
    assert outage.failures == 160
    assert outage.ended(261.0) == 159.0, "from its first failure to its last"
    assert outage.ended(262.0) is None, "its end is said once"


def test_a_new_outage_after_one_ended_is_said_at_once() -> None:
    outage = Outage(every=60.0)
    assert outage.failed(0.0) == 0.0
    assert outage.ended(5.0) == 0.0
    assert outage.failed(10.0) == 0.0, "a new outage, said at its start however soon after the last"
    assert outage.failed(11.0) is None


def test_what_began_before_the_last_failure_or_too_soon_after_it_ends_nothing() -> None:
    outage = Outage(every=60.0)
    assert outage.failed(10.0) == 0.0
    assert outage.ended(10.5, began=9.0) is None, "a command in flight as the database went"
    assert outage.ended(12.0, began=11.0, quiet=5.0) is None, "within the quiet after the last failure"
    assert outage.failed(13.0) is None, "a database that comes and goes: the same outage"
    assert outage.ended(19.0, began=18.5, quiet=5.0) == 3.0


def test_a_failure_long_after_the_last_starts_a_new_outage() -> None:
    """Nothing went through since (streams, refusals): the last outage's end was never seen."""
    outage = Outage(every=60.0)
    assert outage.failed(0.0) == 0.0
    assert outage.failed(3.0) is None
    assert outage.failed(3_600.0) == 0.0, "said as a new outage, not one of an hour"
    assert outage.failures == 1
