"""A parallel listener: one lane, up to `max_parallel` runs in flight, capped by `listener_parallel_runs`."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from orchestrator.core.limits import Limits
from orchestrator.platform import Platform
from tests.engine.harness import Engine, eventually, new_session, recorder_listener, running_engine, write_many

pytestmark = pytest.mark.both_servers


def parallel_listener(max_parallel: int) -> dict[str, Any]:
    # One event per batch, so that a burst becomes as many runs as it has events.
    return recorder_listener(
        concurrency={"mode": "parallel", "max_parallel": max_parallel},
        batch={"window_seconds": 0.1, "max_events": 1},
        action={"type": "workflow", "workflow": "recorder", "input": {"sleep": 1.5}},
    )


async def run_burst(engine: Engine, count: int) -> list[int]:
    sid = await new_session(engine)
    ids = await write_many(engine, sid, [f"missions/{n}" for n in range(count)])

    async def done() -> bool:
        return len(engine.log.event_ids()) >= count and all(r.ended is not None for r in engine.log.runs)

    await eventually(done, within=60, what="every event in a run")
    return ids


def assert_each_once(engine: Engine, ids: list[int]) -> None:
    assert sorted(engine.log.event_ids()) == ids
    assert not [i for i, n in Counter(engine.log.event_ids()).items() if n > 1], "no event ran twice"


async def test_never_more_than_max_parallel_runs_in_flight(engine: Engine) -> None:
    await engine.command("save_listener", listener=parallel_listener(3))
    ids = await run_burst(engine, 9)
    assert_each_once(engine, ids)
    assert engine.log.most_at_once["orchestrate:_"] <= 3
    assert engine.log.most_at_once["orchestrate:_"] == 3, "runs of one lane do overlap"


async def test_the_parallel_runs_limit_caps_a_larger_declaration(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    platform.settings = platform.settings.model_copy(
        update={
            "search_attributes": not temporal_env.supports_time_skipping,
            "limits": Limits(activation_delay_seconds=0, listener_parallel_runs=2),
        }
    )
    async with running_engine(platform, temporal_env.client) as engine:
        await engine.command("save_listener", listener=parallel_listener(4))
        ids = await run_burst(engine, 6)
        assert_each_once(engine, ids)
        assert engine.log.most_at_once["orchestrate:_"] <= 2
        assert engine.log.most_at_once["orchestrate:_"] == 2
