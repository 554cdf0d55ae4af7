"""A schedule whose row was written by a process that died before it made the Temporal Schedule is made by the
workers' upkeep, and then fires as any other."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.commands.schedules import make_unmade_schedules
from orchestrator.crossings import Died, dies_at, inject
from tests.engine.harness import Engine, eventually, new_session

pytestmark = pytest.mark.devserver


def clock(sid: str, *, every_seconds: int) -> dict[str, Any]:
    """A `create_schedule` of an interval clock writing `ops/clock` in the session."""
    return {
        "command": "create_schedule",
        "session_id": sid,
        "alias": "clock",
        "repeat": {"type": "interval", "every_seconds": every_seconds},
        "invocation_target_type": "object",
        "target": {"alias": "ops/clock", "value": {"type": "tick"}},
    }


async def test_a_schedule_written_and_never_made_on_temporal_is_made_by_the_upkeep(engine: Engine) -> None:
    sid = await new_session(engine)
    body = clock(sid, every_seconds=1)
    with inject(dies_at("schedule.written")), pytest.raises(Died):
        await engine.platform.command(body)
    handle = engine.client.get_schedule_handle(f"schedule:{sid}:clock")
    with pytest.raises(RPCError) as missing:
        await handle.describe()
    assert missing.value.status == RPCStatusCode.NOT_FOUND

    assert await make_unmade_schedules(engine.platform, older_than_seconds=0) == 1
    await handle.describe()
    assert await make_unmade_schedules(engine.platform, older_than_seconds=0) == 0, "made once"

    async def fired() -> bool:
        runs = await engine.command("list_schedule_runs", session_id=sid, alias="clock")
        return bool(runs["runs"])

    await eventually(fired, within=15, what="the schedule made by the upkeep fires")


async def test_a_replace_written_and_never_made_gets_the_clock_its_row_says_from_the_upkeep(engine: Engine) -> None:
    """A replace keeps the schedule's id, so the clock of the schedule it replaced is there when the upkeep makes
    the new row: it is brought to the row (it was kept, firing on the old timing, and the row marked made)."""
    sid = await new_session(engine)
    body = clock(sid, every_seconds=600)
    assert (await engine.platform.command(body))["status"] == "success"
    replaced = {**body, "repeat": {"type": "interval", "every_seconds": 900}, "enabled": False, "replace": True}
    with inject(dies_at("schedule.written")), pytest.raises(Died):
        await engine.platform.command(replaced)
    assert await make_unmade_schedules(engine.platform, older_than_seconds=0) == 1
    described = await engine.client.get_schedule_handle(f"schedule:{sid}:clock").describe()
    [interval] = described.schedule.spec.intervals
    assert interval.every.total_seconds() == 900
    assert described.schedule.state.paused, "disabled, as the row says"
