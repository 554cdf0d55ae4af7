"""One trace follows an event: its write, its routing and the lane's batch (both under the write), the run the
batch started and the run's write."""

from __future__ import annotations

from collections.abc import Sequence

import httpx
from opentelemetry.sdk.trace import ReadableSpan

from orchestrator.config import Settings
from orchestrator.door.api import create_app
from orchestrator.platform import Platform
from tests.engine.harness import Engine, eventually, new_session
from tests.telemetry.conftest import Captured


def traced_listener(name: str, window_seconds: float) -> dict[str, object]:
    return {
        "name": name,
        "filter": {"types": ["object.written"], "aliases": ["missions/**"]},
        "batch": {"window_seconds": window_seconds},
        "action": {"type": "workflow", "workflow": "traced_writer"},
    }


def one(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, f"{len(found)} spans named {name!r}: {[s.name for s in spans]}"
    return found[0]


def lineage(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> list[str]:
    """The names of `span` and its ancestors, innermost first."""
    by_id = {s.context.span_id: s for s in spans}
    names = [span.name]
    while span.parent is not None and span.parent.span_id in by_id:
        span = by_id[span.parent.span_id]
        names.append(span.name)
    return names


def in_session(spans: Sequence[ReadableSpan], name: str, session_id: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name and (s.attributes or {}).get("orchestrator.session") == session_id]


async def test_one_event_is_one_trace_from_its_write_to_what_its_run_wrote(
    traced_engine: Engine, captured: Captured
) -> None:
    engine = traced_engine
    await engine.command("save_listener", listener=traced_listener("traced", 0.1))
    sid = await new_session(engine)
    written = await engine.command("write_object", session_id=sid, alias="missions/1", value={"type": "m"})

    async def run_wrote() -> bool:
        # The batch's span ends with its finish, which a loaded machine may make after the run's first write.
        finished = captured.spans.get_finished_spans()
        writes = in_session(finished, "session.write_object", sid)
        traces = {w.context.trace_id for w in writes}
        return bool(writes) and any(s.name == "batch" and s.context.trace_id in traces for s in finished)

    await eventually(run_wrote, what="the run's write through the SDK, and its batch's span ended")

    finished = captured.spans.get_finished_spans()
    write = one(in_session(finished, "write_object", sid), "write_object")
    assert write.parent is None, "a command with no span around it starts the trace"
    assert (write.attributes or {})["orchestrator.event_id"] == written["event_id"]
    trace_id = write.context.trace_id
    spans = [s for s in finished if s.context.trace_id == trace_id]

    sdk_write = one(spans, "session.write_object")
    assert lineage(sdk_write, spans) == [
        "session.write_object",
        "RunActivity:orchestrator.session",
        "StartActivity:orchestrator.session",
        "StartWorkflow:traced_writer",
        "batch",
        "write_object",
    ]
    assert lineage(one(spans, "RunWorkflow:traced_writer"), spans)[1:3] == ["StartWorkflow:traced_writer", "batch"]

    routes = {(s.attributes or {})["orchestrator.event_id"]: s for s in spans if s.name == "route"}
    route = routes[written["event_id"]]
    assert route.parent is not None and route.parent.span_id == write.context.span_id
    batch = one(spans, "batch")
    assert (batch.attributes or {})["orchestrator.listener"] == "traced"
    assert (batch.attributes or {})["orchestrator.batch"] == f"{written['event_id']}-{written['event_id']}"
    assert list(batch.links) == []

    # The lane is untraced (it outlives any one event), and so are the local activities it calls.
    lane_spans = {"RunWorkflow:OrchestratorLane", "HandleSignal:nudge", "StartActivity:orchestrator.fire"}
    assert not [s.name for s in finished if s.name in lane_spans | {"RunActivity:orchestrator.fire"}]

    # The run's write keeps the SDK span's traceparent, so whatever it wakes continues this trace.
    stored = await engine.platform.store.pool.fetchval(
        "SELECT traceparent FROM orchestrator.events WHERE session_id = $1 AND alias = 'out/result'", sid
    )
    flags = int(sdk_write.context.trace_flags)
    assert stored == f"00-{trace_id:032x}-{sdk_write.context.span_id:016x}-{flags:02x}"
    result_event = await engine.platform.store.pool.fetchval(
        "SELECT id FROM orchestrator.events WHERE session_id = $1 AND alias = 'out/result'", sid
    )

    async def result_routed() -> bool:
        return any(
            (s.attributes or {}).get("orchestrator.event_id") == result_event
            for s in in_session(captured.spans.get_finished_spans(), "route", sid)
        )

    await eventually(result_routed, what="the routing of the run's write")
    result_route = next(
        s
        for s in in_session(captured.spans.get_finished_spans(), "route", sid)
        if (s.attributes or {})["orchestrator.event_id"] == result_event
    )
    assert result_route.parent is not None and result_route.parent.span_id == sdk_write.context.span_id


async def test_a_batch_of_several_events_continues_the_first_and_links_the_others(
    traced_engine: Engine, captured: Captured
) -> None:
    engine = traced_engine
    await engine.command("save_listener", listener=traced_listener("linked", 1.0))
    sid = await new_session(engine)
    first = await engine.command("write_object", session_id=sid, alias="missions/1", value={"type": "m"})
    second = await engine.command("write_object", session_id=sid, alias="missions/2", value={"type": "m"})

    async def fired() -> bool:
        return bool(in_session(captured.spans.get_finished_spans(), "batch", sid))

    await eventually(fired, what="the batch")

    finished = captured.spans.get_finished_spans()
    batch = one(in_session(finished, "batch", sid), "batch")
    writes = {(s.attributes or {})["orchestrator.event_id"]: s for s in in_session(finished, "write_object", sid)}
    assert set(writes) == {first["event_id"], second["event_id"]}
    assert (batch.attributes or {})["orchestrator.events"] == 2
    assert batch.parent is not None and batch.parent.span_id == writes[first["event_id"]].context.span_id
    assert batch.context.trace_id == writes[first["event_id"]].context.trace_id
    second_write = writes[second["event_id"]]
    assert second_write.context.trace_id != batch.context.trace_id, "each command write starts its own trace"
    assert [link.context.span_id for link in batch.links] == [second_write.context.span_id]


async def test_an_http_caller_s_traceparent_is_the_parent_of_its_write(
    platform: Platform, settings: Settings, captured: Captured
) -> None:
    caller_trace, caller_span = 0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331
    sid = (await platform.command({"command": "open_session"}))["session"]["id"]
    transport = httpx.ASGITransport(app=create_app(platform, settings))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
        response = await http.post(
            "/v1/commands",
            json={"command": "write_object", "session_id": sid, "alias": "missions/1", "value": {"type": "m"}},
            headers={"traceparent": f"00-{caller_trace:032x}-{caller_span:016x}-01"},
        )
    assert response.status_code == 200, response.text
    write = one(in_session(captured.spans.get_finished_spans(), "write_object", sid), "write_object")
    assert write.context.trace_id == caller_trace
    assert write.parent is not None and write.parent.span_id == caller_span
