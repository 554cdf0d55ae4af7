"""Fixtures for schedules: the lane engine on the dev server (the time-skipping server has no Schedules).

Every Temporal schedule a test leaves behind is deleted afterwards, so the shared dev server does not keep
firing into task queues that nobody polls any more.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from orchestrator.platform import Platform
from tests.engine.harness import Engine, running_engine


@pytest.fixture
async def engine(platform: Platform, dev_env: WorkflowEnvironment) -> AsyncIterator[Engine]:
    async with running_engine(platform, dev_env.client) as running:
        try:
            yield running
        finally:
            for row in await platform.store.pool.fetch("SELECT schedule_id FROM orchestrator.schedules"):
                with contextlib.suppress(RPCError):
                    await dev_env.client.get_schedule_handle(row["schedule_id"]).delete()


async def refused(engine: Engine, command: str, **args: Any) -> dict[str, Any]:
    reply = await engine.platform.command({"command": command, **args})
    assert reply["status"] == "error", reply
    return reply
