"""A run that ends before the fire that started it has reported back still frees its lane's slot."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from temporalio import activity
from temporalio.testing import WorkflowEnvironment

from orchestrator.platform import Platform
from orchestrator.workflows.messages import FireReport, FireRequest
from tests.engine.harness import (
    Engine,
    eventually,
    new_session,
    recorder_listener,
    replacing,
    running_engine,
    write_many,
)

pytestmark = pytest.mark.both_servers


class SlowToReport:
    """Stands in for `orchestrator.fire`: fires, then reports only after the run it started has ended."""

    def __init__(self, real: Callable[..., Any]) -> None:
        self.real = real

    @activity.defn(name="orchestrator.fire")
    async def fire(self, request: FireRequest) -> FireReport:
        report: FireReport = await self.real(request)
        if report.outcomes:
            await asyncio.sleep(2.0)  # the recorder's run takes a fraction of that
        return report


@pytest.fixture
async def slow_engine(platform: Platform, temporal_env: WorkflowEnvironment) -> AsyncIterator[Engine]:
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping}
    )

    wrap = replacing("orchestrator.fire", lambda real: SlowToReport(real).fire)
    async with running_engine(platform, temporal_env.client, wrap=wrap) as engine:
        yield engine


async def test_the_slot_is_freed_when_run_finished_comes_first(slow_engine: Engine) -> None:
    engine = slow_engine
    await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 0.2}))
    sid = await new_session(engine)
    first = await write_many(engine, sid, ["missions/a"])

    async def ended(n: int) -> bool:
        return sum(1 for r in engine.log.runs if r.ended is not None) >= n

    await eventually(lambda: ended(1), what="the first run")
    second = await write_many(engine, sid, ["missions/b"])
    await eventually(lambda: ended(2), what="the second run, after the first run's slot was freed")
    assert [r.input["batch"]["event_ids"] for r in engine.log.runs] == [first, second]
