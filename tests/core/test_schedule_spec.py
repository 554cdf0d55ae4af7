"""Schedule bodies and their times: cron forms, zones, dates, targets, and refusals that name the field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from orchestrator.commands.schedules import CreateSchedule
from orchestrator.core.errors import CommandError
from orchestrator.core.globs import owned
from orchestrator.core.schedule_spec import (
    Calendar,
    Span,
    firing_key,
    parse_cron,
    parse_schedule,
    schedule_id,
    schedule_timing,
)

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
EVERY_DAY = (Span(1, 31),)
EVERY_MONTH = (Span(1, 12),)
EVERY_WEEKDAY = (Span(0, 6),)
ZERO = (Span(0, 0),)


def body(repeat: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "repeat": repeat,
        "invocation_target_type": "object",
        "target": {"alias": "ops/clock", "value": {"type": "tick"}},
    }
    fields.update(overrides)
    return fields


def refusal(raw: dict[str, Any], now: datetime | None = NOW) -> str:
    with pytest.raises(CommandError) as caught:
        parse_schedule(raw, now)
    assert caught.value.code == "invalid_request"
    return caught.value.message


def cron(expression: str, timezone: str = "UTC") -> dict[str, Any]:
    return {"type": "recurring_cron", "cron_expression": expression, "timezone": timezone}


# -- cron forms ----------------------------------------------------------------------------------------------


def test_five_fields_translate_field_by_field_with_names_and_steps() -> None:
    [calendar] = parse_cron("*/15 9-17 * JAN,JUL MON-FRI")
    assert calendar == Calendar(
        second=ZERO,
        minute=(Span(0, 45, 15),),
        hour=(Span(9, 17),),
        day_of_month=EVERY_DAY,
        month=(Span(1, 1), Span(7, 7)),
        day_of_week=(Span(1, 5),),
    )


def test_five_fields_sunday_is_0_and_7() -> None:
    assert parse_cron("0 12 * * 7")[0].day_of_week == (Span(0, 0),)
    assert parse_cron("0 12 * * 0")[0].day_of_week == (Span(0, 0),)
    assert parse_cron("0 12 * * 5-7")[0].day_of_week == (Span(0, 0), Span(5, 6))


def test_five_fields_with_both_day_fields_fire_on_either() -> None:
    on_13th, on_fridays = parse_cron("0 0 13 * FRI")
    assert (on_13th.day_of_month, on_13th.day_of_week) == ((Span(13, 13),), EVERY_WEEKDAY)
    assert (on_fridays.day_of_month, on_fridays.day_of_week) == (EVERY_DAY, (Span(5, 5),))


def test_six_fields_with_a_question_mark_in_the_third_or_fifth_field_are_the_eventbridge_form() -> None:
    # minute hour day-of-month month day-of-week year; days numbered 1-7 from Sunday.
    [weekdays] = parse_cron("15 10 ? * MON-FRI *")
    assert weekdays == Calendar(
        second=ZERO,
        minute=(Span(15, 15),),
        hour=(Span(10, 10),),
        day_of_month=EVERY_DAY,
        month=EVERY_MONTH,
        day_of_week=(Span(1, 5),),
    )
    [first] = parse_cron("0 8 1 * ? 2026-2027")
    assert (first.day_of_month, first.day_of_week, first.year) == ((Span(1, 1),), EVERY_WEEKDAY, (Span(2026, 2027),))
    assert parse_cron("0 8 ? * 1 *")[0].day_of_week == (Span(0, 0),), "1 is Sunday"
    assert parse_cron("0 8 ? * 2-6 *")[0].day_of_week == (Span(1, 5),)


def test_six_fields_with_a_question_mark_in_the_fourth_or_sixth_field_are_seconds_first() -> None:
    # The Quartz form: second minute hour day-of-month month day-of-week.
    [weekdays] = parse_cron("0 15 10 ? * MON-FRI")
    assert weekdays == Calendar(
        second=ZERO,
        minute=(Span(15, 15),),
        hour=(Span(10, 10),),
        day_of_month=EVERY_DAY,
        month=EVERY_MONTH,
        day_of_week=(Span(1, 5),),
    )
    [every_5s] = parse_cron("*/5 * * * * ?")
    assert every_5s.second == (Span(0, 55, 5),)
    [with_year] = parse_cron("30 0 12 1 * ? 2030")
    assert (with_year.second, with_year.year) == ((Span(30, 30),), (Span(2030, 2030),))
    # Seven with no '?': Temporal's own form, seconds first, a year last, days numbered as classic cron's.
    [every_2s] = parse_cron("*/2 * * * * * *")
    assert (every_2s.second, every_2s.minute, every_2s.day_of_week) == (
        (Span(0, 58, 2),),
        (Span(0, 59),),
        EVERY_WEEKDAY,
    )
    [weekday_mornings] = parse_cron("0 30 9 * * MON-FRI *")
    assert (weekday_mornings.hour, weekday_mornings.day_of_week) == ((Span(9, 9),), (Span(1, 5),))
    [sundays_2030] = parse_cron("0 0 12 * * 0 2030")
    assert (sundays_2030.day_of_week, sundays_2030.year) == ((Span(0, 0),), (Span(2030, 2030),))


def test_macros() -> None:
    assert parse_cron("@hourly") == parse_cron("0 * * * *")
    assert parse_cron("@daily") == parse_cron("0 0 * * *")


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("61 * * * *", "minute: 61 is out of range 0-59"),
        ("0 24 * * *", "hour: 24 is out of range 0-23"),
        ("0 0 0 * *", "day-of-month: 0 is out of range 1-31"),
        ("0 0 * 13 *", "month: 13 is out of range 1-12"),
        ("0 0 * * 8", "day-of-week: 8 is out of range 0-7"),
        ("0 0 * * MOO", "day-of-week: 'MOO' is not a number or a name"),
        ("0 0 * * 5-2", "day-of-week: range '5-2' runs backwards"),
        ("*/0 * * * *", "minute: step '0' must be a whole number above 0"),
        ("0 0 * *", "has 4 fields"),
        ("* * * * * * * *", "has 8 fields"),
        ("* * * * * *", "has 6 fields and no '?', which reads two ways"),
        ("60 * * * * * *", "second: 60 is out of range 0-59"),
        ("0 ? * * * *", "'?' may stand only in day-of-month or day-of-week"),
        ("0 0 ? * ? *", "only one of day-of-month and day-of-week may be '?'"),
        ("0 0 L * ? *", "day-of-month: 'L' (last) is not supported"),
        ("0 0 ? * MON#2 *", "day-of-week: '#' (nth weekday) is not supported"),
        ("0 8 ? * 0 *", "day-of-week: 0 is out of range 1-7"),
        ("@sometimes", "unknown macro '@sometimes'"),
        ("", "must not be empty"),
    ],
)
def test_bad_cron_is_refused_naming_the_cron_field(expression: str, words: str) -> None:
    message = refusal(body(cron(expression)))
    assert message.startswith("repeat.cron_expression: ")
    assert words in message


# -- zones and times -----------------------------------------------------------------------------------------


def test_cron_keeps_its_time_zone() -> None:
    timing = schedule_timing(parse_schedule(body(cron("0 9 * * MON-FRI", "Europe/Paris")), NOW))
    assert timing.time_zone == "Europe/Paris"
    assert timing.calendars[0].hour == (Span(9, 9),), "the hour is local: Temporal reads it in the zone"
    assert timing.every_seconds is None
    assert not timing.fires_once


def test_unknown_time_zone_is_refused_naming_the_field() -> None:
    message = refusal(body(cron("0 9 * * *", "Mars/Base")))
    assert message == "repeat.timezone: unknown time zone 'Mars/Base'"
    one_time = {"type": "one_time", "invocation_time": "2025-07-01T09:00:00", "timezone": "Nowhere/Atall"}
    assert refusal(body(one_time)) == "repeat.timezone: unknown time zone 'Nowhere/Atall'"


def test_interval() -> None:
    timing = schedule_timing(parse_schedule(body({"type": "interval", "every_seconds": 900}), NOW))
    assert (timing.every_seconds, timing.calendars, timing.time_zone) == (900, (), "UTC")
    assert refusal(body({"type": "interval", "every_seconds": 0})) == "repeat.every_seconds: must be at least 1"
    assert refusal(body({"type": "interval", "every_seconds": "5"})) == "repeat.every_seconds: must be an integer"


def test_an_interval_takes_a_timezone_for_its_dates_as_the_flat_body_gives_one() -> None:
    """A seed body built for any repeat carries `timezone`: an interval keeps no clock time, and reads its
    `start_date` and `end_date` there."""
    paris = {"type": "interval", "every_seconds": 900, "timezone": "Europe/Paris"}
    timing = schedule_timing(parse_schedule(body(paris, start_date="2030-01-01"), NOW))
    assert timing.every_seconds == 900 and timing.start_at == datetime(2029, 12, 31, 23, tzinfo=UTC)
    assert refusal(body({**paris, "timezone": "Mars/Base"})) == "repeat.timezone: unknown time zone 'Mars/Base'"
    # Stored and answered with its zone only when it is not UTC: a worker of the release before reads the rest.
    utc = {"type": "interval", "every_seconds": 900, "timezone": "UTC"}
    assert parse_schedule(body(utc), NOW).model_dump(mode="json")["repeat"] == {
        "type": "interval",
        "every_seconds": 900,
    }
    assert parse_schedule(body(paris), NOW).model_dump(mode="json")["repeat"]["timezone"] == "Europe/Paris"
    flat = {"command": "create_schedule", "alias": "ops-clock", "repeat": "interval", "every_seconds": 900,
            "timezone": "UTC", "invocation_target": {"target": {"session": "ses_1"}, "alias": "ops/clock",
                                                     "value": {"type": "tick"}}}  # fmt: skip
    assert CreateSchedule.model_validate(flat).repeat == {"type": "interval", "every_seconds": 900, "timezone": "UTC"}
    dumped = {"type": "recurring_cron", "cron_expression": "0 9 * * *", "timezone": "UTC", "every_seconds": None}
    nested = {"command": "create_schedule", "session_id": "ses_1", "alias": "c", "repeat": dumped,
              "target": {"alias": "a", "value": {"type": "x"}}}  # fmt: skip
    assert "every_seconds" not in CreateSchedule.model_validate(nested).repeat, "a null says nothing"


def test_one_time_is_read_in_its_zone_and_fires_once_at_that_instant() -> None:
    repeat = {"type": "one_time", "invocation_time": "2025-07-01T09:30:15", "timezone": "America/New_York"}
    timing = schedule_timing(parse_schedule(body(repeat), NOW))
    assert timing.fires_once
    [at] = timing.calendars
    # 09:30:15 in New York in July (EDT, UTC-4) is 13:30:15 UTC.
    assert (at.year, at.month, at.day_of_month, at.hour, at.minute, at.second) == (
        (Span(2025, 2025),),
        (Span(7, 7),),
        (Span(1, 1),),
        (Span(13, 13),),
        (Span(30, 30),),
        (Span(15, 15),),
    )
    assert timing.time_zone == "UTC"


def test_a_start_date_whose_midnight_the_zone_skips_starts_at_the_days_first_instant() -> None:
    """Santiago's clocks go from 00:00 to 01:00 on 5 September 2027: the day starts at 01:00 (04:00 UTC)."""
    raw = body(cron("0 9 * * *", "America/Santiago"), start_date="2027-09-05")
    assert schedule_timing(parse_schedule(raw, NOW)).start_at == datetime(2027, 9, 5, 4, 0, tzinfo=UTC)
    skipped = body(cron("0 9 * * *", "America/Santiago"), start_date="2027-09-05T00:30:00")
    assert "start_date: '2027-09-05T00:30:00' does not exist in America/Santiago" in refusal(skipped)


