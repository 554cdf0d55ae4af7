"""The store's functions take their locks in one order: the session's row before an execution's row.

A run's end (`orchestrator_run_end`) locks the session and then its execution's row; a fire that records the
same run's start (`orchestrator_execution_started`, from `orchestrator_batch_finish`) must wait for the session
first too, or a run that ends while its start is being recorded deadlocks the two (PostgreSQL then fails one
of them after a second, and the writers queued behind the session with them).
"""

from __future__ import annotations

import asyncio

import pytest

from orchestrator.platform import Platform
from orchestrator.store.postgres import PostgresStore
from tests.store.helpers import all_events, ok


@pytest.mark.asyncio
async def test_a_start_recorded_while_its_run_ends_waits_for_the_session_first(platform: Platform) -> None:
    store = platform.store
    assert isinstance(store, PostgresStore)
    session_id = (await ok(platform, "open_session"))["session"]["id"]
    await store.pool.execute(
        "INSERT INTO executions (id, session_id, workflow) VALUES ('exe:lock-order', $1, 'wf')", session_id
    )
    async with store.transaction() as ending:
        # The run's end, as `orchestrator_run_end` takes its locks: the session's row first.
        await ending.execute("SELECT orchestrator_lock_session($1)", session_id)
        starting = asyncio.create_task(store.pool.execute("SELECT orchestrator_execution_started('exe:lock-order')"))
        await asyncio.sleep(0.3)  # the start is recorded meanwhile, and waits for whatever it waits for
        # Then the execution's row: a start that locked it first would deadlock here.
        await asyncio.wait_for(
            ending.execute("UPDATE executions SET status = 'completed' WHERE id = 'exe:lock-order'"), timeout=5
        )
        assert not starting.done()  # it waits for the session, behind the end
    await asyncio.wait_for(starting, timeout=5)
    started = [e for e in await all_events(platform, session_id) if e["type"] == "execution.started"]
    assert len(started) == 1
