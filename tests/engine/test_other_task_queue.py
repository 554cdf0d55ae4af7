"""A workflow action that names a `task_queue`: its run starts there, on a worker that is not the platform's, and
reads and writes its session and reports its end through the platform's activities by name on the platform's
queue (what a worker of another language does: `clients/typescript`'s run-side SDK)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from temporalio import workflow
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from orchestrator.engine.worker import sandbox_runner
from orchestrator.platform import Platform
from orchestrator.workflows.run_end import RunEndInterceptor
from tests.engine.harness import Engine, eventually, lane_outcomes, new_session, running_engine
from tests.timeouts import cancel_within, stop_within

pytestmark = pytest.mark.both_servers

with workflow.unsafe.imports_passed_through():
    from orchestrator.sdk import RunInput, RunSession


@workflow.defn(name="elsewhere_writer")
class ElsewhereWriter:
    """Reads what woke it and writes what it saw, from a worker with none of the platform's activities."""

    @workflow.run
    async def run(self, run: RunInput) -> str:
        session = RunSession(run)
        aliases = [m["alias"] for m in await session.batch_messages()]
        seen = {"type": "seen", "aliases": aliases, "queue": workflow.info().task_queue}
        await session.write_object("out/seen", seen)
        if run.input and run.input.get("fail"):
            raise ApplicationError("asked to fail", type="AskedToFail", non_retryable=True)
        return "done"


@workflow.defn(name="elsewhere_started")
class ElsewhereStarted:
    """Started by `start_execution` on its queue: writes its input and where it ran."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        await RunSession(run).write_object(
            "out/started", {"type": "started", "input": run.input, "queue": workflow.info().task_queue}
        )


@workflow.defn(name="elsewhere_raw_end")
class ElsewhereRawEnd:
    """Reports its own end by name as a worker of another language may: a failure whose type and message are
    far longer than the platform keeps, sent whole."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        tag = workflow.memo_value("orchestrator")
        end = {"tag": tag, "status": "failed", "error": "m" * 50_000, "error_type": "T" * 5_000, "at": None}
        await workflow.execute_activity(
            "orchestrator.run_ended",
            end,
            task_queue=run.platform_task_queue or workflow.info().task_queue,
            start_to_close_timeout=timedelta(seconds=30),
        )


@pytest.fixture
async def elsewhere(platform: Platform, temporal_env: WorkflowEnvironment) -> AsyncIterator[tuple[Engine, str]]:
    """The platform's engine on its own queue, and a worker on another that runs only `elsewhere_writer`."""
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping}
    )
    client = temporal_env.client
    queue = f"elsewhere-{uuid.uuid4().hex[:10]}"
    async with running_engine(platform, client) as engine:
        worker = Worker(
            client,
            task_queue=queue,
            workflows=[ElsewhereWriter, ElsewhereStarted, ElsewhereRawEnd],
            workflow_runner=sandbox_runner(client.data_converter),
            interceptors=[RunEndInterceptor()],
        )
        task = asyncio.create_task(worker.run())
        try:
            yield engine, queue
        finally:
            await stop_within(worker.shutdown(), "the other queue's worker")
            await cancel_within([task], "the other queue's worker")


def listener(queue: str, **input: Any) -> dict[str, Any]:
    return {
        "name": "elsewhere",
        "filter": {"types": ["object.written"], "aliases": ["missions/**"]},
        "batch": {"window_seconds": 0.2},
        "action": {"type": "workflow", "workflow": "elsewhere_writer", "task_queue": queue, "input": input or None},
    }


async def test_a_run_starts_on_the_queue_its_action_names_and_reports_its_end(
    elsewhere: tuple[Engine, str],
) -> None:
    engine, queue = elsewhere
    saved = await engine.command("save_listener", listener=listener(queue))
    assert "warnings" not in saved, "a workflow on another queue is that worker's: no warning of an unregistered one"
    sid = await new_session(engine)
    await engine.command("write_object", session_id=sid, alias="missions/1", value={"type": "m"})

    async def ended() -> bool:
        runs = (await engine.command("list_executions", session_id=sid, listener="elsewhere"))["executions"]
        return bool(runs) and runs[0]["status"] == "completed"

    # Well within the run sweep's look (45 s): the run's own report recorded its end.
    await eventually(ended, within=20, what="the run's end, as it reported it")
    seen = (await engine.command("read_object", session_id=sid, alias="out/seen"))["object"]
    assert seen["value"] == {"type": "seen", "aliases": ["missions/1"], "queue": queue}
    events = (await engine.command("list_session_events", session_id=sid, types=["object.written"]))["events"]
    written = [e for e in events if e.get("alias") == "out/seen"]
    assert written[0]["source"]["listener"] == "elsewhere", "the write is the run's, as on the platform's queue"
    run = (await engine.command("list_executions", session_id=sid))["executions"][0]
    assert run["error"] is None, "reported by the run, not found closed by the sweep"
    assert [o["status"] for o in await lane_outcomes(engine, sid, "elsewhere")] == ["success"]