def test_one_time_refusals() -> None:
    past = {"type": "one_time", "invocation_time": "2025-05-31T09:00:00"}
    assert refusal(body(past)) == "repeat.invocation_time: 2025-05-31T09:00:00 is in the past"
    gap = {"type": "one_time", "invocation_time": "2026-03-29T02:30:00", "timezone": "Europe/Paris"}
    assert "repeat.invocation_time: '2026-03-29T02:30:00' does not exist in Europe/Paris" in refusal(body(gap))
    garbled = {"type": "one_time", "invocation_time": "tomorrow"}
    assert refusal(body(garbled)).startswith("repeat.invocation_time: 'tomorrow' is not an ISO 8601 date-time")
    assert refusal(body({"type": "one_time"})) == "repeat.invocation_time: is required"


def test_start_and_end_dates_are_read_in_the_schedule_zone() -> None:
    raw = body(cron("0 9 * * *", "Asia/Tokyo"), start_date="2025-07-01", end_date="2025-07-31")
    timing = schedule_timing(parse_schedule(raw, NOW))
    assert timing.start_at == datetime(2025, 6, 30, 15, 0, tzinfo=UTC)
    assert timing.end_at == datetime(2025, 7, 31, 14, 59, 59, tzinfo=UTC), "an end date includes its whole day"
    backwards = body(cron("0 9 * * *"), start_date="2025-07-02", end_date="2025-07-01T00:00:00")
    assert refusal(backwards) == "end_date: must be after start_date"
    assert refusal(body(cron("0 9 * * *"), end_date="2025-01-01")) == "end_date: 2025-01-01 is in the past"
    # The calendar's first and last days, read where they fall outside it in UTC: refused, not a 500.
    far = refusal(body(cron("0 9 * * *", "America/New_York"), end_date="9999-12-31"))
    assert far == "end_date: '9999-12-31' is past the calendar's range in America/New_York"
    early = refusal(body(cron("0 9 * * *", "Asia/Tokyo"), start_date="0001-01-01"))
    assert early == "start_date: '0001-01-01' is past the calendar's range in Asia/Tokyo"


