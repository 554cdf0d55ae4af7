"""The times the platform's own clock computes (for a server without Schedules) are Temporal's: the next five
firings of a few schedules, asked of the dev server's Schedules and of the pure core side by side."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from orchestrator.core.schedule_spec import parse_schedule, schedule_timing
from orchestrator.core.schedule_times import next_times
from tests.engine.harness import Engine, new_session

pytestmark = pytest.mark.devserver

REPEATS: list[dict[str, Any]] = [
    {"type": "interval", "every_seconds": 3600},
    {"type": "interval", "every_seconds": 86400},
    {"type": "recurring_cron", "cron_expression": "15 10 * * *", "timezone": "America/New_York"},
    {"type": "recurring_cron", "cron_expression": "0 9 * * MON-FRI", "timezone": "Asia/Tokyo"},
    {"type": "recurring_cron", "cron_expression": "0 0 1 * *"},
    {"type": "recurring_cron", "cron_expression": "0 15 10 ? * MON-FRI"},
]


@pytest.mark.parametrize("repeat", REPEATS, ids=lambda r: r.get("cron_expression") or str(r["every_seconds"]))
async def test_the_core_computes_the_next_times_temporal_does(engine: Engine, repeat: dict[str, Any]) -> None:
    sid = await new_session(engine)
    body = {"repeat": repeat, "invocation_target_type": "object", "target": {"alias": "ops/t", "value": {"type": "t"}}}
    now = datetime.now(UTC)
    await engine.command("create_schedule", session_id=sid, alias="t", **body)
    temporal = (await engine.command("get_schedule", session_id=sid, alias="t"))["schedule"]["next_invocations"]
    ours = next_times(schedule_timing(parse_schedule(body, now=now)), now, 5)
    assert [t.isoformat() for t in ours] == temporal
