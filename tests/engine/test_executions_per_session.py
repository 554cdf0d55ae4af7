"""`executions_per_session` is a cap on the session's runs running at once, however many lanes fire together and
whoever starts them: a burst over many keyed lanes starts at most the limit, the other batches end `refused`, and
`start_execution` called many times at once starts at most what is left."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from orchestrator.core.limits import Limits
from orchestrator.platform import Platform
from tests.engine.harness import Engine, eventually, lane_outcomes, new_session, recorder_listener, running_engine

pytestmark = pytest.mark.both_servers

LIMIT = 2
KEYS = 8


def limited(platform: Platform, env: WorkflowEnvironment) -> None:
    platform.settings = platform.settings.model_copy(
        update={
            "search_attributes": not env.supports_time_skipping,
            "limits": Limits(activation_delay_seconds=0, executions_per_session=LIMIT),
        }
    )


async def running(engine: Engine, sid: str) -> list[dict[str, Any]]:
    executions = (await engine.command("list_executions", session_id=sid))["executions"]
    return [e for e in executions if e["status"] == "running"]


async def test_a_burst_over_many_keyed_lanes_runs_at_most_the_limit_and_refuses_the_rest(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    limited(platform, temporal_env)
    async with running_engine(platform, temporal_env.client) as engine:
        body = recorder_listener(
            "sleepers",
            concurrency={"mode": "keyed", "key": "alias", "max_parallel": KEYS},
            batch={"window_seconds": 0, "max_events": 1},
            action={"type": "workflow", "workflow": "recorder", "input": {"sleep": 3600}},
        )
        await engine.command("save_listener", listener=body)
        sid = await new_session(engine)
        objects = [{"alias": f"missions/{n}", "value": {"type": "m"}} for n in range(KEYS)]
        ids = (await engine.command("write_objects", session_id=sid, objects=objects))["event_ids"]

        async def all_ended() -> bool:
            return len(await lane_outcomes(engine, sid, "sleepers")) >= KEYS

        await eventually(all_ended, within=60, what=f"{KEYS} outcomes")
        outcomes = await lane_outcomes(engine, sid, "sleepers")
        statuses = sorted(o["status"] for o in outcomes)
        assert statuses == ["refused"] * (KEYS - LIMIT) + ["success"] * LIMIT, statuses
        assert sorted(i for o in outcomes for i in o["event_ids"]) == sorted(ids), "every event in one batch"
        for outcome in outcomes:
            if outcome["status"] == "refused":
                assert outcome["message"] == f"executions_per_session: {LIMIT} running", outcome
        assert len(await running(engine, sid)) == LIMIT

        async def started() -> bool:
            return len(engine.log.runs) >= LIMIT

        await eventually(started, what=f"{LIMIT} runs started")
        await asyncio.sleep(0.5)
        assert len(engine.log.runs) == LIMIT, "no run past the limit ever started"


async def test_start_execution_called_at_once_starts_at_most_the_limit(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    limited(platform, temporal_env)
    async with running_engine(platform, temporal_env.client) as engine:
        sid = await new_session(engine)
        calls = [
            {"command": "start_execution", "session_id": sid, "workflow": "recorder", "input": {"sleep": 3600}}
            for _ in range(KEYS)
        ]
        replies = await asyncio.gather(*(platform.command(call) for call in calls))
        answered = sorted(r["status"] for r in replies)
        assert answered == ["error"] * (KEYS - LIMIT) + ["success"] * LIMIT, replies
        for reply in replies:
            if reply["status"] == "error":
                assert (reply["error"], reply["message"]) == (
                    "limit_exceeded",
                    f"executions_per_session: {LIMIT} running",
                ), reply
        assert len(await running(engine, sid)) == LIMIT
