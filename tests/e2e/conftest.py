"""The example app running end to end: the dev server, the worker and router, and the HTTP API.

The tests drive it only through the HTTP door (`orchestrator.client.Client`), as a user would; the app's
workflows reach the session through the run-side SDK, not through the API. Two timings of the
declarations are shortened so a test takes seconds, not minutes: the inbox's 60 s window and
orchestrate's 30 s retry delay. Everything else is the app's declaration as it stands.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import Client as TemporalClient
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from orchestrator.app_loader import UserApp, load_app
from orchestrator.client import Client
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.engine.wiring import platform_components
from orchestrator.engine.worker import build_worker
from orchestrator.platform import Platform
from tests.timeouts import cancel_within, stop_within

INBOX_WINDOW_SECONDS = 3
ORCHESTRATE_RETRY_DELAY_SECONDS = 0.5


@workflow.defn(name="flaky")
class Flaky:
    """A workflow that always fails: one failed execution for the inbox to pick up."""

    @workflow.run
    async def run(self, run: dict[str, Any]) -> None:
        raise ApplicationError("flaky failed, as it always does", non_retryable=True)


def declarations(app: UserApp) -> list[dict[str, Any]]:
    """The app's listeners with the two long timings shortened (see the module docstring)."""
    bodies = {body["name"]: copy.deepcopy(body) for body in app.listeners}
    bodies["inbox"]["batch"]["window_seconds"] = INBOX_WINDOW_SECONDS
    bodies["orchestrate"]["retry"]["delay_seconds"] = ORCHESTRATE_RETRY_DELAY_SECONDS
    return list(bodies.values())


@dataclass
class Missions:
    client: Client
    temporal: TemporalClient
    session_id: str

    async def run_ids(self, listener: str, status: str | None = None) -> list[str]:
        executions = await self.client.list_executions(self.session_id, listener=listener, status=status)
        return [e["id"] for e in executions["executions"]]

    async def items(self, alias: str) -> list[dict[str, Any]]:
        try:
            return list((await self.client.list_thread_items(self.session_id, alias))["items"])
        except Exception:
            return []

    async def value(self, alias: str) -> dict[str, Any] | None:
        reply = await self.client.command({"command": "read_object", "session_id": self.session_id, "alias": alias})
        return reply["object"] if reply["status"] == "success" else None


@pytest.fixture
async def missions(platform: Platform, dev_env: WorkflowEnvironment) -> AsyncIterator[Missions]:
    platform.settings = platform.settings.model_copy(
        update={"task_queue": f"tq-{uuid.uuid4().hex[:12]}", "search_attributes": True}
    )
    platform.temporal = dev_env.client
    example = load_app("examples.missions.app")
    app = UserApp(name=example.name, workflows=[*example.workflows, Flaky], activities=example.activities)
    components = platform_components(platform, dev_env.client, app)
    if components.registry is not None:
        await components.registry.say()
    worker: Worker = build_worker(dev_env.client, platform.settings, app, components.workflows, components.activities)
    tasks = [asyncio.create_task(worker.run())]
    tasks += [asyncio.create_task(background()) for background in components.background_tasks]
    try:
        api = serve_api(create_app(platform, platform.settings), "127.0.0.1", 0)
        async with api as url, Client.http(url) as client:
            for body in declarations(example):
                await client.save_listener(body)
            session = (await client.open_session(alias=f"e2e-{uuid.uuid4().hex[:6]}"))["session"]
            yield Missions(client, dev_env.client, session["id"])
    finally:
        await stop_within(worker.shutdown(), "the e2e worker")
        await cancel_within(tasks, "the e2e worker and router")
