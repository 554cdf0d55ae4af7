"""The router outlives whatever its loop meets: a connection a dying server left mid-protocol, or worse.

A PostgreSQL restart can hand the pool a connection asyncpg finds in the middle of another operation
(`InternalClientError`, which is neither an `InterfaceError` nor a `PostgresError`); the router took it for
fatal and the worker process ended with it, so nothing was routed until someone restarted the worker.
"""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg
import pytest
from temporalio.testing import WorkflowEnvironment

from orchestrator.engine.router import Router
from orchestrator.lanes.driver import transient
from orchestrator.platform import Platform
from orchestrator.store.postgres import PostgresStore
from tests.engine.harness import eventually
from tests.store.helpers import ok


@pytest.mark.asyncio
async def test_the_router_goes_on_routing_after_errors_it_has_no_name_for(
    platform: Platform, temporal_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = platform.store
    assert isinstance(store, PostgresStore)
    failures: list[BaseException] = [
        asyncpg.InternalClientError("cannot switch to state 11; another operation (2) is in progress"),
        RuntimeError("something no one foresaw"),
    ]
    real = store.sessions_behind

    async def sessions_behind(every: float = 0.0, limit: int = 1000) -> list[str]:
        if failures:
            raise failures.pop(0)
        return await real(every, limit)

    monkeypatch.setattr(store, "sessions_behind", sessions_behind)
    router = Router(store, store.lanes, temporal_env.client, platform.direct_url, platform.settings, poll_seconds=0.2)
    task = asyncio.create_task(router.run())
    try:
        session_id = (await ok(platform, "open_session"))["session"]["id"]
        await ok(platform, "write_object", session_id=session_id, alias="a/1", value={"type": "t"})

        async def routed() -> bool:
            assert not task.done(), task.exception()
            return router.routed >= 1 and not failures

        await eventually(routed, what="the router to route after its failures")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def test_a_batch_that_meets_such_a_connection_is_tried_again_not_failed_for_good() -> None:
    assert transient(asyncpg.InternalClientError("cannot switch to state 11; another operation (2) is in progress"))
    assert transient(asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"))
    assert not transient(asyncpg.DataError("invalid input"))  # the batch's own value: it would fail again
    assert not transient(ValueError("bad"))
