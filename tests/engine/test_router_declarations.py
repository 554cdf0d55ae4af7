"""The router reads a listener version's declaration when a round first nudges for it, and keeps it.

A saved version never changes, so nothing invalidates what was read; a version saved after the router started
is read when first asked for. The router used to read and parse every version of every listener again after
each save.
"""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from orchestrator.engine.router import Router
from orchestrator.platform import Platform
from orchestrator.store.engine_records import EngineRecords


def body(window: float) -> dict[str, Any]:
    return {
        "name": "timed",
        "filter": {"types": ["app.*"]},
        "batch": {"window_seconds": window},
        "action": {"type": "workflow", "workflow": "w"},
    }


async def test_a_version_is_read_once_and_one_saved_later_when_first_asked_for(
    platform: Platform, temporal_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = platform.store
    assert isinstance(store, EngineRecords)
    router = Router(store, store.lanes, temporal_env.client, platform.direct_url, platform.settings)
    reads: list[tuple[str, int]] = []
    real = store.listener_body

    async def counted(name: str, version: int) -> Any:
        reads.append((name, version))
        return await real(name, version)

    monkeypatch.setattr(store, "listener_body", counted)
    await store.save_listener("timed", body(1.0), 0)
    first = await router._declaration("timed", 1)
    assert first is not None and first.batch.window_seconds == 1.0
    assert await router._declaration("timed", 1) is first
    assert reads == [("timed", 1)], "read once"

    await store.save_listener("timed", body(3.0), 0)
    second = await router._declaration("timed", 2)
    assert second is not None and second.batch.window_seconds == 3.0
    assert await router._declaration("timed", 1) is first, "the first version is still itself"
    assert await router._declaration("timed", 9) is None
