"""OpenTelemetry for the platform: the tracer, the instruments, structured logs, and Temporal's interceptor.

Owns what one process exports and how an event's trace is carried. `install()` configures exporters from
the standard `OTEL_*` variables, once per process: OTLP over HTTP for each signal whose endpoint is set
(`OTEL_EXPORTER_OTLP_ENDPOINT` or the signal's own), and nothing at all otherwise, so a process without a
collector pays for no-op spans only and prints nothing. An event stores the W3C `traceparent` of the span
current at its write; the router, the lane's batch and the run continue that trace (see
docs/architecture.md). The pure core never imports this module: workflows cannot emit metrics either, so
every count comes from the router or an activity.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import temporalio.client
import temporalio.worker
from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from temporalio.contrib.opentelemetry import TracingInterceptor

__all__ = [
    "METRICS",
    "TRACER",
    "Installed",
    "StructuredFormatter",
    "continuing",
    "current_traceparent",
    "exporting",
    "install",
    "log_fields",
    "parent_and_links",
    "traceparent_of",
    "tracing_interceptor",
]

DEFAULT_SERVICE_NAME = "orchestrator"
# Lanes live for minutes to days and continue as new with their trace header: one that kept the trace of
# the event that started it would gather every later batch into that trace. A lane starts untraced; each
# batch takes its trace from its own events instead.
LANE_WORKFLOW = "OrchestratorLane"

TRACER = trace.get_tracer("orchestrator")
_METER = metrics.get_meter("orchestrator")
_PROPAGATOR = TraceContextTextMapPropagator()


class Metrics:
    """The platform's instruments. Attributes stay low in cardinality: listener and status, never a lane key
    (a keyed listener has a lane per key, as many as its events have values: a series each would be unbounded;
    a lane's own backlog is in `list_session_listeners` and its workflow's `state` query)."""

    def __init__(self, meter: metrics.Meter) -> None:
        self.events_routed = meter.create_counter(
            "orchestrator.events.routed", unit="{event}", description="Events delivered to a listener's lane."
        )
        self.batches_cut = meter.create_counter(
            "orchestrator.batches.cut", unit="{batch}", description="Batches that left their lane."
        )
        self.runs_started = meter.create_counter(
            "orchestrator.runs.started", unit="{run}", description="Runs started for batches with a workflow action."
        )
        self.outcomes = meter.create_counter(
            "orchestrator.outcomes", unit="{outcome}", description="Batch outcomes recorded, by status."
        )
        self.lane_pending = meter.create_up_down_counter(
            "orchestrator.lane.pending",
            unit="{event}",
            description="Events delivered to a listener's lanes and not yet in a batch that left them.",
        )
        self.run_start_delay = meter.create_histogram(
            "orchestrator.run.start_delay",
            unit="s",
            description="Seconds from the commit of a batch's first event to the start of its run.",
        )
        self.retries_waiting = meter.create_up_down_counter(
            "orchestrator.retries.waiting", unit="{run}", description="Failed runs waiting out their backoff."
        )
        self.retention_deleted = meter.create_counter(
            "orchestrator.lanes.retention.deleted",
            unit="{row}",
            description="Rows retention deleted (trimmed history, deleted sessions), by table.",
        )
        self.retention_oldest = meter.create_gauge(
            "orchestrator.lanes.retention.oldest_event_age",
            unit="s",
            description="Seconds since the commit of the oldest event kept: above the retention, something holds it.",
        )
        self.fire_failures = meter.create_counter(
            "orchestrator.fire.failures",
            unit="{attempt}",
            description="Fire attempts that failed and will be retried (the database or Temporal out of reach).",
        )

    def run_started(self, listener: str, first_commit: datetime | None, now: datetime) -> None:
        self.runs_started.add(1, {"listener": listener})
        if first_commit is not None:
            self.run_start_delay.record(max((now - first_commit).total_seconds(), 0.0), {"listener": listener})


METRICS = Metrics(_METER)


# Trace context carried by events


def current_traceparent() -> str | None:
    """The W3C traceparent of the current span, or None when nothing is traced."""
    return traceparent_of(trace.get_current_span())


def traceparent_of(span: trace.Span) -> str | None:
    """The W3C traceparent of `span`, or None for a span that is not traced."""
    span_context = span.get_span_context()
    if not span_context.is_valid:
        return None
    return f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{int(span_context.trace_flags):02x}"


def _span_context(traceparent: str) -> trace.SpanContext | None:
    extracted = _PROPAGATOR.extract({"traceparent": traceparent})
    span_context = trace.get_current_span(extracted).get_span_context()
    return span_context if span_context.is_valid else None


def parent_and_links(traceparents: Iterable[str | None]) -> tuple[otel_context.Context | None, list[trace.Link]]:
    """The context of the first traceparent (the parent of a span over them all) and links to the rest.

    With no traceparent at all the parent is None: the span starts under whatever is current, or as a root.
    """
    parent: otel_context.Context | None = None
    links: list[trace.Link] = []
    seen: set[str] = set()
    for traceparent in traceparents:
        if not traceparent or traceparent in seen:
            continue
        seen.add(traceparent)
        span_context = _span_context(traceparent)
        if span_context is None:
            continue
        if parent is None:
            parent = trace.set_span_in_context(trace.NonRecordingSpan(span_context))
        else:
            links.append(trace.Link(span_context))
    return parent, links


@contextmanager
def continuing(traceparent: str | None) -> Iterator[None]:
    """Run the block under a caller's span (a `traceparent` header), or as it is when there is none."""
    parent, _ = parent_and_links([traceparent])
    if parent is None:
        yield
        return
    token = otel_context.attach(parent)
    try:
        yield
    finally:
        otel_context.detach(token)


