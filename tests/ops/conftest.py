"""A small finished workload on the dev server, shared by the inspection tests of this folder.

Two listeners on `missions/**`: `orchestrate` whose runs succeed, and `flaky` whose runs fail and are
repeated only after 300 s, so every status taken meanwhile shows a retry waiting. The engine keeps running
while a test uses the workload, so lanes answer their `state` and `outcomes` queries.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from orchestrator.config import Settings
from orchestrator.core.limits import Limits
from orchestrator.dev.embedded import EmbeddedPostgres
from orchestrator.platform import Platform
from tests.conftest import scratch_database
from tests.engine.harness import Engine, eventually, new_session, recorder_listener, running_engine, write_many

# Long enough that the repeat never comes while this folder's tests run.
FLAKY_DELAY_SECONDS = 300
ALIASES = ["missions/1/meta", "missions/2/meta", "missions/3/meta"]


@dataclass
class Workload:
    engine: Engine
    session_id: str
    event_ids: list[int]
    temporal_address: str
    database_url: str

    @property
    def task_queue(self) -> str:
        return self.engine.task_queue

    async def executions(self, listener: str) -> list[dict[str, Any]]:
        reply = await self.engine.command("list_executions", session_id=self.session_id, listener=listener)
        return list(reply["executions"])


def temporal_address(env: WorkflowEnvironment) -> str:
    return env.client.service_client.config.target_host


def child_env(**settings: str) -> dict[str, str]:
    """This process's environment less its `ORCHESTRATOR_` settings, plus `settings`: what a process of the
    platform that a test starts sees, whatever the shell that runs the suite has set."""
    return {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")} | settings


def platform_env(database_url: str, temporal: WorkflowEnvironment, **settings: str) -> dict[str, str]:
    """`child_env` for an API or worker process on the test's database and Temporal, on a task queue of its own."""
    return child_env(
        ORCHESTRATOR_DATABASE_URL=database_url,
        ORCHESTRATOR_TEMPORAL_ADDRESS=temporal_address(temporal),
        ORCHESTRATOR_TASK_QUEUE=f"tq-{uuid.uuid4().hex[:12]}",
        **settings,
    )


@pytest.fixture(scope="package")
async def ops_database(embedded_pg: EmbeddedPostgres) -> AsyncIterator[str]:
    """A database of its own for this folder's workload, which every test here reads."""
    async with scratch_database(embedded_pg, "ops") as url:
        yield url


@pytest.fixture(scope="package")
async def workload(ops_database: str, dev_env: WorkflowEnvironment) -> AsyncIterator[Workload]:
    """Built once for the folder: a workload takes seconds, and the tests here only read it (or append)."""
    settings = Settings(database_url=None, temporal_address=None, limits=Limits(activation_delay_seconds=0))
    platform = await Platform.connect(settings, ops_database)
    try:
        async with running_engine(platform, dev_env.client) as engine:
            await engine.command("save_listener", listener=recorder_listener("orchestrate"))
            flaky = recorder_listener(
                "flaky",
                action={"type": "workflow", "workflow": "recorder", "input": {"fail": True}},
                retry={"attempts": 2, "delay_seconds": FLAKY_DELAY_SECONDS},
            )
            await engine.command("save_listener", listener=flaky)
            session_id = await new_session(engine)
            ids = await write_many(engine, session_id, ALIASES)
            work = Workload(engine, session_id, ids, temporal_address(dev_env), ops_database)

            async def settled() -> bool:
                done = [e for e in await work.executions("orchestrate") if e["status"] == "completed"]
                failed = [e for e in await work.executions("flaky") if e["status"] == "failed"]
                covered = {i for e in done for i in e["batch"]["event_ids"]}
                return covered >= set(ids) and len(failed) >= 1

            await eventually(settled, within=30, what="orchestrate's runs to complete and flaky's first run to fail")
            yield work
    finally:
        await platform.close()
