"""Telemetry under test: this process's tracer and meter export to memory, and the engine's client traces.

The OpenTelemetry providers are global and can be set once per process, so the in-memory exporter and
reader are installed once for the test session; each test tells its own spans and points apart by its
session id and its listener names.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.testing import WorkflowEnvironment

from orchestrator import telemetry
from orchestrator.engine.worker import with_tracing
from orchestrator.platform import Platform
from tests.engine.harness import Engine, running_engine
from tests.telemetry.workflows import TracedWriter


@dataclass
class Captured:
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader


@pytest.fixture(scope="session")
def captured_session() -> Captured:
    spans, metrics = InMemorySpanExporter(), InMemoryMetricReader()
    installed = telemetry.install(
        environ={}, span_processors=[SimpleSpanProcessor(spans)], metric_readers=[metrics], log_format="text"
    )
    assert installed.tracer_provider is not None and installed.meter_provider is not None
    return Captured(spans, metrics)


@pytest.fixture
def captured(captured_session: Captured) -> Iterator[Captured]:
    captured_session.spans.clear()
    yield captured_session


@pytest.fixture
async def traced_engine(
    platform: Platform, temporal_env: WorkflowEnvironment, captured: Captured
) -> AsyncIterator[Engine]:
    """The lane engine on a client with the platform's tracing interceptor, as `connect_temporal` makes."""
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping}
    )
    async with running_engine(platform, with_tracing(temporal_env.client), workflows=[TracedWriter]) as engine:
        yield engine