def test_a_cron_that_names_no_day_to_come_is_refused_and_one_whose_day_comes_is_kept() -> None:
    for never in ("0 9 30 2 *", "0 9 30,31 2 *", "0 9 31 4,6,9,11 *", "0 9 29 2 ? 2027", "0 9 1 1 ? 2024-2025"):
        assert refusal(body(cron(never))).startswith(f"repeat.cron_expression: {never!r} never fires"), never
    # February 29 comes in leap years; a day of the week comes in every month (classic cron fires on either day).
    for fires in ("0 9 29 2 *", "0 9 31 2 1", "0 9 31 1-2 *", "0 9 29 2 ? 2027-2028", "0 9 ? 2 MON 2027"):
        assert parse_schedule(body(cron(fires)), NOW), fires
    # Within its start and end dates: no February 29 before the end, no 1 January between, no Tuesday left (the
    # last of June 2025 is the 24th).
    assert "never fires" in refusal(body(cron("0 9 29 2 *"), end_date="2027-06-01"))
    assert parse_schedule(body(cron("0 9 29 2 *"), end_date="2028-06-01"), NOW)
    assert "never fires" in refusal(body(cron("0 9 1 1 *"), start_date="2026-02-01", end_date="2026-12-31"))
    assert "never fires" in refusal(body(cron("0 9 ? 6 TUE 2025")), datetime(2025, 6, 25, 12, 0, tzinfo=UTC))
    assert parse_schedule(body(cron("0 9 ? 6 TUE 2025")), datetime(2025, 6, 24, 12, 0, tzinfo=UTC))
    # Read on the schedule's own calendar day: the last of a year still to come there, not in UTC.
    late = datetime(2025, 12, 31, 20, 0, tzinfo=UTC)
    assert parse_schedule(body(cron("0 23 31 12 ? 2025", "Asia/Tokyo")), late - timedelta(hours=12))
    with pytest.raises(CommandError, match="never fires"):
        parse_schedule(body(cron("0 23 31 12 ? 2025", "Asia/Tokyo")), late)


