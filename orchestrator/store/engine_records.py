"""The engine's records in PostgreSQL: routing positions, executions, outcomes and key slots.

Owns the lane engine's statements beside the lanes' queues (`lane_queues.py`) and the command surface's
(`postgres.py`, whose `_locked_session`/`_append` keep event ids in commit order here too). Outcomes keep a
per-status count next to the rows so `list_session_listeners` answers at once for a session with thousands
of batches.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

from orchestrator.core.errors import CommandError
from orchestrator.core.events import Event
from orchestrator.core.outcomes import Outcome
from orchestrator.store.connection import Connection
from orchestrator.store.lane_queues import LaneQueues
from orchestrator.store.postgres import EVENT_COLUMNS, WHOLE_MESSAGE, PostgresStore, event_from_row
from orchestrator.store.schedule_records import ScheduleRecords


class RoutingRound(NamedTuple):
    """A session's routing row, held for one round: the connection holding it, and the position."""

    conn: Connection
    position: int


class EngineRecords(LaneQueues, ScheduleRecords, PostgresStore):
    """The store with the engine's statements added."""

    # -- routing ---------------------------------------------------------------------------------------------

    @asynccontextmanager
    async def routing_round(self, session_id: str) -> AsyncIterator[RoutingRound | None]:
        """Hold the session's routing position for one round (None: another worker holds it now)."""
        async with self.pool.acquire() as conn, conn.transaction():
            position = await conn.fetchval(
                "SELECT routed_event_id FROM routing_cursors WHERE session_id = $1 FOR UPDATE SKIP LOCKED",
                session_id,
            )
            yield (None if position is None else RoutingRound(conn, int(position)))

    @staticmethod
    async def traced_events_after(
        conn: Connection, session_id: str, after: int, limit: int
    ) -> tuple[list[Event], dict[int, str]]:
        """The session's events after `after`, with the traceparent of each that has one (by event id)."""
        rows = await conn.fetch(
            f"SELECT {EVENT_COLUMNS}, traceparent, {WHOLE_MESSAGE} FROM events e"
            " WHERE session_id = $1 AND id > $2 ORDER BY id LIMIT $3",
            session_id,
            after,
            limit,
        )
        return [event_from_row(r) for r in rows], {r["id"]: r["traceparent"] for r in rows if r["traceparent"]}

    async def stream_events(self, session_id: str, after: int, limit: int) -> list[dict[str, Any]]:
        """The session's envelopes after `after`, as a listener sees them (a thread item's whole message)."""
        rows = await self.pool.fetch(
            f"SELECT {EVENT_COLUMNS}, {WHOLE_MESSAGE} FROM events e WHERE session_id = $1 AND id > $2"
            " ORDER BY id LIMIT $3",
            session_id,
            after,
            limit,
        )
        return [event_from_row(r).envelope() for r in rows]

    async def session_end(self, session_id: str) -> int:
        """The session's last event id (where a stream with no position starts); not_found when none."""
        last = await self.pool.fetchval("SELECT last_event_id FROM sessions WHERE id = $1", session_id)
        if last is None:
            raise CommandError("not_found", f"session_id: no session {session_id!r}")
        return int(last)

    @staticmethod
    async def save_position(conn: Connection, session_id: str, position: int) -> None:
        await conn.execute(
            "UPDATE routing_cursors SET routed_event_id = $2 WHERE session_id = $1", session_id, position
        )

    async def sessions_behind(self, limit: int = 1000) -> list[str]:
        """Sessions whose stream has events the router has not routed (the slow poll's question)."""
        rows = await self.pool.fetch(
            "SELECT s.id FROM sessions s JOIN routing_cursors c ON c.session_id = s.id"
            " WHERE s.last_event_id > c.routed_event_id LIMIT $1",
            limit,
        )
        return [r["id"] for r in rows]

    # -- outcomes --------------------------------------------------------------------------------------------

    async def record_outcome(self, session_id: str, outcome: Outcome, version: int | None) -> bool:
        """Keep one outcome (once per batch key, so a retried activity records it once); True if new."""
        batch_key = outcome.batch_key
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
                "INSERT INTO executions (id, session_id, workflow, listener, lane, batch, run_key, depth)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING RETURNING id",
                record["execution_id"],
                record["session_id"],
                record["workflow"],
                record["listener"],
                record["lane"],
                record["batch"],
                record.get("run_key"),
                record["depth"],
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

    @staticmethod
    async def acquire_key_slot(
        conn: Connection, session_id: str, listener: str, lane: str, workflow_id: str, max_parallel: int
    ) -> bool:
        """Take one of the listener's `max_parallel` key slots for `lane`, or queue the lane for one (in
        `conn`'s transaction, under the listener's key lock until it commits)."""
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('keys:' || $1 || ':' || $2))", session_id, listener)
        holding = await conn.fetchval(
            "SELECT holding FROM key_slots WHERE session_id = $1 AND listener = $2 AND lane = $3",
            session_id,
            listener,
            lane,
        )
        if holding:
            return True
        held = await conn.fetchval(
            "SELECT count(*) FROM key_slots WHERE session_id = $1 AND listener = $2 AND holding", session_id, listener
        )
        granted = held < max_parallel
        # A lane asks again after a nudge: its place in the queue (`since`) is kept from its first ask.
        await conn.execute(
            "INSERT INTO key_slots (session_id, listener, lane, lane_workflow_id, holding)"
            " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (session_id, listener, lane) DO UPDATE"
            " SET holding = EXCLUDED.holding",
            session_id,
            listener,
            lane,
            workflow_id,
            granted,
        )
        return bool(granted)

    @staticmethod
    async def release_key_slot(
        conn: Connection, session_id: str, listener: str, lane: str, max_parallel: int
    ) -> tuple[str, str] | None:
        """Free `lane`'s key slot, or its place in the queue; hand a free slot to the lane that has waited
        longest, whose (lane key, workflow id) is answered (none with `max_parallel` 0: the listener is gone)."""
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('keys:' || $1 || ':' || $2))", session_id, listener)
        await conn.execute(
            "DELETE FROM key_slots WHERE session_id = $1 AND listener = $2 AND lane = $3", session_id, listener, lane
        )
        held = await conn.fetchval(
            "SELECT count(*) FROM key_slots WHERE session_id = $1 AND listener = $2 AND holding", session_id, listener
        )
        if held >= max_parallel:
            return None
        row = await conn.fetchrow(
            "UPDATE key_slots SET holding = true WHERE (session_id, listener, lane) ="
            " (SELECT session_id, listener, lane FROM key_slots WHERE session_id = $1 AND listener = $2"
            "  AND NOT holding ORDER BY since, lane LIMIT 1) RETURNING lane, lane_workflow_id",
            session_id,
            listener,
        )
        return None if row is None else (str(row["lane"]), str(row["lane_workflow_id"]))

    # -- the run sweep ---------------------------------------------------------------------------------------

    async def unchecked_runs(self, older_than_seconds: float, limit: int = 50) -> list[dict[str, Any]]:
        """Executions still running by the records and not looked at for a while: looked at now, by one sweep.

        A run terminated from outside (or timed out) never reports its end; the sweep asks Temporal.
        """
        rows = await self.pool.fetch(
            "WITH due AS (SELECT id FROM executions WHERE status = 'running'"
            " AND checked_at < clock_timestamp() - make_interval(secs => $1)"
            " ORDER BY checked_at LIMIT $2 FOR UPDATE SKIP LOCKED)"
            " UPDATE executions x SET checked_at = clock_timestamp() FROM due WHERE x.id = due.id"
            " RETURNING x.id, x.session_id, x.workflow, x.listener, x.lane, x.run_key, x.depth",
            older_than_seconds,
            limit,
        )
        return [dict(r) for r in rows]
