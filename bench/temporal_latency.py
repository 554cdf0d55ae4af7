"""The Temporal server's own pace, as the embedded server runs it against the dev server's defaults.

Measured side by side in one run, each server new and alone on the machine with one worker (the platform's
sandbox): a lone run of the benchmarks' two-activity workflow (`bench_naive_two`), started and awaited one
after another (p50 and p90 of 40, the first 10 left out: a new server answers its first few at once), and how
late a workflow's timer fires (p50 over 8 sleeps each of 0.05 s, 0.3 s and 0.77 s). One shard carries every
workflow of a dev server, and its queues' readers poll 20 times a second by default: the embedded server's
flags (`dev/embedded.py`) raise that, and read timers 20 ms ahead rather than a second.

Run: .venv/bin/python -m bench.temporal_latency [--runs 40]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from temporalio import activity, workflow
from temporalio.worker import Worker

from bench.burst import noop
from bench.common import percentile, row
from bench.workflows import BenchNaiveTwo
from orchestrator.dev.embedded import TemporalDevServer
from orchestrator.engine.worker import connect_temporal, sandbox_runner

# The flags the embedded server adds for its one shard: left out, the server runs on Temporal's defaults.
TUNED = ("MaxPollRPS", "timerProcessorMaxTimeShift")
SLEEPS = (0.05, 0.3, 0.77)


@workflow.defn(name="bench_timer_lateness", sandboxed=False)
class TimerLateness:
    @workflow.run
    async def run(self, seconds: float) -> list[float]:
        late = []
        for _ in range(8):
            began = time.time()
            await asyncio.sleep(seconds)
            late.append(time.time() - began - seconds)
        return late


@activity.defn(name="bench.naive_done")
async def noop_done(n: int) -> int:
    """The naive workflow's second activity (`bench.batch_cost` counts its ends with it)."""
    return n


class DefaultsServer(TemporalDevServer):
    """The embedded server without the flags for its one shard."""

    def command(self) -> list[str]:
        args, kept = super().command(), []
        skip = False
        for n, arg in enumerate(args):
            if skip:
                skip = False
                continue
            if arg == "--dynamic-config-value" and any(t in args[n + 1] for t in TUNED):
                skip = True
                continue
            kept.append(arg)
        return kept


async def measure(server_class: type[TemporalDevServer], runs: int) -> tuple[list[float], list[float]]:
    with tempfile.TemporaryDirectory(prefix="bench-temporal-") as folder:
        server = await server_class(Path(folder), ui=False).start()
        try:
            client = await connect_temporal(server.address, "default")
            queue = f"latency-{uuid.uuid4().hex[:8]}"
            async with Worker(
                client,
                task_queue=queue,
                workflows=[BenchNaiveTwo, TimerLateness],
                activities=[noop, noop_done],
                workflow_runner=sandbox_runner(),
            ):
                took = []
                for n in range(runs):
                    began = time.perf_counter()
                    await client.execute_workflow("bench_naive_two", n, id=f"lone-{n}", task_queue=queue)
                    took.append(time.perf_counter() - began)
                late: list[float] = []
                for seconds in SLEEPS:
                    late += await client.execute_workflow(
                        "bench_timer_lateness", seconds, id=f"timer-{seconds}", task_queue=queue
                    )
            return took[10:], late
        finally:
            await server.stop()


async def main(runs: int) -> None:
    print(f"Temporal latency: a new dev server each, one worker, {runs} lone runs of two activities")
    for label, server_class in (("Temporal's defaults", DefaultsServer), ("the embedded server", TemporalDevServer)):
        took, late = await measure(server_class, runs)
        print(label)
        row("a lone run of two activities, p50", 1000 * statistics.median(took), "ms")
        row("a lone run of two activities, p90", 1000 * percentile(took, 90), "ms")
        row("a timer fires late, p50", 1000 * statistics.median(late), "ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    asyncio.run(main(parser.parse_args().runs))
