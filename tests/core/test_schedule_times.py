"""The next firing times the platform computes where the server has no Schedules: intervals from the epoch,
calendars in their zone (a skipped local time not firing), start, end and a one-time schedule."""

from __future__ import annotations

from datetime import UTC, datetime

from orchestrator.core.schedule_spec import parse_schedule, schedule_timing
from orchestrator.core.schedule_times import next_times

NOW = datetime(2026, 3, 28, 12, 34, 56, tzinfo=UTC)


def times(repeat: dict[str, object], count: int = 3, **body: object) -> list[str]:
    definition = parse_schedule(
        {
            "repeat": repeat,
            "invocation_target_type": "object",
            "target": {"alias": "a/b", "value": {"type": "t"}},
            **body,
        },
        now=NOW,
    )
    return [t.isoformat() for t in next_times(schedule_timing(definition), NOW, count)]


def test_an_interval_fires_on_multiples_of_its_length_since_the_epoch() -> None:
    assert times({"type": "interval", "every_seconds": 3600}) == [
        "2026-03-28T13:00:00+00:00",
        "2026-03-28T14:00:00+00:00",
        "2026-03-28T15:00:00+00:00",
    ]


def test_a_cron_in_a_zone_skips_the_local_time_a_daylight_saving_change_skips() -> None:
    # Paris moves from 02:00 to 03:00 on 2026-03-29: 02:30 that day does not exist.
    paris = {"type": "recurring_cron", "cron_expression": "30 2 * * *", "timezone": "Europe/Paris"}
    assert times(paris) == [
        "2026-03-30T00:30:00+00:00",  # 02:30 CEST; the 28th's (01:30 UTC) is before NOW, the 29th's does not exist
        "2026-03-31T00:30:00+00:00",
        "2026-04-01T00:30:00+00:00",
    ]


def test_a_weekday_cron_and_an_end_date() -> None:
    weekdays = {"type": "recurring_cron", "cron_expression": "0 9 * * MON-FRI"}
    assert times(weekdays, 4) == [
        "2026-03-30T09:00:00+00:00",
        "2026-03-31T09:00:00+00:00",
        "2026-04-01T09:00:00+00:00",
        "2026-04-02T09:00:00+00:00",
    ]
    assert times(weekdays, 4, end_date="2026-03-31") == ["2026-03-30T09:00:00+00:00", "2026-03-31T09:00:00+00:00"]


def test_a_one_time_schedule_fires_once() -> None:
    once = {"type": "one_time", "invocation_time": "2026-03-29T08:00:00Z"}
    assert times(once, 3) == ["2026-03-29T08:00:00+00:00"]
    definition = parse_schedule(
        {"repeat": once, "invocation_target_type": "object", "target": {"alias": "a/b", "value": {"type": "t"}}},
        now=NOW,
    )
    assert next_times(schedule_timing(definition), datetime(2026, 3, 29, 8, tzinfo=UTC)) == []
