"""Retention's metrics: the rows its rounds delete, by table, and the age of the oldest event kept."""

from __future__ import annotations

import asyncio
import time

from opentelemetry.sdk.metrics.export import NumberDataPoint

from orchestrator.lanes.retention import Retention
from orchestrator.platform import Platform
from tests.telemetry.conftest import Captured
from tests.telemetry.test_metrics import points, total


async def command(platform: Platform, name: str, **args: object) -> dict[str, object]:
    reply = await platform.command({"command": name, **args})
    assert reply["status"] == "success", reply
    return reply


async def test_a_round_counts_the_rows_it_deletes_and_gauges_the_oldest_event_kept(
    platform: Platform, captured: Captured
) -> None:
    opened = await command(platform, "open_session", retention={"event_seconds": 1})
    sid = opened["session"]["id"]  # type: ignore[index]
    for n in range(3):
        await command(platform, "write_object", session_id=sid, alias=f"a/{n}", value={"type": "t"})
    # As a router that has passed them (no listener here to route to).
    await platform.store.pool.execute(
        "UPDATE orchestrator.routing_cursors c SET routed_event_id = s.last_event_id FROM orchestrator.sessions s"
        " WHERE s.id = c.session_id AND s.id = $1",
        sid,
    )
    before = total(captured, "orchestrator.lanes.retention.deleted", table="events")
    await asyncio.sleep(1.3)
    other = (await command(platform, "open_session"))["session"]["id"]  # type: ignore[index]
    written_at = time.monotonic()
    await command(platform, "write_object", session_id=other, alias="b", value={"type": "t"})
    await Retention(platform.store, None, platform.settings).round()
    took = time.monotonic() - written_at
    assert total(captured, "orchestrator.lanes.retention.deleted", table="events") - before == 3
    # The oldest event kept is the other session's, just written.
    gauged = points(captured, "orchestrator.lanes.retention.oldest_event_age")
    [age] = [p.value for _, p in gauged if isinstance(p, NumberDataPoint)]
    assert 0 <= age <= took + 0.5
