"""The engine's records in PostgreSQL: routing positions, lanes, executions and outcomes.

Owns every SQL statement of the lane engine, beside the command surface's statements in `postgres.py`
(whose `_locked_session`/`_append` keep event ids in commit order here too). Outcomes keep a per-status
count next to the rows so `list_session_listeners` answers at once for a session with thousands of batches.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

from orchestrator.core.events import Event
from orchestrator.core.outcomes import Outcome
from orchestrator.store.connection import Connection
from orchestrator.store.postgres import EVENT_COLUMNS, PostgresStore, event_from_row
from orchestrator.store.schedule_records import ScheduleRecords


class RoutingRound(NamedTuple):
    """A session's routing row, held for one round: the connection holding it, the position, the generation."""

    conn: Connection
    position: int
    generation: int


class EngineRecords(ScheduleRecords, PostgresStore):
    """The store with the engine's statements added."""

    # -- routing ---------------------------------------------------------------------------------------------

    @asynccontextmanager
    async def routing_round(
        self, session_id: str, router: str, lease_seconds: float
    ) -> AsyncIterator[RoutingRound | None]:
        """Hold the session's routing position for one round as `router`, renewing its lease on the session.

        Yields None when another worker holds the row now, or another router's lease on it has not run out.
        """
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                "WITH free AS (SELECT session_id FROM routing_cursors WHERE session_id = $1"
                " AND (router IS NULL OR router = $2 OR router_until < clock_timestamp()) FOR UPDATE SKIP LOCKED)"
                " UPDATE routing_cursors c"
                " SET router = $2, router_until = clock_timestamp() + make_interval(secs => $3)"
                " FROM free WHERE c.session_id = free.session_id RETURNING c.routed_event_id, c.generation",
                session_id,
                router,
                lease_seconds,
            )
            yield (None if row is None else RoutingRound(conn, int(row["routed_event_id"]), int(row["generation"])))

    async def release_routing_leases(self, router: str) -> None:
        """Give up a stopping router's leases, so that other routers take its sessions over at once."""
        await self.pool.execute("UPDATE routing_cursors SET router_until = NULL WHERE router = $1", router)

    @staticmethod
    async def events_after(conn: Connection, session_id: str, after: int, limit: int) -> list[Event]:
        rows = await conn.fetch(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = $1 AND id > $2 ORDER BY id LIMIT $3",
            session_id,
            after,
            limit,
        )
        return [event_from_row(r) for r in rows]

    @staticmethod
    async def traced_events_after(
        conn: Connection, session_id: str, after: int, limit: int
    ) -> tuple[list[Event], dict[int, str]]:
        """`events_after`, with the traceparent of each event that has one (by event id)."""
        rows = await conn.fetch(
            f"SELECT {EVENT_COLUMNS}, traceparent FROM events WHERE session_id = $1 AND id > $2 ORDER BY id LIMIT $3",
            session_id,
            after,
            limit,
        )
        return [event_from_row(r) for r in rows], {r["id"]: r["traceparent"] for r in rows if r["traceparent"]}

    @staticmethod
    async def save_position(conn: Connection, session_id: str, position: int) -> int:
        """Save the position after a round that signalled or moved it; answer the round's generation."""
        return int(
            await conn.fetchval(
                "UPDATE routing_cursors SET routed_event_id = $2, generation = generation + 1"
                " WHERE session_id = $1 RETURNING generation",
                session_id,
                position,
            )
        )

    async def sessions_behind(self, limit: int = 1000) -> list[str]:
        """Sessions whose stream has events the router has not routed (the slow poll's question)."""
        rows = await self.pool.fetch(
            "SELECT s.id FROM sessions s JOIN routing_cursors c ON c.session_id = s.id"
            " WHERE s.last_event_id > c.routed_event_id LIMIT $1",
            limit,
        )
        return [r["id"] for r in rows]

    async def note_lanes(self, rows: Sequence[tuple[str, str, str, str]]) -> None:
        """Remember lanes the router delivered to: (session, listener, lane, workflow id)."""
        await self.pool.executemany(
            "INSERT INTO lanes (session_id, listener, lane, workflow_id) VALUES ($1, $2, $3, $4)"
            " ON CONFLICT (session_id, listener, lane) DO NOTHING",
            rows,
        )

    async def lane_fired(self, session_id: str, listener: str, lane: str, through: int) -> None:
        """Record that a lane has fired its events up to `through`, and wake the routers for its session."""
        await self.pool.execute(
            "WITH fired AS (UPDATE lanes SET fired_through = GREATEST(fired_through, $4)"
            " WHERE session_id = $1 AND listener = $2 AND lane = $3)"
            " SELECT pg_notify('orchestrator_lanes', $1)",
            session_id,
            listener,
            lane,
            through,
        )

    @staticmethod
    async def fired_through(conn: Connection, session_id: str) -> dict[tuple[str, str], int]:
        """How far each lane of a session has fired, by (listener, lane)."""
        rows = await conn.fetch("SELECT listener, lane, fired_through FROM lanes WHERE session_id = $1", session_id)
        return {(r["listener"], r["lane"]): int(r["fired_through"]) for r in rows}

    async def lanes_of(self, session_id: str) -> list[dict[str, Any]]:
        rows = await self.pool.fetch(
            "SELECT listener, lane, workflow_id FROM lanes WHERE session_id = $1 ORDER BY listener, lane",
            session_id,
        )
        return [dict(r) for r in rows]

    # -- outcomes --------------------------------------------------------------------------------------------

    async def record_outcome(self, session_id: str, outcome: Outcome, version: int | None) -> bool:
        """Keep one outcome (once per batch key, so a retried activity records it once); True if new."""
        batch_key = f"{outcome.lane}:{outcome.first_id}:{outcome.last_id}:{outcome.retry}"
        async with self.transaction() as conn:
            inserted = await conn.fetchval(
                "INSERT INTO outcomes (session_id, listener, version, lane, status, reason, first_id, last_id,"
                " event_ids, retry, execution_id, message, batch_key)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
                " ON CONFLICT (session_id, listener, batch_key) DO NOTHING RETURNING id",
                session_id,
                outcome.listener,
                version,
                outcome.lane,
                outcome.status,
                outcome.reason,
                outcome.first_id,
                outcome.last_id,
                outcome.event_ids,
                outcome.retry,
                outcome.execution_id,
                outcome.message,
                batch_key,
            )
            if inserted is None:
                return False
            await conn.execute(
                "INSERT INTO outcome_counts (session_id, listener, status, count) VALUES ($1, $2, $3, 1)"
                " ON CONFLICT (session_id, listener, status) DO UPDATE SET count = outcome_counts.count + 1",
                session_id,
                outcome.listener,
                outcome.status,
            )
            return True

    async def fires_in_last_minute(self, session_id: str, listener: str) -> int:
        return int(
            await self.pool.fetchval(
                "SELECT count(*) FROM outcomes WHERE session_id = $1 AND listener = $2 AND status = 'success'"
                " AND created_at > clock_timestamp() - interval '60 seconds'",
                session_id,
                listener,
            )
        )

    async def recent_outcomes(self, session_id: str, listener: str, limit: int = 20) -> list[dict[str, Any]]:
        rows = await self.pool.fetch(
            "SELECT status, reason, lane, first_id, last_id, event_ids, retry, execution_id, message, created_at"
            " FROM outcomes WHERE session_id = $1 AND listener = $2 ORDER BY id DESC LIMIT $3",
            session_id,
            listener,
            limit,
        )
        return [
            {k: (v.isoformat() if k == "created_at" else v) for k, v in dict(r).items() if v is not None} for r in rows
        ]

    async def outcome_counts(self, session_id: str) -> dict[str, dict[str, int]]:
        rows = await self.pool.fetch(
            "SELECT listener, status, count FROM outcome_counts WHERE session_id = $1", session_id
        )
        counts: dict[str, dict[str, int]] = {}
        for r in rows:
            counts.setdefault(r["listener"], {})[r["status"]] = int(r["count"])
        return counts

    # -- executions ------------------------------------------------------------------------------------------

    async def running_executions(self, session_id: str) -> int:
        return int(
            await self.pool.fetchval(
                "SELECT count(*) FROM executions WHERE session_id = $1 AND status = 'running'", session_id
            )
        )

    async def execution_started(self, record: dict[str, Any]) -> Event | None:
        """Record a run's start and its `execution.started` event, once per execution id."""
        async with self.transaction() as conn:
            await self._locked_session(conn, record["session_id"], require_open=False)
            inserted = await conn.fetchval(
                "INSERT INTO executions (id, session_id, workflow, listener, lane, batch)"
                " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING RETURNING id",
                record["execution_id"],
                record["session_id"],
                record["workflow"],
                record["listener"],
                record["lane"],
                record["batch"],
            )
            if inserted is None:
                return None
            return await self._append(
                conn,
                record["session_id"],
                "execution.started",
                execution={"id": record["execution_id"], "workflow": record["workflow"], "status": "running"},
                source={"listener": record["listener"], "execution": record["execution_id"]},
                depth=record["depth"],
            )

    async def execution_ended(self, record: dict[str, Any]) -> Event | None:
        """Record a run's end and its `execution.ended` event, once per execution id."""
        async with self.transaction() as conn:
            await self._locked_session(conn, record["session_id"], require_open=False)
            updated = await conn.fetchval(
                "UPDATE executions SET status = $2, error = $3, ended_at = clock_timestamp()"
                " WHERE id = $1 AND status = 'running' RETURNING id",
                record["execution_id"],
                record["status"],
                record["error"],
            )
            if updated is None:
                return None
            return await self._append(
                conn,
                record["session_id"],
                "execution.ended",
                execution={
                    "id": record["execution_id"],
                    "workflow": record["workflow"],
                    "status": record["status"],
                },
                source={"listener": record["listener"], "execution": record["execution_id"]},
                depth=record["depth"],
            )

    async def list_executions(
        self, session_id: str, listener: str | None, status: str | None, limit: int = 1000
    ) -> list[dict[str, Any]]:
        await self.get_session(session_id)
        rows = await self.pool.fetch(
            "SELECT id, workflow, listener, lane, status, batch, error, started_at, ended_at FROM executions"
            " WHERE session_id = $1 AND ($2::text IS NULL OR listener = $2) AND ($3::text IS NULL OR status = $3)"
            " ORDER BY started_at, id LIMIT $4",
            session_id,
            listener,
            status,
            limit,
        )
        return [
            {k: (v.isoformat() if k in ("started_at", "ended_at") and v is not None else v) for k, v in dict(r).items()}
            for r in rows
        ]

    # -- keyed slots -----------------------------------------------------------------------------------------

    async def acquire_key_slot(
        self, session_id: str, listener: str, lane: str, lane_workflow_id: str, max_parallel: int
    ) -> bool:
        """Take one of the listener's `max_parallel` key slots for `lane`, or queue the lane for one."""
        async with self.transaction() as conn:
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext('keys:' || $1 || ':' || $2))", session_id, listener
            )
            holding = await conn.fetchval(
                "SELECT holding FROM key_slots WHERE session_id = $1 AND listener = $2 AND lane = $3",
                session_id,
                listener,
                lane,
            )
            if holding:
                return True
            held = await conn.fetchval(
                "SELECT count(*) FROM key_slots WHERE session_id = $1 AND listener = $2 AND holding",
                session_id,
                listener,
            )
            granted = held < max_parallel
            await conn.execute(
                "INSERT INTO key_slots (session_id, listener, lane, lane_workflow_id, holding)"
                " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (session_id, listener, lane) DO UPDATE"
                " SET holding = EXCLUDED.holding",
                session_id,
                listener,
                lane,
                lane_workflow_id,
                granted,
            )
            return bool(granted)

    async def release_key_slot(self, session_id: str, listener: str, lane: str, max_parallel: int) -> str | None:
        """Free `lane`'s slot, or its place in the queue for one; hand a free slot to the longest waiter, whose
        lane workflow id is answered (none with `max_parallel` 0: the listener is gone)."""
        async with self.transaction() as conn:
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext('keys:' || $1 || ':' || $2))", session_id, listener
            )
            await conn.execute(
                "DELETE FROM key_slots WHERE session_id = $1 AND listener = $2 AND lane = $3",
                session_id,
                listener,
                lane,
            )
            held = await conn.fetchval(
                "SELECT count(*) FROM key_slots WHERE session_id = $1 AND listener = $2 AND holding",
                session_id,
                listener,
            )
            if held >= max_parallel:
                return None
            granted: str | None = await conn.fetchval(
                "UPDATE key_slots SET holding = true, since = clock_timestamp() WHERE (session_id, listener, lane) ="
                " (SELECT session_id, listener, lane FROM key_slots WHERE session_id = $1 AND listener = $2"
                "  AND NOT holding ORDER BY since LIMIT 1) RETURNING lane_workflow_id",
                session_id,
                listener,
            )
            return granted
