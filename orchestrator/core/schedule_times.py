"""When a schedule fires next, computed here rather than by Temporal's Schedules: for a server that has none (the
time-skipping test server the kit runs), where the platform's own clock workflow fires schedules.

Owns the reading of a `ScheduleTiming` as Temporal reads it: an interval fires at each multiple of
`every_seconds` since the Unix epoch; a calendar at each second all of its fields match, read in the schedule's
time zone (a local time a daylight-saving change skips does not fire); never before `start_at` or after
`end_at`. Pure: the times after a given instant, in order.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from orchestrator.core.schedule_spec import Calendar, ScheduleTiming, Span, span_values

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# How far a calendar is searched for its next instant: a calendar that matches nothing within it never fires.
SEARCH_DAYS = 366 * 5


def _matches(spans: tuple[Span, ...], value: int) -> bool:
    return any(s.start <= value <= s.end and (value - s.start) % s.step == 0 for s in spans)


def _calendar_times(calendar: Calendar, zone: ZoneInfo, after: datetime) -> Iterator[datetime]:
    """The instants of one calendar strictly after `after`, in order."""
    local_after = after.astimezone(zone)
    hours = span_values(calendar.hour)
    minutes = span_values(calendar.minute)
    seconds = span_values(calendar.second)
    day = local_after.date()
    for _ in range(SEARCH_DAYS):
        weekday = (day.weekday() + 1) % 7  # 0 is Sunday, as in cron
        if (
            (not calendar.year or _matches(calendar.year, day.year))
            and _matches(calendar.month, day.month)
            and _matches(calendar.day_of_month, day.day)
            and _matches(calendar.day_of_week, weekday)
        ):
            for hour in hours:
                for minute in minutes:
                    for second in seconds:
                        instant = _local(day, hour, minute, second, zone)
                        if instant is not None and instant > after:
                            yield instant
        day += timedelta(days=1)


def _local(day: date, hour: int, minute: int, second: int, zone: ZoneInfo) -> datetime | None:
    """The instant of a local time, or None when the zone skips it (a daylight-saving gap)."""
    local = datetime.combine(day, time(hour, minute, second), tzinfo=zone)
    instant = local.astimezone(UTC)
    return instant if instant.astimezone(zone).replace(tzinfo=None) == local.replace(tzinfo=None) else None


def next_times(timing: ScheduleTiming, after: datetime, count: int = 1) -> list[datetime]:
    """The next `count` firing times strictly after `after` (fewer when the schedule ends first)."""
    after = max(after, (timing.start_at or EPOCH) - timedelta(microseconds=1))
    found: list[datetime] = []
    if timing.every_seconds is not None:
        every = timing.every_seconds
        n = int((after - EPOCH).total_seconds() // every) + 1
        found = [EPOCH + timedelta(seconds=(n + k) * every) for k in range(count)]
    else:
        zone = ZoneInfo(timing.time_zone)
        candidates: set[datetime] = set()
        for calendar in timing.calendars:
            for k, instant in enumerate(_calendar_times(calendar, zone, after)):
                candidates.add(instant)
                if k + 1 >= count:
                    break
        found = sorted(candidates)[:count]
    if timing.fires_once:
        found = found[:1]
    return [t for t in found if timing.end_at is None or t <= timing.end_at]
