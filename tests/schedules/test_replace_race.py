"""Schedules set again at once at one alias (`replace`, as runs setting the same timer do): each answers, one
schedule is left, and its clock on Temporal is the one its row says."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import ScheduleIntervalSpec
from temporalio.service import RPCError

from tests.engine.harness import Engine, new_session

pytestmark = pytest.mark.devserver


@pytest.mark.parametrize("at_once", [2, 6])
async def test_schedules_replaced_at_once_leave_one_whose_clock_its_row_says(engine: Engine, at_once: int) -> None:
    sid = await new_session(engine)

    async def create(n: int) -> dict[str, object]:
        return await engine.platform.command(
            {
                "command": "create_schedule",
                "session_id": sid,
                "alias": "race/x",
                "repeat": {"type": "interval", "every_seconds": 600 + n},
                "invocation_target_type": "object",
                "target": {"alias": "ops/tick", "value": {"type": "tick"}},
                "replace": True,
            }
        )

    for _ in range(3):
        replies = await asyncio.gather(*(create(n) for n in range(at_once)))
        assert all(r["status"] == "success" for r in replies), [r for r in replies if r["status"] != "success"]
        [row] = (await engine.command("list_schedules", session_id=sid))["schedules"]
        described = await engine.client.get_schedule_handle(row["schedule_id"]).describe()
        [interval] = described.schedule.spec.intervals
        assert isinstance(interval, ScheduleIntervalSpec)
        assert interval.every.total_seconds() == row["repeat"]["every_seconds"], "the clock is the row's"
    await engine.command("delete_schedule", session_id=sid, alias="race/x")
    with pytest.raises(RPCError):
        await engine.client.get_schedule_handle(row["schedule_id"]).describe()
