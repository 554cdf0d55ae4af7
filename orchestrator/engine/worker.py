"""The composition root of the Temporal worker: one place wires the user's app and the platform's parts.

Owns the Temporal client settings (the pydantic data converter, always, so models cross every boundary
the same way; the tracing interceptor, so runs continue their batch's trace) and the worker's
registrations. What the platform contributes (the lane engine's workflows and activities) comes in as
arguments from `engine.wiring`, so this module never imports the rest of the engine.
"""

from __future__ import annotations

import gc
import inspect
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import temporalio.workflow
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.client import Client
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import (
    ActivitySerializationContext,
    DataConverter,
    NexusSerializationContext,
    SerializationContext,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
    WorkflowSerializationContext,
)
from temporalio.service import TLSConfig
from temporalio.worker import PollerBehaviorSimpleMaximum, Worker, WorkflowInstance, WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from orchestrator.app_loader import UserApp
from orchestrator.config import Settings, reveal
from orchestrator.engine.quiet_outages import QuietOutages
from orchestrator.telemetry import tracing_interceptor
from orchestrator.workflows.run_end import RunEndInterceptor

# Modules the workflow sandbox shares with the worker instead of importing afresh for every workflow run:
# the platform's own (deterministic where workflows use them) and libraries with C extensions, which must
# never be loaded twice in one process (asyncpg segfaults when it is).
PASSTHROUGH_MODULES = (
    "orchestrator",
    "bench",
    "pydantic",
    "pydantic_core",
    "asyncpg",
    "httpx",
    "starlette",
    "uvicorn",
    "opentelemetry",
)

# Threads for the user's synchronous activities; async activities run on the event loop and need none.
SYNC_ACTIVITY_THREADS = 8
# Workflow task polls in flight at once, and the share of them on the task queue's shared side (the rest poll the
# worker's own sticky queue, where every later task of a workflow it holds goes). Every new lane workflow's first
# task comes through the shared side (a run's first comes with its start, eagerly), and the SDK's five at 0.2 left
# one poll there: a lane started by a nudge waited 0.5 to 0.9 s for its first task at the p50 at 20 one-event
# batches a second, and each event's commit to its run started took 0.3 to 1 s. Twelve at 0.7 (eight shared, four
# sticky, as the SDK's default keeps): 23 ms and 0.12 s, and a waited-for reply reaches its run in 23 ms at the
# p50 beside 1,000 events/s (ten all shared but one: 34 ms, 0.2 s, 32 ms). docs/scaling.md, "A lane's first task".
# A poll waiting costs the server a held request, no work.
WORKFLOW_TASK_POLLS = 12
SHARED_POLL_RATIO = 0.7


async def connect_temporal(address: str, namespace: str, settings: Settings | None = None) -> Client:
    """A Temporal client that serializes with pydantic, as every part of the platform expects.

    With `settings`, its TLS files and API key are used (Temporal Cloud); without, a plain connection.
    """
    # None: TLS exactly when an API key is given (the SDK's rule); a client certificate always means TLS.
    tls: TLSConfig | None = None
    api_key = None
    if settings is not None:
        api_key = reveal(settings.temporal_api_key)
        files = (settings.temporal_tls_cert, settings.temporal_tls_key, settings.temporal_tls_server_ca)
        if any(files):
            cert, key, ca = (path.read_bytes() if path is not None else None for path in files)
            tls = TLSConfig(client_cert=cert, client_private_key=key, server_root_ca_cert=ca)
    return await Client.connect(
        address,
        namespace=namespace,
        data_converter=pydantic_data_converter,
        tls=tls,
        api_key=api_key,
        interceptors=[tracing_interceptor()],
    )


def _traced(client: Client) -> bool:
    return any(isinstance(i, TracingInterceptor) for i in client.config()["interceptors"])


def with_tracing(client: Client) -> Client:
    """`client`'s connection with the platform's tracing interceptor (`client` itself if it has one)."""
    if _traced(client):
        return client
    config = client.config()
    config["interceptors"] = [*config["interceptors"], tracing_interceptor()]
    return Client(**config)