# -- the rest of the body ------------------------------------------------------------------------------------


def test_unknown_repeat_type_and_missing_fields_are_named() -> None:
    assert refusal(body({"type": "sometimes"})).startswith("repeat: type must be one of")
    assert refusal(body({"type": "recurring_cron"})) == "repeat.cron_expression: is required"
    assert refusal(body(cron("0 9 * * *"), invocation_target_type="email")).startswith("invocation_target_type:")


def test_object_targets_need_an_alias_and_a_typed_value() -> None:
    every = {"type": "interval", "every_seconds": 60}
    assert refusal(body(every, target={"value": {"type": "tick"}})) == "target.alias: is required"
    assert refusal(body(every, target={"alias": "ops/clock"})) == "target.value: is required"
    bad_alias = refusal(body(every, target={"alias": "ops/*", "value": {"type": "tick"}}))
    assert bad_alias.startswith("target.alias: alias must not contain '*'")
    untyped = refusal(body(every, target={"alias": "ops/clock", "value": {"n": 1}}))
    assert untyped == "target.value: must have a non-empty string field 'type'"
    assert refusal(body(every, target="ops/clock")) == "target: must be a JSON object"


def test_workflow_targets_need_a_workflow() -> None:
    every = {"type": "interval", "every_seconds": 60}
    raw = body(every, invocation_target_type="workflow", target={"input": {"x": 1}})
    assert refusal(raw) == "target.workflow: is required"
    ok = parse_schedule(body(every, invocation_target_type="workflow", target={"workflow": "sweep"}), NOW)
    assert ok.workflow_target().workflow == "sweep"


def test_without_now_past_times_are_kept() -> None:
    """An update that leaves the times alone re-checks the body, not whether a fired one-time is past."""
    fired = body({"type": "one_time", "invocation_time": "2025-05-31T09:00:00"})
    assert parse_schedule(fired, None).repeat.type == "one_time"


def test_ids_and_keys_are_deterministic() -> None:
    assert schedule_id("ses_1", "ops/clock") == "schedule:ses_1:ops/clock"
    at = datetime(2025, 6, 1, 12, 0, 5, tzinfo=UTC)
    assert firing_key("schedule:ses_1:clock", at) == "schedule:ses_1:clock@2025-06-01T12:00:05+00:00"


def test_schedule_owns() -> None:
    assert owned(None, "anything/at/all")
    assert owned(["ops/**"], "ops/clock")
    assert not owned(["ops/**"], "missions/1")
