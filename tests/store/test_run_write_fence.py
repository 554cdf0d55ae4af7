"""A run's `execution.ended` comes after every event the run writes (SPEC 4, causes before effects), also when the
run is stopped while its activities still write: a write that comes after its end is recorded is refused, and a
write that holds the session when the end is recorded goes before it (0034_run_writes_fenced.sql)."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from orchestrator.platform import Platform
from orchestrator.store.lane_store import Ending
from orchestrator.store.postgres import PostgresStore
from tests.store.helpers import all_events, ok

RUN = "exe:fenced"
SOURCE = {"listener": "l", "execution": RUN}


async def _run(platform: Platform) -> tuple[PostgresStore, str]:
    store = platform.store
    assert isinstance(store, PostgresStore)
    session_id = (await ok(platform, "open_session"))["session"]["id"]
    await store.pool.execute(
        "INSERT INTO orchestrator.executions (id, session_id, workflow, listener) VALUES ($1, $2, 'wf', 'l')",
        RUN,
        session_id,
    )
    await store.run_has_started(RUN)  # as the session activity records it before a run's first write
    return store, session_id


def _end(session_id: str) -> Ending:
    return Ending(execution_id=RUN, session_id=session_id, status="stopped", error="stopped", listener="l")


async def test_a_runs_write_after_its_end_is_recorded_is_refused_and_nothing_is_written(platform: Platform) -> None:
    store, session_id = await _run(platform)
    await store.write_object(session_id, "a/1", {"type": "t"}, source=SOURCE, depth=1)
    await store.lanes.end_run(_end(session_id))

    with pytest.raises(asyncpg.ObjectNotInPrerequisiteStateError, match="run exe:fenced has ended"):
        await store.write_object(session_id, "a/2", {"type": "t"}, source=SOURCE, depth=1)
    # The platform's own events of the run, and anyone else's writes, are not fenced.
    await store.write_object(session_id, "a/3", {"type": "t"}, source={"client": "door"})

    events = [(e["type"], e.get("alias")) for e in await all_events(platform, session_id)]
    assert events == [
        ("execution.started", None),
        ("object.written", "a/1"),
        ("execution.ended", None),
        ("object.written", "a/3"),
    ], events


async def test_a_write_holding_the_session_when_the_end_is_recorded_goes_before_the_end(platform: Platform) -> None:
    store, session_id = await _run(platform)
    async with store.transaction() as writing:
        # The run's write in flight: it holds the session's row, as every writer does, up to its commit.
        await writing.execute("SELECT orchestrator.orchestrator_lock_session($1)", session_id)
        ending = asyncio.create_task(store.lanes.end_run(_end(session_id)))
        await asyncio.sleep(0.3)
        assert not ending.done(), "the end waits for the session's row"
        await writing.execute(
            "SELECT * FROM orchestrator.orchestrator_write_object($1, 'b/1', '{\"type\": \"t\"}'::jsonb, NULL, $2, 1,"
            " NULL, NULL, NULL)",
            session_id,
            SOURCE,
        )
    await ending

    types = [e["type"] for e in await all_events(platform, session_id)]
    assert types == ["execution.started", "object.written", "execution.ended"], types
