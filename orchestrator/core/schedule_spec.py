"""A schedule's body (SPEC section 6) as pydantic models, and its times as a plain calendar description.

Owns the schedule's shape and static rules: cron syntax, time zones, dates, targets. It answers a
`ScheduleTiming` (calendars of value ranges, or an interval, in a named zone) that the I/O layer turns into
Temporal's `ScheduleSpec`; this module never imports Temporal. Cron is parsed here rather than handed to
the server as a string so that a bad field is refused at the door with the field named, and so that each
accepted form has one meaning:

- five fields, `minute hour day-of-month month day-of-week` (day-of-week 0-7, 0 and 7 Sunday); when both
  day fields are restricted a time matches either (classic cron), which is two calendars;
- six or seven fields with a `?` in one day field (the cloud schedulers'): the `?` picks the layout. In
  the 3rd or 5th field it is AWS EventBridge's `minute hour day-of-month month day-of-week year`; in the 4th
  or 6th it is the seconds-first Quartz form `second minute hour day-of-month month day-of-week [year]`.
  Both number days 1-7 from Sunday. Six fields with no `?` are refused as ambiguous; seven with no `?` are
  Temporal's own form (seconds first, a year last, days 0-7 from Sunday).

Years run 2000-2100, the years a Temporal calendar takes (its server refuses a schedule naming one outside them,
after the row is written), as does a `one_time`'s instant. `L`, `W` and `#` have no calendar equivalent and are
refused.
"""

from __future__ import annotations

from calendar import monthrange
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import MAXYEAR, UTC, date, datetime, timedelta
from itertools import pairwise
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pydantic
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
)

from orchestrator.core.errors import CommandError
from orchestrator.core.globs import validate_alias
from orchestrator.core.validation import field_errors_message

REPEAT_TYPES = ("recurring_cron", "interval", "one_time")
TARGET_TYPES = ("object", "workflow")
# The longest interval: a year (a schedule that fires less often is a one_time schedule).
MAX_EVERY_SECONDS = 366 * 24 * 3600

_MONTHS = {
    name: n
    for n, name in enumerate(("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"), 1)
}
_DAYS = {name: n for n, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_UNSUPPORTED = {"#": "nth weekday", "L": "last", "W": "weekday"}


@dataclass(frozen=True)
class Span:
    """The values start, start + step, ... up to end (inclusive)."""

    start: int
    end: int
    step: int = 1


@dataclass(frozen=True)
class Calendar:
    """A set of instants: every field must match one of its spans; no year spans means every year."""

    second: tuple[Span, ...]
    minute: tuple[Span, ...]
    hour: tuple[Span, ...]
    day_of_month: tuple[Span, ...]
    month: tuple[Span, ...]
    day_of_week: tuple[Span, ...]  # 0-6, 0 is Sunday
    year: tuple[Span, ...] = ()


@dataclass(frozen=True)
class ScheduleTiming:
    """When a schedule fires: the union of its calendars (read in `time_zone`) or every `every_seconds`."""

    calendars: tuple[Calendar, ...] = ()
    every_seconds: int | None = None
    time_zone: str = "UTC"
    start_at: datetime | None = None
    end_at: datetime | None = None
    fires_once: bool = False


# -- cron ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int] | None = None


_SECOND = _Field("second", 0, 59)
_MINUTE = _Field("minute", 0, 59)
_HOUR = _Field("hour", 0, 23)
_DOM = _Field("day-of-month", 1, 31)
_MONTH = _Field("month", 1, 12, _MONTHS)
_DOW_CLASSIC = _Field("day-of-week", 0, 7, _DAYS)
_DOW_CLOUD = _Field("day-of-week", 1, 7, {name: n + 1 for name, n in _DAYS.items()})
# The years a Temporal calendar takes (a schedule spec naming another is refused by the server).
FIRST_CALENDAR_YEAR, LAST_CALENDAR_YEAR = 2000, 2100
_YEAR = _Field("year", FIRST_CALENDAR_YEAR, LAST_CALENDAR_YEAR)


def _number(token: str, field: _Field) -> int:
    upper = token.upper()
    if field.names and upper in field.names:
        return field.names[upper]
    for mark, meaning in _UNSUPPORTED.items():
        if mark in upper:
            raise ValueError(f"{field.name}: {mark!r} ({meaning}) is not supported")
    if not token.isdigit():
        raise ValueError(f"{field.name}: {token!r} is not a number{' or a name' if field.names else ''}")
    value = int(token)
    if not field.low <= value <= field.high:
        raise ValueError(f"{field.name}: {value} is out of range {field.low}-{field.high}")
    return value


def _values(text: str, field: _Field) -> set[int]:
    values: set[int] = set()
    for part in text.split(","):
        base, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) == 0:
                raise ValueError(f"{field.name}: step {step_text!r} must be a whole number above 0")
            step = int(step_text)
        if base == "*":
            low, high = field.low, field.high
        elif not base:
            raise ValueError(f"{field.name}: {text!r} has an empty item")
        else:
            first, dash, last = base.partition("-")
            low = _number(first, field)
            high = _number(last, field) if dash else (field.high if slash else low)
            if high < low:
                raise ValueError(f"{field.name}: range {base!r} runs backwards")
        values.update(range(low, high + 1, step))
    return values


