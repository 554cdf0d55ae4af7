"""The benchmarks' workflows, in a module of their own that imports next to nothing.

A workflow's module is imported again into the sandbox for every new run: the bench's run, one per batch,
should cost what a small application's does, not the import of the benchmark's whole harness.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from orchestrator.sdk import RunSession
    from orchestrator.workflows.messages import RunInput


@workflow.defn(name="bench_run")
class BenchRun:
    @workflow.run
    async def run(self, run: RunInput) -> None:
        await workflow.execute_local_activity(
            "bench.run_started", run.batch.event_ids, start_to_close_timeout=timedelta(seconds=10)
        )


@workflow.defn(name="bench_naive")
class BenchNaive:
    @workflow.run
    async def run(self, n: int) -> int:
        return int(
            await workflow.execute_local_activity(
                "bench.noop", n, start_to_close_timeout=timedelta(seconds=10), result_type=int
            )
        )


# Two real activities each, as an application's run does: the lane's run reports its start with the first.
TWO_ACTIVITIES = timedelta(seconds=30)


@workflow.defn(name="bench_run_two")
class BenchRunTwo:
    @workflow.run
    async def run(self, run: RunInput) -> None:
        await workflow.execute_activity("bench.run_started", run.batch.event_ids, start_to_close_timeout=TWO_ACTIVITIES)
        await workflow.execute_activity("bench.noop", 0, start_to_close_timeout=TWO_ACTIVITIES, result_type=int)


@workflow.defn(name="bench_naive_two")
class BenchNaiveTwo:
    @workflow.run
    async def run(self, n: int) -> int:
        await workflow.execute_activity("bench.noop", n, start_to_close_timeout=TWO_ACTIVITIES, result_type=int)
        return int(
            await workflow.execute_activity(
                "bench.naive_done", n, start_to_close_timeout=TWO_ACTIVITIES, result_type=int
            )
        )


@workflow.defn(name="bench_two_told")
class BenchTwoTold:
    """`BenchNaiveTwo`'s two activities and then a local activity, as a listener's run reports its end
    (`bench.run_end_cost`)."""

    @workflow.run
    async def run(self, n: int) -> int:
        await workflow.execute_activity("bench.noop", n, start_to_close_timeout=TWO_ACTIVITIES, result_type=int)
        done = await workflow.execute_activity(
            "bench.naive_done", n, start_to_close_timeout=TWO_ACTIVITIES, result_type=int
        )
        await workflow.execute_local_activity("bench.told", n, start_to_close_timeout=TWO_ACTIVITIES, result_type=int)
        return int(done)


@workflow.defn(name="bench_soak_run")
class BenchSoakRun:
    """Reports its listener and its batch's events as it starts (`bench.soak`: delays per listener)."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        await workflow.execute_local_activity(
            "bench.soak_started", args=[run.listener, run.batch.event_ids], start_to_close_timeout=timedelta(seconds=10)
        )


@workflow.defn(name="bench_waiter")
class BenchWaiter:
    """Waits for a user's reply on its own chat (its lane), and reports what it heard, at once."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        chat = run.batch.lane
        heard = await RunSession(run).wait_for_event(
            [
                {
                    "types": ["thread.item_posted"],
                    "aliases": [chat],
                    "where": [{"path": "item.role", "op": "eq", "value": "user"}],
                }
            ],
            timeout_seconds=300,
        )
        # The wait's answer reached the run at this workflow task's start: what the spec's "reaches its run" times.
        await workflow.execute_activity(
            "bench.heard",
            args=[chat, heard["matched"], [e["id"] for e in heard["events"]], workflow.now().timestamp()],
            start_to_close_timeout=TWO_ACTIVITIES,
        )


@workflow.defn(name="bench_cancellable")
class BenchCancellable:
    """Works for an hour; cancelled, reports its cleanup at once."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        try:
            await workflow.sleep(3600)
        except asyncio.CancelledError:
            await workflow.execute_activity(
                "bench.heard",
                args=[run.batch.lane, None, [], workflow.now().timestamp()],
                start_to_close_timeout=TWO_ACTIVITIES,
            )
            raise
