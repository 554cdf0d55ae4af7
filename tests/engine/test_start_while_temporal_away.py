"""`start_execution` while the door's Temporal is out of reach: the run is recorded with its input before the start
is asked, so the command answers it as made (a retry would make a second run under a new id), and the run
sweep starts it, by that id, once Temporal answers: one run."""

from __future__ import annotations

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from orchestrator.platform import Platform
from tests.conftest import _binary
from tests.engine.harness import eventually, new_session, running_engine


async def test_a_run_started_while_temporal_is_away_is_answered_once_and_runs_once_it_answers(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    gone = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=_binary("temporal-test-server"), data_converter=pydantic_data_converter
    )
    away = gone.client
    await gone.shutdown()
    platform.settings = platform.settings.model_copy(
        update={"run_check_seconds": 1.0, "search_attributes": not temporal_env.supports_time_skipping}
    )
    async with running_engine(platform, temporal_env.client) as engine:
        sid = await new_session(engine)
        reachable, platform.temporal = platform.temporal, away
        try:
            reply = await platform.command(
                {"command": "start_execution", "session_id": sid, "workflow": "recorder", "input": {"n": 1}}
            )
        finally:
            platform.temporal = reachable
        assert reply["status"] == "success", reply
        execution_id = reply["execution"]["id"]

        async def ended() -> bool:
            executions = (await engine.command("list_executions", session_id=sid))["executions"]
            return [(e["id"], e["status"]) for e in executions] == [(execution_id, "completed")]

        await eventually(ended, within=60, what="the run the sweep started to complete")
        assert [r.input["execution_id"] for r in engine.log.runs] == [execution_id], "one run, by the answered id"
        assert engine.log.runs[0].input["input"] == {"n": 1}
