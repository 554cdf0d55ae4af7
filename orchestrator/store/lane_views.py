"""What status and `explain_event` read of the lanes: each lane's queue, slots and batches, and an event's fate.

Owns the engine's read-only statements for people (`list_session_listeners`, `orchestrator status`, the
dashboard, `explain_event`). Why a lane waits is not decided here: the lane step's `next_move` reads the rows
answered here (`commands/runs.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import asyncpg

from orchestrator.core.errors import CommandError
from orchestrator.core.events import Event
from orchestrator.store.postgres import EVENT_COLUMNS, WHOLE_MESSAGE, event_from_row


class LaneViews:
    """Mixed into the engine's store, which provides `pool`."""

    pool: asyncpg.Pool

    async def lanes_of(self, session_id: str) -> list[dict[str, Any]]:
        """Every lane of the session: what waits in it (how many, the oldest's and newest's commits), the runs
        holding its slots (since their batch's claim), its key slot or place in the queue for one, its batches,
        and the database's clock."""
        rows = await self.pool.fetch(
            "SELECT l.id, l.listener, l.lane, l.workflow_id, l.fired_through, l.routed_through, l.seq, l.newest_id,"
            " extract(epoch FROM l.newest_at) AS newest_at, extract(epoch FROM clock_timestamp()) AS now,"
            " extract(epoch FROM l.throttled_until) AS throttled_until,"
            " (SELECT count(*) FROM orchestrator.lane_events q WHERE q.lane_id = l.id AND q.event_id >"
            " l.fired_through) AS pending,"
            " (SELECT extract(epoch FROM e.created_at)"
            "   FROM orchestrator.orchestrator_lane_head(l.id, l.session_id, l.fired_through) e) AS oldest_at,"
            " (SELECT coalesce(jsonb_agg(orchestrator.orchestrator_run_json(r) ORDER BY r.run_key), '[]')"
            "   FROM orchestrator.lane_runs r WHERE r.lane_id = l.id) AS runs,"
            " EXISTS (SELECT 1 FROM orchestrator.batches b WHERE b.lane_id = l.id AND b.state = 'claimed') AS claimed,"
            " EXISTS (SELECT 1 FROM orchestrator.replays p WHERE p.lane_id = l.id) AS replay,"
            " (SELECT count(*) FROM orchestrator.batches b WHERE b.lane_id = l.id AND b.retry = 0) AS batches,"
            " (SELECT json_build_object('first_id', b.first_id, 'last_id', b.last_id) FROM orchestrator.batches b"
            "   WHERE b.lane_id = l.id ORDER BY b.id DESC LIMIT 1) AS last_batch,"
            " (SELECT CASE WHEN k.holding THEN 'held' ELSE 'queued' END FROM orchestrator.key_slots k WHERE k.lane_id"
            " = l.id)"
            "   AS key_slot,"
            " (SELECT count(*) FROM orchestrator.key_slots k WHERE k.session_id = l.session_id AND k.listener ="
            " l.listener"
            "   AND k.holding) AS keys_held,"
            " (SELECT 1 + (SELECT count(*) FROM orchestrator.key_slots w WHERE w.session_id = k.session_id"
            "   AND w.listener = k.listener AND NOT w.holding AND (w.since, w.lane_id) < (k.since, k.lane_id))"
            "   FROM orchestrator.key_slots k WHERE k.lane_id = l.id AND NOT k.holding) AS key_slot_place"
            " FROM orchestrator.lanes l WHERE l.session_id = $1 ORDER BY l.listener, l.lane",
            session_id,
        )
        return [dict(r) for r in rows]

    async def event_by_id(self, session_id: str, event_id: int) -> Event:
        row = await self.pool.fetchrow(
            f"SELECT {EVENT_COLUMNS}, {WHOLE_MESSAGE} FROM orchestrator.events e WHERE session_id = $1 AND id = $2",
            session_id,
            event_id,
        )
        if row is None:
            raise CommandError("not_found", f"event_id: no event {event_id} in session {session_id!r}")
        return event_from_row(row)

    async def lane_newest(self, session_id: str, listener: str, lane: str) -> tuple[int, float] | None:
        """A lane's newest event routed to it that is not its own (`lanes.newest_id`), with its age in seconds by
        the database's clock; None: none yet."""
        row = await self.pool.fetchrow(
            "SELECT newest_id, extract(epoch FROM clock_timestamp() - newest_at)::float8 AS age"
            " FROM orchestrator.lanes WHERE session_id = $1 AND listener = $2 AND lane = $3",
            session_id,
            listener,
            lane,
        )
        if row is None or not row["newest_id"] or row["age"] is None:
            return None
        return int(row["newest_id"]), float(row["age"])

    async def routed_position(self, session_id: str) -> int:
        position = await self.pool.fetchval(
            "SELECT routed_event_id FROM orchestrator.routing_cursors WHERE session_id = $1", session_id
        )
        return int(position or 0)

    async def event_fate(self, session_id: str, listener: str, lane: str, event_id: int) -> dict[str, Any]:
        """What became of an event in one listener's lane: queued when, in which batches (with their verdicts,
        runs, outcomes and receipts), or still waiting."""
        # Queued when: its queue row while it waits, else what the lane's own batch that took it kept.
        row = await self.pool.fetchrow(
            "SELECT l.id, l.workflow_id, l.fired_through, coalesce(q.queued_at, (SELECT b.queued_at["
            "   array_position(b.event_ids, $4::bigint)] FROM orchestrator.batches b WHERE b.lane_id = l.id AND"
            " b.retry = 0"
            "   AND b.replay = 0 AND b.first_id <= $4 AND b.last_id >= $4 AND $4 = ANY (b.event_ids) LIMIT 1))"
            " AS queued_at FROM orchestrator.lanes l"
            " LEFT JOIN orchestrator.lane_events q ON q.lane_id = l.id AND q.event_id = $4"
            " WHERE l.session_id = $1 AND l.listener = $2 AND l.lane = $3",
            session_id,
            listener,
            lane,
            event_id,
        )
        if row is None or row["queued_at"] is None:
            return {"queued": False}
        fate: dict[str, Any] = {
            "queued": True,
            "queued_at": row["queued_at"].isoformat(),
            "lane_workflow": row["workflow_id"],
        }
        # An outcome's and a receipt's keys are the batch's (`Outcome.batch_key`): lane, first and last id,
        # retry, and for a replay its number.
        batches = await self.pool.fetch(
            "WITH b AS (SELECT b.*, $3 || ':' || b.first_id || ':' || b.last_id || ':' || b.retry"
            "   || CASE WHEN b.replay > 0 THEN ':r' || b.replay ELSE '' END AS batch_key"
            "  FROM orchestrator.batches b WHERE b.lane_id = $5 AND $4 = ANY(b.event_ids))"
            " SELECT b.first_id, b.last_id, b.retry, b.replay, b.state, b.verdict, b.created_at,"
            " $4 = ANY(b.entry_ids) AS entry,"
            " (SELECT json_build_object('status', o.status, 'reason', o.reason, 'execution_id', o.execution_id,"
            "   'message', o.message) FROM orchestrator.outcomes o WHERE o.session_id = $1 AND o.listener = $2"
            "   AND o.batch_key = b.batch_key ORDER BY o.id DESC LIMIT 1) AS outcome,"
            " (SELECT e.id FROM orchestrator.events e WHERE e.session_id = $1"
            "   AND e.idempotency_key = 'receipt:' || $2 || ':' || b.batch_key) AS receipt,"
            " (SELECT x.id FROM orchestrator.executions x WHERE b.run_key IS NOT NULL AND x.run_key = b.run_key"
            "   AND x.batch ->> 'retry' = b.retry::text ORDER BY x.id DESC LIMIT 1) AS execution_id"
            " FROM b ORDER BY b.id",
            session_id,
            listener,
            lane,
            event_id,
            row["id"],
        )
        fate["batches"] = [
            {
                "first_id": b["first_id"],
                "last_id": b["last_id"],
                "retry": b["retry"],
                "replay": b["replay"],
                "state": b["state"],
                "taken_at": b["created_at"].isoformat(),
                "entry": b["entry"],
                "consumed_without_run": (b["verdict"] or {}).get("consumed", False),
                "outcome": b["outcome"],
                "receipt_event_id": b["receipt"],
                **({"execution_id": b["execution_id"]} if b["execution_id"] else {}),
            }
            for b in batches
        ]
        if not batches:
            fate["waiting"] = True
            return fate
        # The newest batch that took it, said plainly (SPEC 8: lane, batch, run, outcome, receipt); `batches`
        # keeps every attempt and replay.
        last = fate["batches"][-1]
        fate["batch"] = {k: last[k] for k in ("first_id", "last_id", "retry", "replay", "state")}
        for key, found in (("run", last.get("execution_id")), ("outcome", last["outcome"]),
                           ("receipt", last["receipt_event_id"])):  # fmt: skip
            if found is not None:
                fate[key] = found
        return fate

    async def fires_lately(self, session_id: str) -> dict[str, tuple[int, datetime]]:
        """Per listener: its fires in the session in the last minute and the oldest of them (the throttle)."""
        rows = await self.pool.fetch(
            "SELECT n.name AS listener, f.fires, f.oldest FROM orchestrator.listeners n"
            " CROSS JOIN LATERAL orchestrator.orchestrator_fires_lately($1, n.name, clock_timestamp()) f",
            session_id,
        )
        return {r["listener"]: (int(r["fires"]), r["oldest"]) for r in rows}

    # -- causes ------------------------------------------------------------------------------------------

    async def batches_of_event(self, session_id: str, event_id: int) -> list[dict[str, Any]]:
        """The batches that took an event, with their lane and the runs they started (all attempts)."""
        rows = await self.pool.fetch(
            "SELECT l.listener, l.lane, b.first_id, b.last_id, b.retry, b.replay, b.verdict, b.run_key,"
            " (SELECT coalesce(json_agg(x.id ORDER BY x.id), '[]') FROM orchestrator.executions x"
            "   WHERE b.run_key IS NOT NULL AND x.run_key = b.run_key"
            "   AND x.batch ->> 'retry' = b.retry::text) AS executions"
            " FROM orchestrator.batches b JOIN orchestrator.lanes l ON l.id = b.lane_id"
            " WHERE b.session_id = $1 AND b.last_id >= $2 AND b.first_id <= $2 AND $2 = ANY (b.event_ids)"
            " ORDER BY b.id",
            session_id,
            event_id,
        )
        return [dict(r) for r in rows]

    async def events_caused_by(
        self,
        session_id: str,
        *,
        execution_id: str | None = None,
        batch: Mapping[str, Any] | None = None,
        limit: int = 50,
    ) -> list[Event]:
        """The events a run wrote (by its execution id: with what its timers' firings wrote, and the runs they
        started), or a listener's batch (`batch`: its listener, lane, first and last id, retry and replay, as
        `batches_of_event` answers them; its retries and replays take the same events and are batches of their
        own)."""
        if execution_id is not None:
            # The run's and its timers' runs' writes by their index (`events_caused_by_run`); its timers' firings
            # among the session's events after the run's start (what a run set fires after it started).
            rows = await self.pool.fetch(
                f"SELECT {EVENT_COLUMNS}, {WHOLE_MESSAGE} FROM orchestrator.events e WHERE session_id = $1"
                " AND cause ? 'execution' AND cause ->> 'execution' = ANY (array_append(ARRAY(SELECT x.id FROM"
                "   orchestrator.executions x WHERE x.session_id = $1 AND x.cause -> 'schedule' ->> 'set_by' = $2),"
                "   $2))"
                f" UNION SELECT {EVENT_COLUMNS}, {WHOLE_MESSAGE} FROM orchestrator.events e WHERE session_id = $1"
                " AND id > coalesce((SELECT x.started_event_id FROM orchestrator.executions x WHERE x.id = $2), 0)"
                " AND cause -> 'schedule' ->> 'set_by' = $2 ORDER BY id LIMIT $3",
                session_id,
                execution_id,
                limit,
            )
        else:
            assert batch is not None
            rows = await self.pool.fetch(
                f"SELECT {EVENT_COLUMNS}, {WHOLE_MESSAGE} FROM orchestrator.events e WHERE session_id = $1"
                " AND cause ? 'batch' AND NOT cause ? 'execution' AND cause -> 'batch' ->> 'listener' = $2"
                " AND (cause -> 'batch' ->> 'first_id')::bigint = $3 AND cause -> 'batch' ->> 'lane' = $4"
                " AND (cause -> 'batch' ->> 'last_id')::bigint = $5"
                " AND coalesce((cause -> 'batch' ->> 'retry')::integer, 0) = $6"
                " AND coalesce((cause -> 'batch' ->> 'replay')::integer, 0) = $7 ORDER BY id LIMIT $8",
                session_id,
                batch["listener"],
                int(batch["first_id"]),
                batch["lane"],
                int(batch["last_id"]),
                int(batch["retry"]),
                int(batch.get("replay") or 0),
                limit,
            )
        return [event_from_row(r) for r in rows]

    async def run_ended_by(self, session_id: str, execution_id: str, event_id: int) -> Event | None:
        """The run's `execution.ended` when `event_id` ended it (a `cancel_on` it answered: `cause.event`)."""
        row = await self.pool.fetchrow(
            f"SELECT {EVENT_COLUMNS}, {WHOLE_MESSAGE} FROM orchestrator.events e WHERE session_id = $1"
            " AND cause ? 'execution' AND cause ->> 'execution' = $2 AND type = 'execution.ended'"
            " AND cause ->> 'event' = $3",
            session_id,
            execution_id,
            str(event_id),
        )
        return None if row is None else event_from_row(row)

    async def execution_record(self, execution_id: str) -> dict[str, Any] | None:
        row = await self.pool.fetchrow(
            "SELECT id, workflow, listener, lane, status, batch, cause, run_key FROM orchestrator.executions WHERE id"
            " = $1",
            execution_id,
        )
        return None if row is None else dict(row)
