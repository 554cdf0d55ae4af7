"""What the `OTEL_*` variables switch on, and the structured log line."""

from __future__ import annotations

import json
import logging

from orchestrator.telemetry import TRACER, StructuredFormatter, exporting, log_fields
from tests.telemetry.conftest import Captured


def test_nothing_is_exported_without_an_endpoint() -> None:
    assert exporting({}) == set()
    assert exporting({"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_EXPORTER": "otlp"}) == set()


def test_the_shared_endpoint_exports_every_signal_and_a_signal_endpoint_only_its_own() -> None:
    assert exporting({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}) == {"traces", "metrics", "logs"}
    assert exporting({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}) == {"traces"}


def test_an_exporter_set_to_none_or_a_disabled_sdk_exports_nothing() -> None:
    shared = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
    assert exporting({**shared, "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"}) == {"traces"}
    assert exporting({**shared, "OTEL_SDK_DISABLED": "true"}) == set()


def record(message: str, extra: dict[str, object]) -> logging.LogRecord:
    logger = logging.getLogger("tests.telemetry")
    return logger.makeRecord(logger.name, logging.INFO, __file__, 1, message, (), None, extra=extra)


def test_a_log_line_carries_session_listener_lane_batch_and_the_trace(captured: Captured) -> None:
    fields = log_fields("ses_1", "orchestrate", "default", [7, 3, 5], status="success")
    assert fields == {
        "session": "ses_1",
        "listener": "orchestrate",
        "lane": "default",
        "batch": "3-7",
        "status": "success",
    }
    with TRACER.start_as_current_span("logging") as span:
        line = json.loads(StructuredFormatter(json_lines=True).format(record("batch fired", fields)))
        text = StructuredFormatter().format(record("batch fired", fields))
    assert line["message"] == "batch fired"
    assert {k: line[k] for k in fields} == fields
    assert line["trace_id"] == f"{span.get_span_context().trace_id:032x}"
    assert text.endswith(
        f"batch fired session=ses_1 listener=orchestrate lane=default batch=3-7 status=success "
        f"trace_id={line['trace_id']} span_id={line['span_id']}"
    )