# Temporal


class _UntracedLaneStarts(temporalio.client.OutboundInterceptor):
    """Drops the trace header from lane starts (see LANE_WORKFLOW); the client's span stays in the trace."""

    def __init__(self, next: temporalio.client.OutboundInterceptor, header_key: str) -> None:
        super().__init__(next)
        self._header_key = header_key

    async def start_workflow(self, input: temporalio.client.StartWorkflowInput) -> Any:
        if input.workflow == LANE_WORKFLOW:
            input.headers = {k: v for k, v in input.headers.items() if k != self._header_key}
        return await super().start_workflow(input)


class _ActivitySpansUnderCaller(temporalio.worker.ActivityInboundInterceptor):
    """Traces an activity only when its caller was traced, as Temporal does for workflows.

    A lane is untraced, so its local activities would otherwise each open a one-span trace of their own;
    the fire activity opens the batch's span in the events' trace instead.
    """

    def __init__(
        self,
        traced: temporalio.worker.ActivityInboundInterceptor,
        plain: temporalio.worker.ActivityInboundInterceptor,
        header_key: str,
    ) -> None:
        super().__init__(traced)
        self._plain = plain
        self._header_key = header_key

    async def execute_activity(self, input: temporalio.worker.ExecuteActivityInput) -> Any:
        if self._header_key in input.headers:
            return await self.next.execute_activity(input)
        return await self._plain.execute_activity(input)


class PlatformTracingInterceptor(TracingInterceptor):
    """Temporal's tracing interceptor, with lanes left untraced and activity spans only under a caller."""

    def intercept_client(self, next: temporalio.client.OutboundInterceptor) -> temporalio.client.OutboundInterceptor:
        return super().intercept_client(_UntracedLaneStarts(next, self.header_key))

    def intercept_activity(
        self, next: temporalio.worker.ActivityInboundInterceptor
    ) -> temporalio.worker.ActivityInboundInterceptor:
        return _ActivitySpansUnderCaller(super().intercept_activity(next), next, self.header_key)


def tracing_interceptor() -> TracingInterceptor:
    """The interceptor for the platform's Temporal clients and workers."""
    return PlatformTracingInterceptor()


# Logs

# The `extra` fields a platform log line may carry, in the order they are printed.
LOG_FIELDS = ("session", "listener", "lane", "batch", "execution", "status")


def log_fields(
    session: str | None = None,
    listener: str | None = None,
    lane: str | None = None,
    batch: Sequence[int] | str | None = None,
    **more: Any,
) -> dict[str, Any]:
    """`extra` for a log call: the session, listener, lane and batch (first-last event ids) it concerns."""
    if batch is not None and not isinstance(batch, str):
        batch = f"{min(batch)}-{max(batch)}" if batch else None
    fields = {"session": session, "listener": listener, "lane": lane, "batch": batch, **more}
    return {k: v for k, v in fields.items() if v is not None}


class StructuredFormatter(logging.Formatter):
    """One line per record: JSON (`json=True`) or the message followed by `key=value` pairs.

    The pairs are the platform's `extra` fields (`log_fields`) and the trace and span ids of the current
    span, so a log line can be found from its trace and the other way round.
    """

    def __init__(self, *, json_lines: bool = False) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.json_lines = json_lines

    def format(self, record: logging.LogRecord) -> str:
        fields = {name: getattr(record, name) for name in LOG_FIELDS if getattr(record, name, None) is not None}
        span_context = trace.get_current_span().get_span_context()
        if span_context.is_valid:
            fields["trace_id"] = f"{span_context.trace_id:032x}"
            fields["span_id"] = f"{span_context.span_id:016x}"
        if self.json_lines:
            line: dict[str, Any] = {
                "time": self.formatTime(record),
                "level": record.levelname,
                "logger": record.name,
                "message": record.getMessage(),
                **fields,
            }
            if record.exc_info:
                line["exception"] = self.formatException(record.exc_info)
            return json.dumps(line, default=str)
        text = super().format(record)
        pairs = " ".join(f"{k}={v}" for k, v in fields.items())
        if not pairs:
            return text
        first, newline, rest = text.partition("\n")
        return f"{first} {pairs}{newline}{rest}"


