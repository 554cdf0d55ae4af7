"""The platform's metrics after a known workload: what was routed, cut, started, and how it ended."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from opentelemetry.sdk.metrics.export import DataPointT, HistogramDataPoint, NumberDataPoint

from tests.engine.harness import Engine, eventually, lane_outcomes, new_session, write_many
from tests.telemetry.conftest import Captured

ENVELOPE_FIELDS = {
    "id",
    "session_id",
    "type",
    "alias",
    "item",
    "execution",
    "source",
    "depth",
    "created_at",
    "data",
    "cause",
    "graph",
    "actor",
}


def listener(name: str, prefix: str, workflow: str, **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "filter": {"types": ["object.written"], "aliases": [f"{prefix}/**"]},
        "batch": {"window_seconds": 0.1, "max_events": 1},
        "action": {"type": "workflow", "workflow": workflow, **more},
    }


def points(captured: Captured, metric: str) -> Iterator[tuple[dict[str, Any], DataPointT]]:
    data = captured.metrics.get_metrics_data()
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for found in scope.metrics:
                if found.name == metric:
                    for point in found.data.data_points:
                        yield dict(point.attributes or {}), point


def total(captured: Captured, metric: str, **attributes: str) -> float:
    """The sum of a counter's points whose attributes include `attributes` (a histogram: its count)."""
    found = 0.0
    for labels, point in points(captured, metric):
        if attributes.items() <= labels.items():
            if isinstance(point, HistogramDataPoint):
                found += point.count
            elif isinstance(point, NumberDataPoint):
                found += point.value
    return found


async def test_counters_match_a_known_workload(traced_engine: Engine, captured: Captured) -> None:
    engine = traced_engine
    suffix = uuid.uuid4().hex[:8]
    ok, bad, retried = f"ok-{suffix}", f"bad-{suffix}", f"retried-{suffix}"
    # Its template names the batch's events, so its runs get them whole.
    await engine.command("save_listener", listener=listener(ok, "ok", "recorder", input={"e": "{{ batch.events }}"}))
    await engine.command("save_listener", listener=listener(bad, "bad", "nowhere"))
    await engine.command(
        "save_listener",
        listener={
            **listener(retried, "retried", "recorder", input={"fail": True}),
            "retry": {"attempts": 1, "delay_seconds": 600},
        },
    )
    sid = await new_session(engine)
    await write_many(engine, sid, ["ok/1", "ok/2", "ok/3", "bad/1", "bad/2", "retried/1"])

    async def settled() -> bool:
        ended = [r for r in engine.log.runs if r.ended is not None and r.input["listener"] == ok]
        refused = [o for o in await lane_outcomes(engine, sid, bad) if o["status"] == "invocation_error"]
        waiting = total(captured, "orchestrator.retries.waiting", listener=retried)
        return len(ended) == 3 and len(refused) == 2 and waiting == 1

    await eventually(settled, what="three runs, two refusals and one retry waiting")
    events = [e for r in engine.log.runs if r.input["listener"] == ok for e in r.input["batch"]["events"]]
    assert events and not [e for e in events if set(e) - ENVELOPE_FIELDS], "a run's batch holds envelopes only"

    routed = {name: total(captured, "orchestrator.events.routed", listener=name) for name in (ok, bad, retried)}
    assert routed == {ok: 3, bad: 2, retried: 1}
    cut = {name: total(captured, "orchestrator.batches.cut", listener=name) for name in (ok, bad, retried)}
    assert cut == {ok: 3, bad: 2, retried: 1}
    started = {name: total(captured, "orchestrator.runs.started", listener=name) for name in (ok, bad, retried)}
    assert started == {ok: 3, bad: 0, retried: 1}
    outcomes = {
        (labels["listener"], labels["status"]): point.value
        for labels, point in points(captured, "orchestrator.outcomes")
        if labels["listener"] in (ok, bad, retried) and isinstance(point, NumberDataPoint)
    }
    assert outcomes == {(ok, "success"): 3, (bad, "invocation_error"): 2, (retried, "success"): 1}
    pending = {name: total(captured, "orchestrator.lane.pending", listener=name) for name in (ok, bad, retried)}
    assert pending == {ok: 0, bad: 0, retried: 0}, "every delivered event left its lane in a batch"
    data = captured.metrics.get_metrics_data()
    keyed_by_lane = {
        found.name
        for resource in (data.resource_metrics if data is not None else ())
        for scope in resource.scope_metrics
        for found in scope.metrics
        for point in found.data.data_points
        if "lane" in (point.attributes or {})
    }
    assert not keyed_by_lane, "a lane key is unbounded: no series per lane"
    assert total(captured, "orchestrator.retries.waiting", listener=retried) == 1
    delays = [point for labels, point in points(captured, "orchestrator.run.start_delay") if labels["listener"] == ok]
    assert len(delays) == 1 and isinstance(delays[0], HistogramDataPoint)
    assert delays[0].count == 3 and 0 <= delays[0].sum < 30


async def failed_waiting(engine: Engine, captured: Captured, name: str, delay: float) -> tuple[str, str]:
    """A session whose run of `name` failed and waits `delay` s for its repeat: the session and the failed run."""
    body = {
        **listener(name, name, "recorder", input={"fail": True}),
        "retry": {"attempts": 1, "delay_seconds": delay},
    }
    await engine.command("save_listener", listener=body)
    sid = await new_session(engine)
    await write_many(engine, sid, [f"{name}/1"])

    async def waiting() -> bool:
        return total(captured, "orchestrator.retries.waiting", listener=name) == 1

    await eventually(waiting, what="the failed run's repeat waiting")
    [failed] = (await engine.command("list_executions", session_id=sid, listener=name))["executions"]
    assert failed["status"] == "failed"
    return sid, failed["id"]


async def test_a_repeat_called_off_waits_no_more(traced_engine: Engine, captured: Captured) -> None:
    name = f"called-off-{uuid.uuid4().hex[:8]}"
    sid, failed = await failed_waiting(traced_engine, captured, name, 600)
    reply = await traced_engine.command("stop_execution", session_id=sid, execution_id=failed)
    assert reply["execution"]["repeat"] == "stopped"
    assert total(captured, "orchestrator.retries.waiting", listener=name) == 0


async def test_a_repeat_a_guard_stops_waits_no_more(traced_engine: Engine, captured: Captured) -> None:
    name = f"guarded-{uuid.uuid4().hex[:8]}"
    sid, _ = await failed_waiting(traced_engine, captured, name, 2)
    # Closed, the session takes no repeat: the guard stops it when it comes due (outcome `skipped`).
    await traced_engine.command("close_session", session_id=sid)

    async def skipped() -> bool:
        return any(o["status"] == "skipped" for o in await lane_outcomes(traced_engine, sid, name))

    await eventually(skipped, what="the repeat stopped by its guard")
    assert total(captured, "orchestrator.retries.waiting", listener=name) == 0
