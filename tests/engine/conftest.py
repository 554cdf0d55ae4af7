"""Fixtures for the lane engine: a running engine on the server `--temporal` chooses."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.testing import WorkflowEnvironment

from orchestrator.platform import Platform
from tests.engine.harness import Engine, running_engine


@pytest.fixture
async def engine(platform: Platform, temporal_env: WorkflowEnvironment) -> AsyncIterator[Engine]:
    async with running_engine(
        platform, temporal_env.client, search_attributes=temporal_env.supports_time_skipping is False
    ) as running:
        yield running
