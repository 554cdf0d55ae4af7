"""Retention's statements: what a session keeps, trimming it, deleting it, and where its stream now starts.

Owns the calls of 0003_retention.sql's functions, each one short statement that deletes at most a bounded
number of rows; when to call them, and what Temporal holds of a session, is `orchestrator.lanes.retention`'s.
"""

from __future__ import annotations

from typing import Any

from orchestrator.core.errors import CommandError
from orchestrator.core.retention import SessionRetention
from orchestrator.store.postgres import PostgresStore


class RetentionRecords(PostgresStore):
    """Mixed into `EngineRecords`."""

    async def set_session_retention(self, session_id: str, retention: SessionRetention) -> dict[str, float | None]:
        """Keep what `retention` gives as the session's own; answer the session's own retention now."""
        row = await self.pool.fetchrow(
            "UPDATE orchestrator.session_retention SET event_seconds = coalesce($2, event_seconds),"
            " closed_session_seconds = coalesce($3, closed_session_seconds), due_at = clock_timestamp()"
            " WHERE session_id = $1 RETURNING event_seconds, closed_session_seconds",
            session_id,
            retention.event_seconds,
            retention.closed_session_seconds,
        )
        if row is None:
            raise CommandError("not_found", f"session_id: no session {session_id!r}")
        return dict(row)

    async def stream_start(self, session_id: str) -> tuple[int, int]:
        """How far the session's stream was trimmed (0: never), and where it starts now: the oldest event it keeps
        (below the trim when a lane still waits on it), or the id after the trim when it keeps none."""
        found = await self.pool.fetchval("SELECT orchestrator.orchestrator_stream_start($1)", session_id)
        if found is None:
            return 0, 1
        trimmed, first = int(found["trimmed_through"]), found.get("first_id")
        return trimmed, trimmed + 1 if first is None else int(first)

    async def events_kept(self, session_id: str, event_ids: list[int]) -> int:
        """How many of `event_ids` the session still keeps."""
        return int(
            await self.pool.fetchval(
                "SELECT count(*) FROM orchestrator.events WHERE id = ANY ($2::bigint[]) AND session_id = $1",
                session_id,
                event_ids,
            )
        )

    async def oldest_event_age(self) -> float | None:
        """Seconds since the commit of the oldest event the database keeps (None: it keeps none)."""
        age = await self.pool.fetchval(
            "SELECT extract(epoch FROM clock_timestamp() - created_at) FROM orchestrator.events ORDER BY id LIMIT 1"
        )
        return None if age is None else float(age)

    # -- the workers' rounds ---------------------------------------------------------------------------------

    async def retention_due(self, limit: int, lease_seconds: float, closed_seconds: float) -> list[tuple[str, str]]:
        """Sessions due for a look, taken for `lease_seconds`: each with 'purge' or 'trim'."""
        rows = await self.pool.fetch(
            "SELECT o_session, o_action FROM orchestrator.orchestrator_retention_due($1, $2, $3)",
            limit,
            lease_seconds,
            closed_seconds,
        )
        return [(r["o_session"], r["o_action"]) for r in rows]

    async def release_retention(self, session_id: str) -> None:
        """Give a session taken for a round back, due at once (the round ran out of time before it was done)."""
        await self.pool.execute(
            "UPDATE orchestrator.session_retention SET due_at = clock_timestamp() WHERE session_id = $1", session_id
        )

    async def trim_session(
        self, session_id: str, rows: int, event_seconds: float, closed_seconds: float
    ) -> dict[str, Any] | None:
        """One trim statement: `{"deleted": {table: rows}, "more": bool}`, None for a session gone."""
        found: dict[str, Any] | None = await self.pool.fetchval(
            "SELECT orchestrator.orchestrator_trim_session($1, $2, $3, $4)",
            session_id,
            rows,
            event_seconds,
            closed_seconds,
        )
        return found

    async def mark_deleting(self, session_id: str, closed_seconds: float | None = None) -> bool:
        """Mark the session deleted from here on (with `closed_seconds`: only if closed for longer than its
        retention); False when there is no such session to mark."""
        return bool(
            await self.pool.fetchval(
                "SELECT orchestrator.orchestrator_mark_deleting($1, $2)", session_id, closed_seconds
            )
        )

    async def session_workflows(self, session_id: str) -> dict[str, list[str]]:
        """What Temporal holds of the session: `lanes`, `runs` still running, `schedules`."""
        found: dict[str, list[str]] = await self.pool.fetchval(
            "SELECT orchestrator.orchestrator_session_workflows($1)", session_id
        )
        return found

    async def purge_step(self, session_id: str, rows: int) -> dict[str, Any]:
        """One statement of a deleting session's removal: `{"table", "deleted", "done"}`."""
        found: dict[str, Any] = await self.pool.fetchval(
            "SELECT orchestrator.orchestrator_purge_session($1, $2)", session_id, rows
        )
        return found