def _spans(values: set[int]) -> tuple[Span, ...]:
    ordered = sorted(values)
    if len(ordered) >= 3 and len({b - a for a, b in pairwise(ordered)}) == 1:
        return (Span(ordered[0], ordered[-1], ordered[1] - ordered[0]),)
    spans: list[Span] = []
    for value in ordered:
        if spans and spans[-1].end == value - 1 and spans[-1].step == 1:
            spans[-1] = Span(spans[-1].start, value)
        else:
            spans.append(Span(value, value))
    return tuple(spans)


def _layout(fields: list[str]) -> tuple[_Field, ...]:
    """The meaning of each field, chosen by the field count and where a `?` stands."""
    if len(fields) == 5:
        return (_MINUTE, _HOUR, _DOM, _MONTH, _DOW_CLASSIC)
    if len(fields) not in (6, 7):
        count = f"{len(fields)} field{'s' if len(fields) > 1 else ''}"
        raise ValueError(f"has {count}; expected 5, 6 with a '?' in a day field, or 7")
    marks = {index for index, text in enumerate(fields) if text == "?"}
    aws, quartz = {2, 4}, {3, 5}
    if len(fields) == 6 and marks and marks <= aws:
        layout: tuple[_Field, ...] = (_MINUTE, _HOUR, _DOM, _MONTH, _DOW_CLOUD, _YEAR)
    elif marks and marks <= quartz:
        layout = (_SECOND, _MINUTE, _HOUR, _DOM, _MONTH, _DOW_CLOUD, _YEAR)[: len(fields)]
    elif not marks and len(fields) == 7:
        # Seven with no '?': Temporal's own cron strings (seconds first, a year last, days as classic cron's).
        layout = (_SECOND, _MINUTE, _HOUR, _DOM, _MONTH, _DOW_CLASSIC, _YEAR)
    elif not marks:
        # Six with no '?' read two ways: Temporal's `minute ... day-of-week year`, and Spring's or node-cron's
        # seconds first. A schedule must not guess which.
        raise ValueError(
            "has 6 fields and no '?', which reads two ways (seconds first, or a year last): put '?' in a day field"
            " ('*/5 * * * * ?' is every five seconds), or write 7 fields (seconds first, a year last)"
        )
    else:
        raise ValueError("'?' may stand only in day-of-month or day-of-week")
    if len(marks) > 1:
        raise ValueError("only one of day-of-month and day-of-week may be '?'")
    return layout


def parse_cron(expression: str) -> tuple[Calendar, ...]:
    """The calendars a cron expression stands for; ValueError naming the cron field at fault."""
    text = _MACROS.get(expression.strip().lower(), expression)
    fields = text.split()
    if not fields:
        raise ValueError("must not be empty")
    if fields[0].startswith("@"):
        raise ValueError(f"unknown macro {fields[0]!r}; known: {', '.join(_MACROS)}")
    layout = _layout(fields)
    found: dict[str, set[int]] = {}
    unrestricted: set[str] = set()
    for text_field, field in zip(fields, layout, strict=True):
        if text_field == "?" and field.name not in ("day-of-month", "day-of-week"):
            raise ValueError(f"{field.name}: '?' may stand only in day-of-month or day-of-week")
        if text_field in ("*", "?"):
            unrestricted.add(field.name)
        found[field.name] = _values("*" if text_field == "?" else text_field, field)
    cloud = _DOW_CLOUD in layout
    days = {v - 1 if cloud else v % 7 for v in found["day-of-week"]}
    calendar = Calendar(
        second=_spans(found.get("second", {0})),
        minute=_spans(found["minute"]),
        hour=_spans(found["hour"]),
        day_of_month=_spans(found["day-of-month"]),
        month=_spans(found["month"]),
        day_of_week=_spans(days),
        year=() if "year" in unrestricted or "year" not in found else _spans(found["year"]),
    )
    if unrestricted & {"day-of-month", "day-of-week"}:
        return (calendar,)
    # Both day fields restricted: classic cron fires on either, and calendars match only on both.
    return (replace(calendar, day_of_week=(Span(0, 6),)), replace(calendar, day_of_month=(Span(1, 31),)))


