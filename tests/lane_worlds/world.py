"""A world around a lane store: what the tests set up, move on and read back, whichever store it is on."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from orchestrator.core.lane_keys import lane_workflow_id
from orchestrator.core.lane_snapshot import LaneAddress
from orchestrator.core.routing import route, versions_by_name
from orchestrator.lanes.executions import ExecutionRecords
from orchestrator.store.lane_store import LaneStore, RoutedPage
from tests.lane_worlds.held import Held


class LaneWorld(Protocol):
    lanes: LaneStore
    records: ExecutionRecords

    def now(self) -> float:
        """The world's clock: where its store's time stands."""
        ...

    async def advance(self, seconds: float) -> None:
        """Move the world's clock on."""
        ...

    async def open_session(self) -> str: ...
    async def close_session(self, session_id: str) -> None: ...
    async def mark_deleting(self, session_id: str) -> None: ...
    async def write(self, session_id: str, alias: str) -> int: ...
    async def save_listener(self, body: dict[str, Any], delay_seconds: float = 0.0) -> int:
        """Save a listener's version, in effect `delay_seconds` from now (the activation delay)."""
        ...

    async def delete_listener(self, name: str) -> None: ...
    async def switch(self, session_id: str, name: str, enabled: bool) -> None: ...
    async def pause(self, name: str) -> None: ...
    async def resume(self, name: str) -> None: ...
    async def ask_replay(self, lane_id: int, event_ids: Sequence[int], replay_of: int | None) -> None: ...
    async def versions(self) -> list[dict[str, Any]]:
        """Every version routing matches against (`PostgresStore.listener_versions`' rows)."""
        ...

    async def position(self, session_id: str) -> int:
        """The session's routing position: the last event a round read."""
        ...

    async def held(self) -> Held: ...
    async def queue_rows(self, where: LaneAddress) -> list[int]: ...
    async def backdate_nudges(self, seconds: float) -> None: ...
    async def backdate_oldest_fire(self, seconds: float) -> None: ...
    async def postdate_newest_fire(self, seconds: float) -> None: ...
    async def close(self) -> None: ...


async def route_round(
    world: LaneWorld, session_id: str, parallel_cap: int, limit: int = 1000
) -> tuple[RoutedPage, dict[tuple[str, str], list[int]]]:
    """One routing round, as the router runs it, and what it should have queued into each lane (listener, lane)
    by the core's `route` over the events it read; the lanes and their counts are checked against the round's
    own."""
    before = await world.position(session_id)
    routed = await world.lanes.route_page(session_id, limit, parallel_cap)
    if not routed.read:
        return routed, {}
    through = await world.position(session_id)
    envelopes = [
        e for e in await world.lanes.envelopes(range(before + 1, through + 1)) if e["session_id"] == session_id
    ]
    versions = versions_by_name(await world.versions())
    deliveries = route([(e, datetime.fromisoformat(e["created_at"])) for e in envelopes], versions)
    queued = {(d.listener, d.lane): [int(e["id"]) for e in d.events] for d in deliveries}
    assert len(envelopes) == routed.read, f"the round read {routed.read} events, {len(envelopes)} lie past it"
    assert sorted((k[0], k[1], len(v)) for k, v in queued.items()) == sorted(routed.lanes), (queued, routed.lanes)
    return routed, queued


def lane_address(session_id: str, listener: str, lane: str) -> LaneAddress:
    return LaneAddress(session_id, listener, lane, lane_workflow_id(session_id, listener, lane))
