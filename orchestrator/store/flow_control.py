"""Flow control's statements: listeners paused and resumed, batches asked for again.

Owns what `pause_listener`, `resume_listener`, `replay_batch` and `redeliver` write: a pause row (the lane
step waits while one stands), and queued replays a lane takes when a slot is free. The lanes these give work
are answered by address, for the command to nudge.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from orchestrator.core.lane_snapshot import LaneAddress


class FlowControl:
    """Mixed into the engine's store, which provides `pool`."""

    pool: asyncpg.Pool

    async def pause_listener(self, name: str, session_id: str | None) -> None:
        await self.pool.execute(
            "INSERT INTO orchestrator.listener_pauses (name, session_id) VALUES ($1, $2)"
            " ON CONFLICT (name, coalesce(session_id, '')) DO NOTHING",
            name,
            session_id,
        )

    async def paused_in_every_session(self, name: str) -> bool:
        found: bool = await self.pool.fetchval(
            "SELECT EXISTS (SELECT 1 FROM orchestrator.listener_pauses WHERE name = $1 AND session_id IS NULL)", name
        )
        return found

    async def resume_listener(self, name: str, session_id: str | None) -> list[LaneAddress]:
        """Lift the pause, in one session or (None) every pause of the listener, its sessions' too; answer the
        lanes it held with something to do (events waiting, a repeat or a replay)."""
        await self.pool.execute(
            "DELETE FROM orchestrator.listener_pauses WHERE name = $1 AND ($2::text IS NULL OR session_id = $2)",
            name,
            session_id,
        )
        # The lanes' rows locked in the order a routing round locks them, so the two never wait on each other.
        rows = await self.pool.fetch(
            "WITH held AS (SELECT l.id FROM orchestrator.lanes l"
            " WHERE l.listener = $1 AND ($2::text IS NULL OR l.session_id = $2)"
            " AND (l.routed_through > l.fired_through OR EXISTS (SELECT 1 FROM orchestrator.lane_runs r WHERE"
            " r.lane_id = l.id"
            "  AND r.due_at IS NOT NULL) OR EXISTS (SELECT 1 FROM orchestrator.replays p WHERE p.lane_id = l.id))"
            " ORDER BY l.session_id, l.listener, l.lane FOR UPDATE OF l)"
            " UPDATE orchestrator.lanes l SET nudged_at = clock_timestamp() FROM held WHERE l.id = held.id"
            " RETURNING l.session_id, l.lane, l.workflow_id",
            name,
            session_id,
        )
        return [LaneAddress(r["session_id"], name, r["lane"], r["workflow_id"]) for r in rows]

    async def paused_listeners(self, session_id: str) -> set[str]:
        rows = await self.pool.fetch(
            "SELECT name FROM orchestrator.listener_pauses WHERE session_id IS NULL OR session_id = $1", session_id
        )
        return {r["name"] for r in rows}

    async def find_batch(self, session_id: str, listener: str, first_id: int) -> dict[str, Any] | None:
        row = await self.pool.fetchrow(
            "SELECT b.event_ids, b.entry_ids, l.lane, l.workflow_id FROM orchestrator.batches b JOIN"
            " orchestrator.lanes l ON l.id = b.lane_id"
            " WHERE b.session_id = $1 AND b.listener = $2 AND b.first_id = $3 AND b.retry = 0 AND b.replay = 0",
            session_id,
            listener,
            first_id,
        )
        return None if row is None else dict(row)

    async def ask_replay(
        self,
        session_id: str,
        listener: str,
        lane: str,
        workflow_id: str,
        chunks: Sequence[Sequence[int]],
        of: int | None,
    ) -> LaneAddress:
        """Queue batches to be taken again by the lane (its row made when it has none yet); answer the lane."""
        async with self.pool.acquire() as conn, conn.transaction():
            lane_id = await conn.fetchval(
                "WITH made AS (INSERT INTO orchestrator.lanes (session_id, listener, lane, workflow_id) VALUES ($1,"
                " $2, $3, $4)"
                " ON CONFLICT (session_id, listener, lane) DO NOTHING RETURNING id)"
                " SELECT id FROM made UNION ALL"
                " SELECT id FROM orchestrator.lanes WHERE session_id = $1 AND listener = $2 AND lane = $3",
                session_id,
                listener,
                lane,
                workflow_id,
            )
            await conn.executemany(
                "INSERT INTO orchestrator.replays (lane_id, event_ids, replay_of) VALUES ($1, $2, $3)",
                [(lane_id, list(chunk), of) for chunk in chunks],
            )
        return LaneAddress(session_id, listener, lane, workflow_id)
