"""Bad schedules are refused with the field named, and a refused schedule leaves nothing behind."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.commands.schedule_clocks import TemporalSchedules
from orchestrator.commands.schedules import make_unmade_schedules
from orchestrator.core.schedule_spec import schedule_id
from tests.engine.harness import Engine, new_session
from tests.schedules.conftest import refused

pytestmark = pytest.mark.devserver

GOOD: dict[str, Any] = {
    "alias": "clock",
    "repeat": {"type": "recurring_cron", "cron_expression": "*/15 * * * *", "timezone": "Europe/Paris"},
    "invocation_target_type": "object",
    "target": {"alias": "ops/clock", "value": {"type": "tick"}},
}


def bad(**changes: Any) -> dict[str, Any]:
    body = {**GOOD, **changes}
    return {k: v for k, v in body.items() if v is not None}


async def test_bad_schedules_are_refused_naming_the_field_and_nothing_is_created(engine: Engine) -> None:
    sid = await new_session(engine)
    cases: list[tuple[dict[str, Any], str, str]] = [
        (
            bad(repeat={"type": "recurring_cron", "cron_expression": "0 25 * * *"}),
            "invalid_request",
            "repeat.cron_expression: hour: 25 is out of range 0-23",
        ),
        (
            bad(repeat={"type": "recurring_cron", "cron_expression": "0 9 * * *", "timezone": "Mars/Base"}),
            "invalid_request",
            "repeat.timezone: unknown time zone 'Mars/Base'",
        ),
        (bad(target={"value": {"type": "tick"}}), "invalid_request", "target.alias: is required"),
        (bad(target={"alias": "ops/clock"}), "invalid_request", "target.value: is required"),
        (
            bad(invocation_target_type="workflow", target={"input": {}}),
            "invalid_request",
            "target.workflow: is required",
        ),
        (bad(target=None), "invalid_request", "target: is required"),
        (bad(repeat={"type": "interval"}), "invalid_request", "repeat.every_seconds: is required"),
        # The seed's flat form (`repeat` a string, its fields beside it) is told of them as it named them.
        (bad(repeat="interval"), "invalid_request", "every_seconds: is required"),
        (bad(repeat="interval", every_seconds=0), "invalid_request", "every_seconds: must be at least 1"),
        (bad(repeat="recurring_cron"), "invalid_request", "cron_expression: is required"),
        (bad(repeat="one_time", invocation_time="soon"), "invalid_request", "invocation_time: 'soon' is not"),
        # A cron that names no day that comes: it would never fire (Temporal takes it, and waits for ever).
        *(
            (
                bad(repeat={"type": "recurring_cron", "cron_expression": never}),
                "invalid_request",
                f"repeat.cron_expression: {never!r} never fires",
            )
            for never in ("0 9 30 2 *", "0 9 31 4,6,9,11 *", "0 9 29 2 ? 2029-2031", "0 9 1 1 ? 2020-2021")
        ),
        (bad(alias="ops//clock"), "invalid_request", "alias: "),
        (
            bad(invocation_target_type="workflow", target={"workflow": "recorder", "input": {"x": "a" * 300_000}}),
            "limit_exceeded",
            "target.input: 300008 bytes is over the payload limit of 262144",
        ),
    ]
    for body, code, message in cases:
        reply = await refused(engine, "create_schedule", session_id=sid, **body)
        assert (reply["error"], reply["message"][: len(message)]) == (code, message), body

    unknown = await refused(engine, "create_schedule", session_id="ses_nope", **GOOD)
    assert (unknown["error"], unknown["message"]) == ("not_found", "session_id: no session 'ses_nope'")

    assert (await engine.command("list_schedules", session_id=sid))["schedules"] == []
    for session in (sid, "ses_nope"):
        with pytest.raises(RPCError) as caught:
            await engine.client.get_schedule_handle(schedule_id(session, "clock")).describe()
        assert caught.value.status == RPCStatusCode.NOT_FOUND


async def test_an_alias_outside_schedule_owns_a_taken_alias_and_a_closed_session_are_refused(engine: Engine) -> None:
    sid = await new_session(engine)
    engine.platform.settings.schedule_owns = ["ops/**"]
    outside = await refused(
        engine, "create_schedule", session_id=sid, **bad(target={"alias": "missions/1", "value": {"type": "t"}})
    )
    assert (outside["error"], outside["message"]) == (
        "access_denied",
        "target.alias: 'missions/1' is outside what schedules may write",
    )
    await engine.command("create_schedule", session_id=sid, **GOOD)
    taken = await refused(engine, "create_schedule", session_id=sid, **GOOD)
    assert (taken["error"], taken["message"]) == (
        "invalid_request",
        f"alias: session {sid!r} already has a schedule 'clock'",
    )
    other = await new_session(engine)
    await engine.command("create_schedule", session_id=other, **GOOD)  # aliases are per session
    listed = (await engine.command("list_schedules", session_id=sid))["schedules"]
    assert [(s["alias"], s["repeat"]["timezone"]) for s in listed] == [("clock", "Europe/Paris")]

    await engine.command("close_session", session_id=other)
    closed = await refused(engine, "create_schedule", session_id=other, **bad(alias="later"))
    assert closed["error"] == "session_not_open"

    update = await refused(
        engine,
        "update_schedule",
        session_id=sid,
        alias="clock",
        repeat={"type": "recurring_cron", "cron_expression": "x * * * *"},
    )
    assert update["message"].startswith("repeat.cron_expression: minute: 'x' is not a number")
    kept = (await engine.command("get_schedule", session_id=sid, alias="clock"))["schedule"]
    assert kept["repeat"] == GOOD["repeat"], "a refused update changes nothing"
    missing = await refused(engine, "get_schedule", session_id=sid, alias="nope")
    assert (missing["error"], missing["message"]) == ("not_found", f"alias: no schedule 'nope' in session {sid!r}")


# Times Temporal's calendars cannot name (a year past 2000-2100), and ones past the calendar where the schedule reads
# them (a date whose own offset puts it in the year 10000): refused naming the field before anything is written, so
# a `replace` leaves the schedule it would have replaced as it was (Temporal refused the first after the row was
# replaced, which took the old schedule away; the second answered internal_error).
PAST_THE_CALENDAR: list[tuple[dict[str, Any], str]] = [
    (
        bad(repeat={"type": "recurring_cron", "cron_expression": "0 9 1 1 ? 2150"}),
        "repeat.cron_expression: year: 2150 is out of range 2000-2100",
    ),
    (
        bad(repeat={"type": "recurring_cron", "cron_expression": "0 9 1 1 ? 1990-2030"}),
        "repeat.cron_expression: year: 1990 is out of range 2000-2100",
    ),
    (
        bad(repeat={"type": "one_time", "invocation_time": "2101-01-01T00:00:00Z"}),
        "repeat.invocation_time: '2101-01-01T00:00:00Z' is after 2100",
    ),
    (bad(end_date="9999-12-31T23:59:59-05:00"), "end_date: '9999-12-31T23:59:59-05:00' is past the calendar's range"),
    (
        bad(start_date="9999-12-31T23:59:59-05:00"),
        "start_date: '9999-12-31T23:59:59-05:00' is past the calendar's range",
    ),
    (
        bad(repeat={"type": "one_time", "invocation_time": "9999-12-31T23:59:59-05:00"}),
        "repeat.invocation_time: '9999-12-31T23:59:59-05:00' is past the calendar's range",
    ),
]


@pytest.mark.parametrize(("body", "message"), PAST_THE_CALENDAR, ids=[m.split(":")[0] for _, m in PAST_THE_CALENDAR])
async def test_a_time_past_what_a_schedule_can_name_is_refused_and_a_replace_keeps_the_schedule_it_would_replace(
    engine: Engine, body: dict[str, Any], message: str
) -> None:
    sid = await new_session(engine)
    await engine.command("create_schedule", session_id=sid, **GOOD)
    before = (await engine.command("get_schedule", session_id=sid, alias="clock"))["schedule"]

    reply = await refused(engine, "create_schedule", session_id=sid, replace=True, **body)
    update = await refused(
        engine,
        "update_schedule",
        session_id=sid,
        alias="clock",
        **{k: body[k] for k in body if k in ("repeat", "start_date", "end_date")},
    )

    for answered in (reply, update):
        assert (answered["error"], answered["message"][: len(message)]) == ("invalid_request", message), answered
    assert (await engine.command("get_schedule", session_id=sid, alias="clock"))["schedule"] == before
    await engine.client.get_schedule_handle(schedule_id(sid, "clock")).describe()  # its clock is there still


async def test_a_replace_temporal_refuses_keeps_the_schedule_it_would_replace_with_its_firings_records(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refusal no check foresaw (Temporal's own word on the replacement) puts back the row it replaced, its
    firings' records and its clock, as if the replace had never been asked."""
    sid = await new_session(engine)
    await engine.command("create_schedule", session_id=sid, **GOOD)
    fired_at = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    assert await engine.platform.store.record_schedule_run(sid, "clock", fired_at, "success", event_id=7)
    before = (await engine.command("get_schedule", session_id=sid, alias="clock"))["schedule"]
    runs = (await engine.command("list_schedule_runs", session_id=sid, alias="clock"))["runs"]
    handle = engine.client.get_schedule_handle(schedule_id(sid, "clock"))
    spec = (await handle.describe()).schedule.spec

    refusals = iter([RPCError("the replacement is not a schedule", RPCStatusCode.INVALID_ARGUMENT, b"")])

    async def refuse_once(self: TemporalSchedules, row: dict[str, Any], timing: Any) -> None:
        if (refusal := next(refusals, None)) is not None:
            raise refusal
        await make(self, row, timing)

    make = TemporalSchedules.make
    monkeypatch.setattr(TemporalSchedules, "make", refuse_once)
    every = {"type": "interval", "every_seconds": 60}
    reply = await refused(engine, "create_schedule", session_id=sid, replace=True, **bad(repeat=every, enabled=False))

    assert (reply["error"], reply["message"]) == (
        "invalid_request",
        "repeat: Temporal refused the schedule: the replacement is not a schedule",
    )
    assert (await engine.command("get_schedule", session_id=sid, alias="clock"))["schedule"] == before
    assert (await engine.command("list_schedule_runs", session_id=sid, alias="clock"))["runs"] == runs
    described = await handle.describe()
    assert described.schedule.spec == spec and not described.schedule.state.paused, "its clock as it was"
    assert await make_unmade_schedules(engine.platform, older_than_seconds=0) == 0, "its row made again"
