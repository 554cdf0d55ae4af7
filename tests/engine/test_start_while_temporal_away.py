"""Commands while the door's Temporal is out of reach. `start_execution` records the run with its input before the
start is asked, so it answers the run as made (a retry would make a second run under a new id) and the run sweep
starts it, by that id, once Temporal answers: one run. A command that only asks Temporal (`stop_execution` with
`terminate`) answers `unavailable`, to be tried again."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from orchestrator.platform import Platform
from tests.conftest import start_time_skipping
from tests.engine.harness import eventually, new_session, running_engine


async def gone_client() -> Client:
    """A client of a Temporal server that has stopped."""
    gone = await start_time_skipping()
    await gone.shutdown()
    return gone.client


async def test_a_run_started_while_temporal_is_away_is_answered_once_and_runs_once_it_answers(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    away = await gone_client()
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


async def test_a_command_that_only_asks_temporal_answers_unavailable_while_it_is_away(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping}
    )
    async with running_engine(platform, temporal_env.client) as engine:
        sid = await new_session(engine)
        # A run that stays open: a workflow registered here that no worker runs.
        await platform.store.register_workflows(["never_runs"])
        execution_id = (await engine.command("start_execution", session_id=sid, workflow="never_runs"))["execution"][
            "id"
        ]
        stop = {"command": "stop_execution", "session_id": sid, "execution_id": execution_id, "mode": "terminate"}
        reachable, platform.temporal = platform.temporal, await gone_client()
        try:
            refused = await platform.command(stop)
        finally:
            platform.temporal = reachable
        assert (refused["error"], refused["retry_after"]) == ("unavailable", 1), refused
        assert refused["message"].startswith("temporal: out of reach for now"), refused
        # Tried again once Temporal answers, it is done.
        assert (await platform.command(stop))["execution"] == {"id": execution_id, "status": "stopped"}
