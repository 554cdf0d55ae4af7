"""What it costs to learn that a run ended: a local activity at its end (how a listener's run reports its end,
`workflows/run_end.py`) against a completion callback (Temporal's server calls a URL when the run closes), each
beside the same run told nothing.

Three kinds of workflow of two activities each, 32 in flight, in blocks of `--block` that take turns on one dev
server (the order turning each round, so that a drift of the server favours none): `plain` (nothing told),
`local` (a local activity after the two) and `callback` (started with a completion callback to an HTTP endpoint
in this process, through the raw `StartWorkflowExecution`: the Python SDK's `start_workflow` takes none). Every
block awaits each workflow's result alike. Prints, per kind, the median over the rounds of runs/s and of CPU a
run of this process (the worker, the client, the callback's endpoint) and of the Temporal server, and each less
`plain`'s.

Run: .venv/bin/python -m bench.run_end_cost [--rounds 4] [--block 300]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from temporalio import activity
from temporalio.api.common.v1 import Callback, Payloads, WorkflowType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest
from temporalio.client import Client
from temporalio.worker import Worker

from bench.common import cpu_seconds, row
from bench.workflows import BenchNaiveTwo, BenchTwoTold
from orchestrator.dev.embedded import TemporalDevServer
from orchestrator.dev.runtime import serve_api
from orchestrator.engine.worker import sandbox_runner

IN_FLIGHT = 32
KINDS = ("plain", "local", "callback")
# The dev server refuses a callback to an address its dynamic config does not allow (`callback.allowedAddresses`
# in server 1.32; `component.callbacks.allowedAddresses` before).
ALLOW_CALLBACKS = '[{"Pattern":"*","AllowInsecure":true}]'


@activity.defn(name="bench.noop")
async def noop(n: int) -> int:
    return n


@activity.defn(name="bench.naive_done")
async def naive_done(n: int) -> int:
    return n


@activity.defn(name="bench.told")
async def told(n: int) -> int:
    return n


@dataclass
class Block:
    runs_per_second: float
    # CPU milliseconds a run: this process, the Temporal server.
    here: float
    server: float


async def block(client: Client, task_queue: str, kind: str, count: int, callback_url: str, server_pid: int) -> Block:
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one(n: int) -> None:
        async with gate:
            workflow_id = f"{task_queue}-{kind}-{n}-{uuid.uuid4().hex[:8]}"
            if kind == "callback":
                await client.workflow_service.start_workflow_execution(
                    StartWorkflowExecutionRequest(
                        namespace=client.namespace,
                        workflow_id=workflow_id,
                        workflow_type=WorkflowType(name="bench_naive_two"),
                        task_queue=TaskQueue(name=task_queue),
                        input=Payloads(payloads=await client.data_converter.encode([n])),
                        request_id=str(uuid.uuid4()),
                        identity="bench.run_end_cost",
                        completion_callbacks=[Callback(nexus=Callback.Nexus(url=callback_url))],
                    )
                )
                await client.get_workflow_handle(workflow_id).result()
            else:
                workflow = BenchTwoTold.run if kind == "local" else BenchNaiveTwo.run
                await client.execute_workflow(workflow, n, id=workflow_id, task_queue=task_queue)

    here, server, began = cpu_seconds(), cpu_seconds(server_pid), time.time()
    await asyncio.gather(*(one(n) for n in range(count)))
    took = time.time() - began
    await asyncio.sleep(1)  # the server's last tasks of the block, its callbacks' deliveries
    return Block(count / took, 1000 * (cpu_seconds() - here) / count, 1000 * (cpu_seconds(server_pid) - server) / count)


async def main(rounds: int, count: int) -> None:
    calls: list[float] = []

    async def ended(request: Request) -> Response:
        await request.body()
        calls.append(time.time())
        return Response(status_code=200)

    endpoint = Starlette(routes=[Route("/ended", ended, methods=["POST"])])
    with tempfile.TemporaryDirectory(prefix="bench-temporal-") as folder:
        extra = tuple(
            arg
            for name in ("callback.allowedAddresses", "component.callbacks.allowedAddresses")
            for arg in ("--dynamic-config-value", f"{name}={ALLOW_CALLBACKS}")
        )
        server = await TemporalDevServer(Path(folder), ui=False, extra_args=extra).start()
        try:
            assert server.pid is not None
            client = await Client.connect(server.address)
            task_queue = f"end-{uuid.uuid4().hex[:8]}"
            worker = Worker(
                client,
                task_queue=task_queue,
                workflows=[BenchNaiveTwo, BenchTwoTold],
                activities=[noop, naive_done, told],
                workflow_runner=sandbox_runner(),
            )
            async with serve_api(endpoint, "127.0.0.1", 0) as url, worker:
                callback_url = f"{url}/ended"
                for kind in KINDS:  # each kind's first runs (imports, the sandbox's first module loads)
                    await block(client, task_queue, kind, 60, callback_url, server.pid)
                measured: dict[str, list[Block]] = {kind: [] for kind in KINDS}
                for n in range(rounds):
                    for kind in KINDS[n % 3 :] + KINDS[: n % 3]:
                        measured[kind].append(await block(client, task_queue, kind, count, callback_url, server.pid))
                        got = measured[kind][-1]
                        print(
                            f"  round {n + 1} {kind:<9} {got.runs_per_second:6.1f} runs/s, this process"
                            f" {got.here:5.1f} ms, Temporal {got.server:5.1f} ms a run",
                            flush=True,
                        )
        finally:
            await server.stop()
    delivered = len(calls)
    print(f"run end told, {rounds} rounds of {count} runs a kind, {IN_FLIGHT} in flight ({delivered} callbacks)")
    plain = measured["plain"]
    for kind in KINDS:
        blocks = measured[kind]
        here = statistics.median(b.here for b in blocks)
        server_ms = statistics.median(b.server for b in blocks)
        row(f"{kind}: runs/s, median", statistics.median(b.runs_per_second for b in blocks), "/s")
        row(f"{kind}: CPU a run, this process, median", here, "ms")
        row(f"{kind}: CPU a run, the Temporal server, median", server_ms, "ms")
        if kind != "plain":
            more_here = statistics.median(b.here - p.here for b, p in zip(blocks, plain, strict=True))
            more_server = statistics.median(b.server - p.server for b, p in zip(blocks, plain, strict=True))
            row(f"{kind}: beyond plain, this process (median of the rounds)", more_here, "ms")
            row(f"{kind}: beyond plain, the Temporal server", more_server, "ms")
            row(f"{kind}: beyond plain, both", more_here + more_server, "ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--block", type=int, default=300)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.block))