def build_worker(
    temporal_client: Client,
    settings: Settings,
    app: UserApp,
    platform_workflows: Sequence[type] = (),
    platform_activities: Sequence[Callable[..., Any]] = (),
) -> Worker:
    """The worker on `settings.task_queue` running the platform's workflows and activities and the app's.

    Raises:
        ValueError: there is nothing to run (no workflow and no activity at all).
    """
    workflows = [*platform_workflows, *app.workflows]
    activities = [*platform_activities, *app.activities]
    if not workflows and not activities:
        raise ValueError(f"app {app.name!r} declares no workflows or activities, so a worker has nothing to run")
    executor = None
    if any(not _is_async(activity) for activity in activities):
        executor = ThreadPoolExecutor(max_workers=SYNC_ACTIVITY_THREADS, thread_name_prefix="activity")
    return Worker(
        temporal_client,
        task_queue=settings.task_queue,
        workflows=workflows,
        activities=activities,
        activity_executor=executor,
        workflow_runner=sandbox_runner(temporal_client.data_converter),
        # A client's tracing interceptor applies to its workers too; one without gets it here. Runs the
        # platform started report their own end (workflows.run_end); the platform's activities fail in a line
        # while the database is away (engine.quiet_outages).
        interceptors=[
            *([] if _traced(temporal_client) else [tracing_interceptor()]),
            RunEndInterceptor(),
            QuietOutages(),
        ],
        graceful_shutdown_timeout=timedelta(seconds=settings.worker_graceful_shutdown_seconds),
        workflow_task_poller_behavior=PollerBehaviorSimpleMaximum(maximum=WORKFLOW_TASK_POLLS),
        nonsticky_to_sticky_poll_ratio=SHARED_POLL_RATIO,
    )


# Allocations between the collector's youngest passes (Python's default is 700). A bulk emit's thousand events, or
# a run's activation, make tens of thousands of short-lived objects: at 700 the worker ran 1,200 young passes and 9
# full ones (45 ms each) over `bench.bulk_events`' 50,000 events, 0.39 to 0.55 s in all; at 20,000, 34 young ones
# and no full one, 0.13 to 0.27 s. Cycles are still collected, later and in fewer passes.
YOUNG_PASS_ALLOCATIONS = 20_000


def settle_heap() -> None:
    """Once a long-lived process has loaded everything (the app, the worker): keep what exists now out of the
    garbage collector's full passes, and let its young passes come less often. Each run's workflow sandbox leaves
    module-sized cycles behind, so full passes came every few seconds under load, and each walked the whole
    start-up heap: 110 to 140 ms with everything stopped, a sixth of a serial lane's time (`bench.bulk_events`,
    about 25 ms after the freeze)."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_PASS_ALLOCATIONS, middle, old)


def sandbox_runner(data_converter: DataConverter = pydantic_data_converter) -> SandboxedWorkflowRunner:
    """Temporal's workflow sandbox, sharing `PASSTHROUGH_MODULES` with the worker process; for a data converter
    that no serialization context changes, one whose runs are not asked for a context per payload."""
    restrictions = SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH_MODULES)
    if ignores_context(data_converter):
        return _ContextFreeSandbox(restrictions=restrictions)
    return SandboxedWorkflowRunner(restrictions=restrictions)


def ignores_context(data_converter: DataConverter) -> bool:
    """Whether `data_converter` has no codec and no external storage and is itself under every kind of context
    (a workflow's, an activity's, a Nexus operation's): the platform's pydantic converter is."""
    probes: tuple[SerializationContext, ...] = (
        WorkflowSerializationContext(namespace="-", workflow_id="-"),
        ActivitySerializationContext(
            namespace="-",
            activity_id="-",
            activity_type="-",
            activity_task_queue="-",
            workflow_id="-",
            workflow_type="-",
            is_local=False,
        ),
        NexusSerializationContext(endpoint="-", service="-", operation="-"),
    )
    if data_converter.payload_codec is not None or data_converter.external_storage is not None:
        return False
    return all(data_converter.with_context(probe) is data_converter for probe in probes)


class _ContextFreeSandbox(SandboxedWorkflowRunner):
    """The sandbox, whose runs answer the SDK's question "which serialization context?" outside it.

    The SDK asks it of a run for each payload container of each activation and completion, three and four
    times over, and a sandboxed run answers by executing code inside the sandbox (its importer applied): in
    `bench.batch_cost`'s keyed case that was a seventh of the worker's time. With a converter that no
    context changes (`ignores_context`) the answer changes no byte, so it is given without entering."""

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _ContextFreeRun(super().create_instance(det))


class _ContextFreeRun(WorkflowInstance):
    def __init__(self, sandboxed: WorkflowInstance) -> None:
        self._sandboxed = sandboxed

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        return self._sandboxed.activate(act)

    def get_serialization_context(self, command_info: Any) -> SerializationContext | None:
        return None  # the context-free converter, which is the converter itself (`ignores_context`)

    def get_external_store_context(self, command_info: Any) -> StorageDriverStoreContext:
        # Read only with external storage configured, which `ignores_context` rules out: the run's own.
        info = self.get_info()
        run = StorageDriverWorkflowInfo(
            id=info.workflow_id, run_id=info.run_id, type=info.workflow_type, namespace=info.namespace
        )
        return StorageDriverStoreContext(target=run)

    def get_info(self) -> temporalio.workflow.Info:
        return self._sandboxed.get_info()

    def get_thread_id(self) -> int | None:
        return self._sandboxed.get_thread_id()


def _is_async(fn: Callable[..., Any]) -> bool:
    call = getattr(fn, "__call__", None)  # noqa: B004 - callable class instances define async __call__
    return inspect.iscoroutinefunction(fn) or (call is not None and inspect.iscoroutinefunction(call))