async def test_a_failed_run_elsewhere_reports_its_error(elsewhere: tuple[Engine, str]) -> None:
    engine, queue = elsewhere
    await engine.command("save_listener", listener=listener(queue, fail=True))
    sid = await new_session(engine)
    await engine.command("write_object", session_id=sid, alias="missions/1", value={"type": "m"})

    async def failed() -> dict[str, Any] | None:
        runs = (await engine.command("list_executions", session_id=sid, listener="elsewhere"))["executions"]
        return runs[0] if runs and runs[0]["status"] == "failed" else None

    async def has_failed() -> bool:
        return await failed() is not None

    await eventually(has_failed, within=20, what="the failed run's end")
    run = await failed()
    assert run is not None and "asked to fail" in run["error"]


async def test_a_task_queue_is_validated(elsewhere: tuple[Engine, str]) -> None:
    engine, _ = elsewhere
    reply = await engine.platform.command({"command": "save_listener", "listener": listener("/_sys/x")})
    assert reply["status"] == "error" and reply["error"] == "invalid_request"
    assert "action.workflow.task_queue" in reply["message"] or "task_queue" in reply["message"]


async def test_start_execution_on_a_named_queue_runs_there_and_reports_its_end(elsewhere: tuple[Engine, str]) -> None:
    """No platform worker registers the workflow: on the queue the request names, that is another worker's affair."""
    engine, queue = elsewhere
    sid = await new_session(engine)
    refused = await engine.platform.command(
        {"command": "start_execution", "session_id": sid, "workflow": "elsewhere_started"}
    )
    assert refused["error"] == "not_found", "on the platform's queue, a workflow no worker registers is refused"
    started = await engine.command(
        "start_execution", session_id=sid, workflow="elsewhere_started", task_queue=queue, input={"n": 7}
    )

    async def ended() -> bool:
        runs = (await engine.command("list_executions", session_id=sid))["executions"]
        return bool(runs) and runs[0]["status"] == "completed"

    await eventually(ended, within=20, what="the run's end, as it reported it")
    out = (await engine.command("read_object", session_id=sid, alias="out/started"))["object"]
    assert out["value"] == {"type": "started", "input": {"n": 7}, "queue": queue}
    run = (await engine.command("list_executions", session_id=sid))["executions"][0]
    assert run["id"] == started["execution"]["id"] and run["error"] is None


async def test_an_error_reported_by_name_is_bounded_in_execution_ended(elsewhere: tuple[Engine, str]) -> None:
    """The platform bounds a failed run's error (type and message) in its `execution.ended`, whatever the worker
    that reported it sent: a worker of another language is not held to the Python SDK's cuts."""
    engine, queue = elsewhere
    body = listener(queue)
    body["action"]["workflow"] = "elsewhere_raw_end"
    await engine.command("save_listener", listener=body)
    sid = await new_session(engine)
    await engine.command("write_object", session_id=sid, alias="missions/1", value={"type": "m"})

    async def ended() -> list[dict[str, Any]]:
        return (await engine.command("list_session_events", session_id=sid, types=["execution.ended"]))["events"]

    async def has_ended() -> bool:
        return bool(await ended())

    await eventually(has_ended, within=20, what="the run's reported end")
    error = (await ended())[0]["execution"]["error"]
    assert len(error["type"]) == 200, "an error's type is a name, cut as the Python SDK cuts it"
    assert error["message"] == "m" * 2000
    [run] = (await engine.command("list_executions", session_id=sid))["executions"]
    assert run["error"] == "m" * 4000, "the run's record keeps 4,000 characters, as the Python SDK sends"
