"""A schedule whose row was written by a process that died before it made the Temporal Schedule is made by the
workers' upkeep, and then fires as any other."""

from __future__ import annotations

import pytest
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.commands.schedules import make_unmade_schedules
from orchestrator.crossings import Died, dies_at, inject
from tests.engine.harness import Engine, eventually, new_session

pytestmark = pytest.mark.devserver


async def test_a_schedule_written_and_never_made_on_temporal_is_made_by_the_upkeep(engine: Engine) -> None:
    sid = await new_session(engine)
    body = {
        "command": "create_schedule",
        "session_id": sid,
        "alias": "clock",
        "repeat": {"type": "interval", "every_seconds": 1},
        "invocation_target_type": "object",
        "target": {"alias": "ops/clock", "value": {"type": "tick"}},
    }
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