# Installation


@dataclass(frozen=True)
class Installed:
    """What `install` set up in this process (None: that signal exports nowhere)."""

    tracer_provider: TracerProvider | None
    meter_provider: MeterProvider | None


_lock = threading.Lock()
_installed: Installed | None = None


SIGNALS = ("traces", "metrics", "logs")


def exporting(env: Mapping[str, str]) -> set[str]:
    """The signals `env` sends over OTLP (none with `OTEL_SDK_DISABLED=true`).

    A signal is sent when it has an endpoint (its own or the shared one) and an exporter other than `none`.
    """
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return set()
    return {
        signal
        for signal in SIGNALS
        if env.get(f"OTEL_{signal.upper()}_EXPORTER", "otlp").strip().lower() != "none"
        and (env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
    }


def _resource(env: Mapping[str, str]) -> Resource:
    # Resource.create reads OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME; only the default is ours.
    name = env.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME
    return Resource.create({SERVICE_NAME: name})


def install(
    *,
    environ: Mapping[str, str] | None = None,
    span_processors: Sequence[SpanProcessor] = (),
    metric_readers: Sequence[MetricReader] = (),
    log_format: str | None = None,
) -> Installed:
    """Configure this process's tracing, metrics and log format, once; answer what is installed.

    Exporters come from the `OTEL_*` variables of `environ` (default: the process environment); the OTLP
    exporters read their endpoint, headers and timeout there themselves. `span_processors` and
    `metric_readers` are added beside them (tests pass in-memory ones); a later call may still bring them
    for a signal the first call left unconfigured, and span processors are added to an installed tracer.
    `log_format` (default `ORCHESTRATOR_LOG_FORMAT`) is `json` for JSON lines or `text` for key=value
    pairs after the message; it is applied to the root logger's handlers.
    """
    global _installed
    env = os.environ if environ is None else environ
    with _lock:
        if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            _installed = _installed or Installed(None, None)
            return _installed
        resource = _resource(env)
        if _installed is None:
            _logs(env, resource, log_format or env.get("ORCHESTRATOR_LOG_FORMAT", "text"))
            _installed = Installed(_tracer_provider(env, resource, span_processors), None)
        elif _installed.tracer_provider is None and span_processors:
            _installed = replace(_installed, tracer_provider=_tracer_provider({}, resource, span_processors))
        elif _installed.tracer_provider is not None:
            for processor in span_processors:
                _installed.tracer_provider.add_span_processor(processor)
        if _installed.meter_provider is None:
            _installed = replace(_installed, meter_provider=_meter_provider(env, resource, metric_readers))
        elif metric_readers:
            raise RuntimeError("metrics are installed already; a meter provider takes its readers only when made")
        return _installed


def _tracer_provider(
    env: Mapping[str, str], resource: Resource, processors: Sequence[SpanProcessor]
) -> TracerProvider | None:
    exported = "traces" in exporting(env)
    if not exported and not processors:
        return None
    provider = TracerProvider(resource=resource)
    if exported:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    for processor in processors:
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    return provider


def _meter_provider(
    env: Mapping[str, str], resource: Resource, readers: Sequence[MetricReader]
) -> MeterProvider | None:
    all_readers = list(readers)
    if "metrics" in exporting(env):
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        all_readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
    if not all_readers:
        return None
    provider = MeterProvider(resource=resource, metric_readers=all_readers)
    metrics.set_meter_provider(provider)
    return provider


def _logs(env: Mapping[str, str], resource: Resource, log_format: str) -> None:
    root = logging.getLogger()
    formatter = StructuredFormatter(json_lines=log_format.strip().lower() == "json")
    for handler in root.handlers:
        handler.setFormatter(formatter)
    if "logs" not in exporting(env):
        return
    from opentelemetry._logs import set_logger_provider
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

    provider = LoggerProvider(resource=resource)
    provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
    set_logger_provider(provider)
    # The SDK's handler is deprecated for a separate instrumentation package this platform does not ship;
    # it still exports, with the `extra` fields as log record attributes.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        root.addHandler(LoggingHandler(logger_provider=provider))
