"""The app the crash tests run in worker processes of their own, so that a test can SIGKILL them.

Its one workflow, `tracked`, records its run's start and end in the table `crash_runs` of the platform's
own database, through activities (a workflow cannot do I/O). The records outlive any worker, so the tests'
assertions are SQL over them. The start keeps its first write and the end its first, so an activity that
runs again after a crash does not move either; the run sleeps `input.sleep` seconds in between, which is
where a kill usually lands. Activity timeouts are short so that a run caught by a kill resumes within a
few seconds on the next worker rather than after the default 30.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from datetime import timedelta

import asyncpg
from temporalio import activity, workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from orchestrator.sdk import RunSession
    from orchestrator.workflows.messages import RunInput

CREATE_CRASH_WAITS = """
CREATE TABLE IF NOT EXISTS crash_waits (
    execution_id text PRIMARY KEY,
    lane         text NOT NULL,
    matched      integer,
    event_ids    bigint[] NOT NULL,
    answers      integer NOT NULL DEFAULT 1
)
"""

CREATE_CRASH_RUNS = """
CREATE TABLE IF NOT EXISTS crash_runs (
    execution_id text PRIMARY KEY,
    session_id   text NOT NULL,
    listener     text NOT NULL,
    lane         text NOT NULL,
    event_ids    bigint[] NOT NULL,
    started_at   timestamptz NOT NULL,
    ended_at     timestamptz,
    start_pid    integer NOT NULL,
    end_pid      integer
)
"""

ACTIVITY_TIMEOUT = timedelta(seconds=5)
ACTIVITY_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=2))

_table_ready = False


async def _connect() -> asyncpg.Connection:
    # A connection per call rather than a pool: nothing to go stale across a database restart.
    global _table_ready
    conn = await asyncpg.connect(os.environ["ORCHESTRATOR_DATABASE_URL"])
    if not _table_ready:
        # Two workers creating the table at once: the loser's unique violation means it exists.
        with contextlib.suppress(asyncpg.UniqueViolationError, asyncpg.DuplicateTableError):
            await conn.execute(CREATE_CRASH_RUNS)
        _table_ready = True
    return conn


@activity.defn(name="crash.run_started")
async def run_started(run: RunInput) -> None:
    conn = await _connect()
    try:
        await conn.execute(
            "INSERT INTO crash_runs (execution_id, session_id, listener, lane, event_ids, started_at, start_pid)"
            " VALUES ($1, $2, $3, $4, $5, clock_timestamp(), $6) ON CONFLICT (execution_id) DO NOTHING",
            run.execution_id,
            run.session_id,
            run.listener,
            run.batch.lane,
            run.batch.event_ids,
            os.getpid(),
        )
    finally:
        await conn.close()


@activity.defn(name="crash.run_ended")
async def run_ended(execution_id: str) -> None:
    conn = await _connect()
    try:
        await conn.execute(
            "UPDATE crash_runs SET ended_at = clock_timestamp(), end_pid = $2"
            " WHERE execution_id = $1 AND ended_at IS NULL",
            execution_id,
            os.getpid(),
        )
    finally:
        await conn.close()


@workflow.defn(name="tracked")
class Tracked:
    @workflow.run
    async def run(self, run: RunInput) -> str:
        await workflow.execute_activity(
            run_started, run, start_to_close_timeout=ACTIVITY_TIMEOUT, retry_policy=ACTIVITY_RETRY
        )
        options = run.input if isinstance(run.input, dict) else {}
        sleep = float(options.get("sleep", 0))
        if sleep > 0:
            await workflow.sleep(sleep)
        await workflow.execute_activity(
            run_ended, str(run.execution_id), start_to_close_timeout=ACTIVITY_TIMEOUT, retry_policy=ACTIVITY_RETRY
        )
        return "done"


@activity.defn(name="crash.heard")
async def heard(execution_id: str, lane: str, matched: int | None, event_ids: list[int]) -> None:
    """A waiting run's answer; a second one for the same run counts up (a run must hear once)."""
    conn = await asyncpg.connect(os.environ["ORCHESTRATOR_DATABASE_URL"])
    try:
        await conn.execute(CREATE_CRASH_WAITS)
        await conn.execute(
            "INSERT INTO crash_waits (execution_id, lane, matched, event_ids) VALUES ($1, $2, $3, $4)"
            " ON CONFLICT (execution_id) DO UPDATE SET answers = crash_waits.answers + 1",
            execution_id,
            lane,
            matched,
            event_ids,
        )
    finally:
        await conn.close()


@workflow.defn(name="waiter")
class Waiter:
    """Waits for the reply to its lane's ask (`{lane}/reply`, written later), and records what it heard."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        answer = await RunSession(run).wait_for_event(
            [{"types": ["object.written"], "aliases": [f"{run.batch.lane}/reply"]}], timeout_seconds=3600
        )
        await workflow.execute_activity(
            heard,
            args=[str(run.execution_id), run.batch.lane, answer["matched"], [e["id"] for e in answer["events"]]],
            start_to_close_timeout=ACTIVITY_TIMEOUT,
            retry_policy=ACTIVITY_RETRY,
        )


@workflow.defn(name="stubborn")
class Stubborn:
    """Runs for an hour and ignores its cancellation: only a termination after its grace ends it."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        try:
            await workflow.sleep(3600)
        except asyncio.CancelledError:
            await workflow.sleep(3600)


workflows = [Tracked, Waiter, Stubborn]
activities = [run_started, run_ended, heard]
