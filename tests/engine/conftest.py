"""Fixtures for the lane engine: a running engine on the server `--temporal` chooses."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.testing import WorkflowEnvironment

from orchestrator.platform import Platform
from tests.engine.harness import Engine, running_engine


@pytest.fixture
async def engine(platform: Platform, temporal_env: WorkflowEnvironment) -> AsyncIterator[Engine]:
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping}
    )
    async with running_engine(platform, temporal_env.client) as running:
        yield running
