"""The engine's records in PostgreSQL beside the lanes: streams, executions and outcomes as people read them.

Owns the engine's statements that are not the lane store's verbs (`lane_store.py`, `lanes_pg.py`): a stream's
reads, the sessions the router is behind on, the executions and outcomes `list_executions` and
`list_session_listeners` show (outcomes keep a per-status count beside the rows, so a session with thousands
of batches answers at once). Flow control's statements, the lanes' views, the keys' and retention's are mixed
in from `flow_control.py`, `lane_views.py`, `keys.py` and `retention_records.py`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from orchestrator.causes import current_cause
from orchestrator.core.errors import CommandError
from orchestrator.core.events import actor_of
from orchestrator.core.limits import executions_refusal
from orchestrator.core.waits import StartMade
from orchestrator.store.app_events import AppEvents
from orchestrator.store.captures import Captures
from orchestrator.store.flow_control import FlowControl
from orchestrator.store.graphs import Graphs
from orchestrator.store.keys import KeyRecords
from orchestrator.store.lane_views import LaneViews
from orchestrator.store.lanes_pg import PgLaneStore
from orchestrator.store.postgres import EVENT_COLUMNS, WHOLE_MESSAGE, PostgresStore, event_from_row
from orchestrator.store.retention_records import RetentionRecords
from orchestrator.store.schedule_records import ScheduleRecords
from orchestrator.store.waits import Waits


class EngineRecords(
    AppEvents,
    Captures,
    FlowControl,
    LaneViews,
    ScheduleRecords,
    RetentionRecords,
    Graphs,
    KeyRecords,
    Waits,
    PostgresStore,
):
    """The store with the engine's statements added, and the lane store on the same pool."""

    @functools.cached_property
    def lanes(self) -> PgLaneStore:
        return PgLaneStore(self.pool)

    async def stream_events(self, session_id: str, after: int, limit: int) -> list[dict[str, Any]] | None:
        """The session's envelopes after `after`, as a listener sees them (a thread item's whole message); None
        once the session is deleted (or being deleted), read in the same statement, so a stream learns it free.
        Captured changes' staged events come when the router appends them (its position's wake-up, or the stream's
        poll): a settle here would double the statements of every stream's every page."""
        rows = await self.pool.fetch(
            "SELECT e.* FROM orchestrator.sessions s LEFT JOIN LATERAL ("
            f"SELECT {EVENT_COLUMNS}, {WHOLE_MESSAGE} FROM orchestrator.events e WHERE e.session_id = s.id"
            " AND e.id > $2 ORDER BY e.id LIMIT $3) e ON true WHERE s.id = $1 AND s.status <> 'deleting'",
            session_id,
            after,
            limit,
        )
        if not rows:
            return None
        return [event_from_row(r).envelope() for r in rows if r["id"] is not None]

    async def session_end(self, session_id: str) -> int:
        """The session's last event id (where a stream with no position starts); not_found when none."""
        last = await self.pool.fetchval(
            "SELECT last_event_id FROM orchestrator.sessions WHERE id = $1 AND status <> 'deleting'", session_id
        )
        if last is None:
            raise CommandError("not_found", f"session_id: no session {session_id!r}")
        return int(last)

    async def register_workflows(self, names: Sequence[str]) -> None:
        """Say that a worker runs these workflows, now (`orchestrator.lanes.registry`)."""
        await self.pool.execute(
            "INSERT INTO orchestrator.worker_workflows (name, seen_at) SELECT unnest($1::text[]), now()"
            " ON CONFLICT (name) DO UPDATE SET seen_at = EXCLUDED.seen_at",
            list(names),
        )

    async def registered_workflows(self, within_seconds: float) -> list[str]:
        """The workflows some worker said it runs within the last `within_seconds`, by name."""
        rows = await self.pool.fetch(
            "SELECT name FROM orchestrator.worker_workflows WHERE seen_at > now() - make_interval(secs => $1) ORDER"
            " BY name",
            within_seconds,
        )
        return [str(r["name"]) for r in rows]

    async def listener_body(self, name: str, version: int) -> Any | None:
        """A listener version's body as saved (None: no such version), deleted listeners' too."""
        return await self.pool.fetchval(
            "SELECT body FROM orchestrator.listener_versions WHERE name = $1 AND version = $2", name, version
        )

    async def sessions_behind(self, every: float = 0.0, limit: int = 1000) -> list[str]:
        """Sessions whose stream has events the router has not routed (the slow poll's question), in turn after
        those the last poll found; none when the deployment was polled within `every` seconds (by any router)."""
        rows = await self.pool.fetch("SELECT orchestrator.orchestrator_sessions_behind($1, $2) AS id", every, limit)
        return [r["id"] for r in rows]

    async def sessions_behind_in(self, channels: list[str]) -> list[str]:
        """Sessions behind whose wake-ups go to `channels` (a router's shards just taken, or held since it
        connected): what their notifications, heard by nobody, would have named. Every one, not a page."""
        if not channels:
            return []
        rows = await self.pool.fetch(
            "SELECT s.id FROM orchestrator.sessions s JOIN orchestrator.routing_cursors c ON c.session_id = s.id"
            " WHERE s.last_event_id > c.routed_event_id"
            " AND orchestrator.orchestrator_wake_channel(s.id) = ANY($1::text[])",
            channels,
        )
        return [r["id"] for r in rows]

    async def wake_rearm(self, session_id: str) -> bool:
        """After a round: whether the router caught up with the session (its next write notifies again), or must
        come back on its own (`orchestrator_wake_rearm.sql`)."""
        return bool(await self.pool.fetchval("SELECT orchestrator.orchestrator_wake_rearm($1)", session_id))

    # -- outcomes --------------------------------------------------------------------------------------------

    async def recent_outcomes(self, session_id: str, listener: str, limit: int = 20) -> list[dict[str, Any]]:
        rows = await self.pool.fetch(
            "SELECT status, reason, listener, lane, first_id, last_id, event_ids, retry,"
            # The nth time a batch was asked for again, which its key ends with (`Outcome.batch_key`); 0 for its own.
            " coalesce(substring(batch_key from ':r([0-9]+)$')::integer, 0) AS replay,"
            " execution_id, message, created_at"
            " FROM orchestrator.outcomes WHERE session_id = $1 AND listener = $2 ORDER BY id DESC LIMIT $3",
            session_id,
            listener,
            limit,
        )
        # `at` as the lane's outcomes say it (`Outcome.at`), `created_at` as the records do: the same moment.
        found = [
            {k: (v.isoformat() if k == "created_at" else v) for k, v in dict(r).items() if v is not None} for r in rows
        ]
        return [{**o, "at": o["created_at"]} for o in found]

    async def outcome_counts(self, session_id: str) -> dict[str, dict[str, int]]:
        rows = await self.pool.fetch(
            "SELECT listener, status, count FROM orchestrator.outcome_counts WHERE session_id = $1", session_id
        )
        counts: dict[str, dict[str, int]] = {}
        for r in rows:
            counts.setdefault(r["listener"], {})[r["status"]] = int(r["count"])
        return counts

    # -- executions ------------------------------------------------------------------------------------------

    async def running_executions(self, session_id: str) -> int:
        return int(await self.pool.fetchval("SELECT orchestrator.orchestrator_running_executions($1)", session_id))

    async def execution_started(self, record: dict[str, Any], limit: int | None = None) -> bool:
        """Record a run's start and its `execution.started` event, once per execution id (True: new). With `limit`
        (`executions_per_session`), a new run is refused (`limit_exceeded`) when the session runs that many: counted
        under the session's executions lock, as a lane's record counts them (`orchestrator_execution_record`)."""
        answer = await self.pool.fetchval(
            "SELECT orchestrator.orchestrator_execution_record($1::jsonb)",
            {**record, "cause": current_cause(), "limit": limit},
        )
        if "running" in answer:
            raise CommandError("limit_exceeded", executions_refusal(int(answer["running"])))
        if not answer["new"]:
            return False
        await self.pool.execute("SELECT orchestrator.orchestrator_execution_started($1)", record["execution_id"])
        return True

    async def find_execution(self, session_id: str, execution_id: str) -> dict[str, Any] | None:
        """A run of the session (`id`, `workflow`, `listener`, `lane`, `status`), or None."""
        await self.get_session(session_id)
        row = await self.pool.fetchrow(
            "SELECT id, workflow, listener, lane, status FROM orchestrator.executions WHERE session_id = $1 AND id ="
            " $2",
            session_id,
            execution_id,
        )
        return None if row is None else dict(row)

    async def execution_start_made(self, execution_id: str) -> StartMade:
        return await self.lanes.execution_start_made(execution_id)

    async def run_has_started(self, execution_id: str) -> None:
        """Record the run's `execution.started` now, unless its driver already has: a run that writes has
        started, and its start must come before its writes in the stream."""
        await self.pool.execute("SELECT orchestrator.orchestrator_execution_started($1)", execution_id)

    async def list_executions(
        self,
        session_id: str,
        listener: str | None,
        status: str | None,
        limit: int = 1000,
        newest_first: bool = False,
    ) -> list[dict[str, Any]]:
        await self.get_session(session_id)
        order = "started_at DESC, id DESC" if newest_first else "started_at, id"
        rows = await self.pool.fetch(
            "SELECT id, workflow, listener, lane, status, batch, error, started_at, ended_at, cause,"
            # A run `cancel_on` cancelled: the event that did (its cancel watch's answer).
            " CASE WHEN status = 'cancelled' THEN (SELECT w.event_ids[1] FROM orchestrator.run_waits w"
            "   WHERE w.execution_id = x.id AND w.kind = 'cancel' AND w.state = 'answered'"
            "   ORDER BY w.ended_at LIMIT 1) END AS cancelled_by"
            " FROM orchestrator.executions x"
            " WHERE session_id = $1 AND ($2::text IS NULL OR listener = $2) AND ($3::text IS NULL OR status = $3)"
            f" ORDER BY {order} LIMIT $4",
            session_id,
            listener,
            status,
            limit,
        )
        return [
            {
                **{
                    k: (v.isoformat() if k in ("started_at", "ended_at") and v is not None else v)
                    for k, v in dict(r).items()
                    if k not in ("cause", "cancelled_by")
                },
                # Who started it, as its `execution.started` event says (the key, the listener, the schedule).
                "actor": actor_of({"listener": r["listener"], "execution": r["id"]}, r["cause"]),
                # Why it ended, when an event ended it (as its `execution.ended` event's `cause.event` says).
                **({"cause": {"event": r["cancelled_by"]}} if r["cancelled_by"] is not None else {}),
            }
            for r in rows
        ]
