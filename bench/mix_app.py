"""The production mix's app (`bench.production_mix`): three listeners of every mode over one session's writes,
a captured table of its own, and a run that does real work through two activities.

Every session gets the same app: a serial listener and a parallel one over every kind of write (objects written
through the door, facts emitted in bulk, rows inserted into the captured table `mix_rows`), and a listener keyed
by a field (`data.doc.key`, which the emitted facts and the captured rows both carry) over the last two. Each run
records its start (its batch's events, the clock) and then its end in `mix_runs`, in the platform's database:
the bench's accounting is SQL over those rows, as the fault soak's is over `crash_runs`.

The file imports only the SDK, asyncpg and the run's input message, so the bench can lay it into a checkout of
an earlier release and run that release's workers with it: an upgrade keeps the application's code.
"""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from typing import Any

import asyncpg
from temporalio import activity, workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from orchestrator.workflows.messages import RunInput

KEYS = 20
SERIAL, KEYED, PARALLEL = "mix_serial", "mix_keyed", "mix_parallel"
ALL_KINDS = ["object.written", "mix.fact", "mixrow.created"]
KEYED_KINDS = ["mix.fact", "mixrow.created"]

MIGRATION = """
CREATE TABLE IF NOT EXISTS public.mix_rows (
    id         bigint PRIMARY KEY,
    session_id text NOT NULL,
    key        text NOT NULL,
    n          bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS public.mix_runs (
    execution_id text PRIMARY KEY,
    session_id   text NOT NULL,
    listener     text NOT NULL,
    lane         text NOT NULL,
    event_ids    bigint[] NOT NULL,
    started_at   timestamptz NOT NULL,
    ended_at     timestamptz
);
"""


async def migrate(database_url: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        # Two workers starting at once: one makes the tables, the other finds them.
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(4545)")
            await conn.execute(MIGRATION)
    finally:
        await conn.close()


event_types: list[dict[str, Any]] = [
    {
        "name": "mix.fact",
        "schema": {
            "type": "object",
            "properties": {
                "doc": {
                    "type": "object",
                    "properties": {"key": {"type": "string"}, "n": {"type": "integer"}},
                    "required": ["key"],
                }
            },
            "required": ["doc"],
        },
        "description": "a fact the mix's writers emit in bulk, shaped as a captured row is (its key in doc)",
    }
]

captures: list[dict[str, Any]] = [{"table": "mix_rows", "type_prefix": "mixrow", "session_column": "session_id"}]


def _listener(name: str, types: list[str], concurrency: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "filter": {"types": types},
        "concurrency": concurrency,
        "batch": {"window_seconds": 1, "max_events": 1000},
        "action": {"type": "workflow", "workflow": "mix_run"},
    }


listeners = [
    _listener(SERIAL, ALL_KINDS, {"mode": "serial"}),
    _listener(KEYED, KEYED_KINDS, {"mode": "keyed", "key": "data.doc.key", "max_parallel": 4}),
    _listener(PARALLEL, ALL_KINDS, {"mode": "parallel", "max_parallel": 4}),
]

# The run's activities reach the database through one small pool per worker; a connection lost to a database
# restart fails its attempt, and the retry takes a fresh one.
_pool: asyncpg.Pool | None = None
_pool_lock = asyncio.Lock()


async def _conn_pool() -> asyncpg.Pool:
    global _pool
    async with _pool_lock:
        if _pool is None:
            _pool = await asyncpg.create_pool(os.environ["ORCHESTRATOR_DATABASE_URL"], min_size=0, max_size=4)
    return _pool


@activity.defn(name="mix.run_started")
async def run_started(run: RunInput) -> None:
    pool = await _conn_pool()
    await pool.execute(
        "INSERT INTO public.mix_runs (execution_id, session_id, listener, lane, event_ids, started_at)"
        " VALUES ($1, $2, $3, $4, $5, clock_timestamp()) ON CONFLICT (execution_id) DO NOTHING",
        str(run.execution_id),
        run.session_id,
        run.listener,
        run.batch.lane,
        run.batch.event_ids,
    )


@activity.defn(name="mix.run_ended")
async def run_ended(execution_id: str) -> None:
    pool = await _conn_pool()
    await pool.execute(
        "UPDATE public.mix_runs SET ended_at = clock_timestamp() WHERE execution_id = $1 AND ended_at IS NULL",
        execution_id,
    )


ACTIVITY_TIMEOUT = timedelta(seconds=10)
ACTIVITY_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=2))


@workflow.defn(name="mix_run")
class MixRun:
    @workflow.run
    async def run(self, run: RunInput) -> None:
        await workflow.execute_activity(
            run_started, run, start_to_close_timeout=ACTIVITY_TIMEOUT, retry_policy=ACTIVITY_RETRY
        )
        await workflow.execute_activity(
            run_ended, str(run.execution_id), start_to_close_timeout=ACTIVITY_TIMEOUT, retry_policy=ACTIVITY_RETRY
        )


workflows = [MixRun]
activities = [run_started, run_ended]