# -- zones and dates -------------------------------------------------------------------------------------------


def validate_timezone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(f"unknown time zone {name!r}") from None
    return name


def _cron(expression: str) -> str:
    parse_cron(expression)
    return expression


def _iso(expected: str) -> Callable[[str], str]:
    """A validator that keeps text `datetime.fromisoformat` reads, and names `expected` for anything else."""

    def check(text: str) -> str:
        try:
            datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{text!r} is not {expected}") from None
        return text

    return check


def _date_only(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def local_instant(text: str, zone_name: str, *, end_of_day: bool = False) -> datetime:
    """The UTC instant of an ISO date or date-time, read in `zone_name` unless it carries its own offset.

    A date alone is the day's first instant (after the gap, where the zone's clocks skip its midnight), or with
    `end_of_day` its last second. A local time that the zone skips (a daylight-saving gap) raises ValueError; one
    it repeats is its first occurrence.
    """
    value = datetime.fromisoformat(text)
    date_only = _date_only(text)
    zone = ZoneInfo(zone_name)
    try:
        if end_of_day and date_only:
            value = value + timedelta(days=1, seconds=-1)
        if value.tzinfo is not None:
            instant = value.astimezone(UTC)
            instant.astimezone(zone)  # read in the zone too, as the schedule's days are
            return instant
        instant = value.replace(tzinfo=zone).astimezone(UTC)
        local = instant.astimezone(zone)
    except OverflowError:
        # The first or last days of the calendar, read where they fall outside it in UTC or in the zone (a date
        # with its own offset too: `9999-12-31T23:59:59-05:00` is in the year 10000 in UTC).
        raise ValueError(f"{text!r} is past the calendar's range in {zone_name}") from None
    skipped = local.replace(tzinfo=None) != value
    if skipped and not (date_only and local.date() == value.date()):
        raise ValueError(f"{text!r} does not exist in {zone_name} (the clocks skip it)")
    return instant


Timezone = Annotated[str, AfterValidator(validate_timezone)]
IsoDateTime = Annotated[str, AfterValidator(_iso("an ISO 8601 date-time (2025-06-01T09:30:00)"))]
IsoDate = Annotated[str, AfterValidator(_iso("an ISO 8601 date (2025-06-01) or date-time"))]


# -- the body --------------------------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


_ZONE = "an IANA time zone (`Europe/Paris`)"


class CronRepeat(_Strict):
    type: Literal["recurring_cron"]
    cron_expression: Annotated[str, AfterValidator(_cron)] = Field(
        description="5 fields (minute to day of week); 6 with a '?' in a day field (seconds first when it is the"
        " 4th or 6th); 7 (seconds first, a year last); or `@daily` and kin"
    )
    timezone: Timezone = Field(default="UTC", description=_ZONE)


class IntervalRepeat(_Strict):
    type: Literal["interval"]
    every_seconds: int = Field(ge=1, le=MAX_EVERY_SECONDS, description="seconds between firings")
    # An interval keeps no clock time; its zone is where `start_date` and `end_date` are read.
    timezone: Timezone = Field(default="UTC", description=_ZONE + ", where start_date and end_date are read")

    @model_serializer(mode="wrap")
    def _as_given(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Answered as it was given, and stored so that a worker of the release before reads it: an interval in
        # UTC (named or not) keeps no zone.
        dumped: dict[str, Any] = handler(self)
        if self.timezone == "UTC":
            dumped.pop("timezone", None)
        return dumped


class OneTimeRepeat(_Strict):
    type: Literal["one_time"]
    # Declared before the time, so that the time's check can read it.
    timezone: Timezone = Field(default="UTC", description=_ZONE)
    invocation_time: IsoDateTime = Field(description="an ISO 8601 date-time in `timezone`, not in the past")

    @field_validator("invocation_time")
    @classmethod
    def _exists_in_zone(cls, value: str, info: ValidationInfo) -> str:
        zone = info.data.get("timezone")
        if zone is not None and local_instant(value, zone).year > LAST_CALENDAR_YEAR:
            # Its calendar names the instant's year in UTC (`_instant_calendar`).
            raise ValueError(f"{value!r} is after {LAST_CALENDAR_YEAR}, the last year a schedule's calendar takes")
        return value


Repeat = Annotated[CronRepeat | IntervalRepeat | OneTimeRepeat, Field(discriminator="type")]


class ObjectTarget(_Strict):
    alias: Annotated[str, AfterValidator(validate_alias)] = Field(description="the object each firing writes")
    value: dict[str, Any] = Field(description="the value it writes, as given (an object with a `type`)")

    @field_validator("value")
    @classmethod
    def _typed(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(value.get("type"), str) or not value["type"]:
            raise ValueError("must have a non-empty string field 'type'")
        return value


class WorkflowTarget(_Strict):
    workflow: str = Field(min_length=1, max_length=200, description="the workflow each firing starts")
    input: Any = Field(default=None, description="its input")


class ScheduleDefinition(_Strict):
    repeat: Repeat
    start_date: IsoDate | None = None
    end_date: IsoDate | None = None
    invocation_target_type: Literal["object", "workflow"]
    target: dict[str, Any]
    # The seed's names for the target besides its session (`blob`, `revision`), kept as given.
    origin: dict[str, Any] | None = None

    @field_validator("start_date")
    @classmethod
    def _start_in_range(cls, value: str | None, info: ValidationInfo) -> str | None:
        repeat = info.data.get("repeat")
        if value is not None and repeat is not None:
            local_instant(value, zone_of(repeat))
        return value

    @field_validator("end_date")
    @classmethod
    def _after_start(cls, value: str | None, info: ValidationInfo) -> str | None:
        repeat, start = info.data.get("repeat"), info.data.get("start_date")
        if value is None or repeat is None:
            return value
        zone = zone_of(repeat)
        end = local_instant(value, zone, end_of_day=True)
        if start is not None and end <= local_instant(start, zone):
            raise ValueError("must be after start_date")
        return value

    def object_target(self) -> ObjectTarget:
        return ObjectTarget.model_validate(self.target)

    def workflow_target(self) -> WorkflowTarget:
        return WorkflowTarget.model_validate(self.target)


def zone_of(repeat: CronRepeat | IntervalRepeat | OneTimeRepeat) -> str:
    return repeat.timezone


def parse_schedule(body: dict[str, Any], now: datetime | None, field: str = "") -> ScheduleDefinition:
    """Validate a schedule body; with `now`, also refuse times already past.

    Raises CommandError("invalid_request") whose message names each bad field (`repeat.timezone: ...`), under
    `field` when the body is one (`schedules.0.repeat.timezone: ...`).
    """
    try:
        definition = ScheduleDefinition.model_validate(body)
        target_model = ObjectTarget if definition.invocation_target_type == "object" else WorkflowTarget
    except pydantic.ValidationError as exc:
        raise CommandError("invalid_request", field_errors_message(exc, field, union_tags=REPEAT_TYPES)) from None
    try:
        target_model.model_validate(definition.target)
    except pydantic.ValidationError as exc:
        target = f"{field}.target" if field else "target"
        raise CommandError("invalid_request", field_errors_message(exc, target)) from None
    if now is not None:
        refuse_past(definition, now)
    return definition


def refuse_past(definition: ScheduleDefinition, now: datetime) -> None:
    """Refuse a schedule whose `one_time` or `end_date` is already past at `now`, or whose cron names no day from
    then to its end (CommandError naming the field)."""
    timing = schedule_timing(definition)
    repeat = definition.repeat
    if isinstance(repeat, OneTimeRepeat) and local_instant(repeat.invocation_time, repeat.timezone) <= now:
        raise CommandError("invalid_request", f"repeat.invocation_time: {repeat.invocation_time} is in the past")
    if timing.end_at is not None and timing.end_at <= now:
        raise CommandError("invalid_request", f"end_date: {definition.end_date} is in the past")
    if isinstance(repeat, CronRepeat):
        zone = ZoneInfo(repeat.timezone)
        first = max(now, timing.start_at or now).astimezone(zone).date()
        last = None if timing.end_at is None else timing.end_at.astimezone(zone).date()
        if not any(_has_a_day(c, first, last) for c in timing.calendars):
            until = "" if last is None else f" to {last}"
            raise CommandError(
                "invalid_request",
                f"repeat.cron_expression: {repeat.cron_expression!r} never fires: no day from {first}{until} is one"
                " of its days",
            )


def span_values(spans: tuple[Span, ...]) -> list[int]:
    """The values spans stand for, in order."""
    return sorted({v for s in spans for v in range(s.start, s.end + 1, s.step)})


# How many years a bounded search of a calendar's days walks at most: the Gregorian calendar's days of the week and
# leap years come round every 400 years, so a longer span holds every pattern a shorter one does.
_CYCLE_YEARS = 400


def _has_a_day(calendar: Calendar, first: date, last: date | None) -> bool:
    """Whether some day from `first` to `last` (None: no end) is one of the calendar's days (its day of the month,
    month, day of the week and year). With no end and no years named, February 30 or April 31 have none; with an
    end or years, each day in the span is asked (February 29 of years none of which is a leap year, the days of a
    week left in a last month, years all past)."""
    doms = span_values(calendar.day_of_month)
    months = span_values(calendar.month)
    years = span_values(calendar.year) if calendar.year else None
    if last is None and years is None:
        # Every year to come, leap ones among them (2000 stands for them); each day of the week comes every month.
        return any(doms[0] <= monthrange(2000, m)[1] for m in months)
    if last is None:
        last = date(max(years or [first.year]), 12, 31)
    last = min(last, date(min(first.year + _CYCLE_YEARS, MAXYEAR), 12, 31))
    weekdays = set(span_values(calendar.day_of_week))
    for year in years if years is not None else range(first.year, last.year + 1):
        if not first.year <= year <= last.year:
            continue
        for month in months:
            for dom in doms:
                if dom > monthrange(year, month)[1]:
                    break
                day = date(year, month, dom)
                if first <= day <= last and (day.weekday() + 1) % 7 in weekdays:
                    return True
    return False


# -- the timing ------------------------------------------------------------------------------------------------


def _instant_calendar(instant: datetime) -> Calendar:
    if instant.microsecond:  # a calendar counts whole seconds: never fire before the time asked for
        instant = instant.replace(microsecond=0) + timedelta(seconds=1)
    one = Span  # one value: Span(v, v)
    return Calendar(
        second=(one(instant.second, instant.second),),
        minute=(one(instant.minute, instant.minute),),
        hour=(one(instant.hour, instant.hour),),
        day_of_month=(one(instant.day, instant.day),),
        month=(one(instant.month, instant.month),),
        day_of_week=(Span(0, 6),),
        year=(one(instant.year, instant.year),),
    )


def schedule_timing(definition: ScheduleDefinition) -> ScheduleTiming:
    """The plain description of when a valid schedule fires."""
    repeat = definition.repeat
    zone = zone_of(repeat)
    start = None if definition.start_date is None else local_instant(definition.start_date, zone)
    end = None if definition.end_date is None else local_instant(definition.end_date, zone, end_of_day=True)
    if isinstance(repeat, CronRepeat):
        return ScheduleTiming(calendars=parse_cron(repeat.cron_expression), time_zone=zone, start_at=start, end_at=end)
    if isinstance(repeat, IntervalRepeat):
        return ScheduleTiming(every_seconds=repeat.every_seconds, start_at=start, end_at=end)
    instant = local_instant(repeat.invocation_time, repeat.timezone)
    return ScheduleTiming(calendars=(_instant_calendar(instant),), start_at=start, end_at=end, fires_once=True)


def schedule_id(session_id: str, alias: str) -> str:
    """The Temporal schedule id of a session's schedule: one per (session, alias), found again by both."""
    return f"schedule:{session_id}:{alias}"


def firing_key(schedule: str, scheduled_at: datetime) -> str:
    """The idempotency key of one firing: a retried firing finds its first write."""
    return f"{schedule}@{scheduled_at.astimezone(UTC).isoformat()}"
