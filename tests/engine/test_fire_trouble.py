"""A lane whose fire keeps failing (the database or Temporal out of reach) keeps trying, and says so."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from temporalio import activity
from temporalio.testing import WorkflowEnvironment

from orchestrator.platform import Platform
from orchestrator.workflows.messages import FireReport, FireRequest
from tests.engine.harness import Engine, eventually, new_session, recorder_listener, replacing, running_engine

pytestmark = pytest.mark.both_servers


class Unreachable:
    """Stands in for `orchestrator.fire`: the database is away until `back` is set."""

    def __init__(self, real: Callable[..., Any]) -> None:
        self.real = real
        self.back = False
        self.failures = 0

    @activity.defn(name="orchestrator.fire")
    async def fire(self, request: FireRequest) -> FireReport:
        if not self.back:
            self.failures += 1
            raise ConnectionRefusedError("the database is away")
        report: FireReport = await self.real(request)
        return report


@pytest.fixture
async def flaky_fire(platform: Platform, temporal_env: WorkflowEnvironment) -> AsyncIterator[tuple[Engine, Any]]:
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping}
    )
    stand_ins: list[Unreachable] = []

    def stand_in(real: Callable[..., Any]) -> Any:
        stand_ins.append(Unreachable(real))
        return stand_ins[-1].fire

    async with running_engine(platform, temporal_env.client, wrap=replacing("orchestrator.fire", stand_in)) as engine:
        yield engine, stand_ins[0]


async def test_a_lane_that_cannot_fire_says_since_when_and_why_and_fires_once_it_can(
    flaky_fire: tuple[Engine, Unreachable], caplog: pytest.LogCaptureFixture
) -> None:
    engine, unreachable = flaky_fire
    caplog.set_level(logging.INFO, logger="temporalio.activity")
    caplog.set_level(logging.DEBUG, logger="temporalio.workflow")
    await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 0.2}))
    sid = await new_session(engine)
    reply = await engine.command("write_object", session_id=sid, alias="missions/a", value={"type": "m"})
    troubles: list[dict[str, Any]] = []

    async def in_trouble() -> bool:

        [listener] = (await engine.command("list_session_listeners", session_id=sid))["listeners"]
        troubles[:] = [lane["trouble"] for lane in listener["lanes"] if lane.get("trouble")]
        return bool(troubles)

    await eventually(in_trouble, within=60, what="the lane to say its fire is in trouble")
    [trouble] = troubles
    assert "the database is away" in trouble["error"]
    assert trouble["failures"] >= 1 and trouble["since"]
    # Each failed attempt is no warning with a traceback (engine.quiet_outages): the lane's trouble says it.
    loud = [r for r in caplog.records if r.name == "temporalio.activity" and r.levelno >= logging.WARNING]
    assert not loud, [r.getMessage() for r in loud]
    # Nor a warning from the lane at each retry: the database away is every lane's, and the router says it once.
    said = [r for r in caplog.records if "lane step failed" in r.getMessage()]
    assert said and all(r.levelno == logging.DEBUG for r in said), [(r.levelname, r.getMessage()) for r in said]
    assert not engine.log.runs
    unreachable.back = True

    async def ran() -> bool:
        return reply["event_id"] in engine.log.event_ids()

    await eventually(ran, within=90, what="the batch once the database is back")
    assert not await in_trouble(), "the trouble is over once a fire goes through"
