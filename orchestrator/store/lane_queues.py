"""The lanes' queues in PostgreSQL: what the router queues, what a fire takes, the slots runs hold.

Owns every statement on `lanes`, `lane_events`, `batches` and `lane_runs` (see 0008_lane_queues.sql). The
rule that makes lost wake-ups impossible is the lane's row lock: the router's round and every fire take it
before they read or move a lane's watermarks, so a lane that goes from empty to pending is seen either by
the router (which nudges it) or by the fire (which reports that more waits). Ages are measured by the
database's own clock, so the lanes never compare it with Temporal's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from orchestrator.core.errors import CommandError
from orchestrator.core.events import Event
from orchestrator.core.lane_clock import Declared, LaneNews
from orchestrator.store.connection import Connection
from orchestrator.store.postgres import EVENT_COLUMNS, WHOLE_MESSAGE, event_from_row

# How long an unfired lane may go unnudged past its window before the router's poll nudges it again.
STALE_GRACE_SECONDS = 10.0
STALE_WAITING_SECONDS = 60.0


@dataclass(frozen=True)
class QueuedLane:
    """What one routing round queues for one lane: its events (ascending) and the listener's window."""

    listener: str
    lane: str
    workflow_id: str
    event_ids: list[int]
    declared: Declared
    # The newest of them that is not the lane's own `lane.idle`, and its commit (None: only its own).
    last_event_id: int | None
    last_event_at: datetime | None
    first_event_at: datetime
    # How many runs the lane may hold at once (None: a write action, which holds none past its fire).
    run_slots: int | None = None


@dataclass(frozen=True)
class Nudge:
    """A lane to nudge: where it is, and what waits in it (ages in seconds, by the database's clock)."""

    session_id: str
    listener: str
    lane: str
    workflow_id: str
    pending_age: float | None
    last_event_id: int | None = None
    last_event_age: float | None = None
    retry_due_in: float | None = None
    slot_freed: bool = False
    declared: Declared | None = None

    def news(self) -> LaneNews:
        return LaneNews(
            declared=self.declared,
            pending_age=self.pending_age,
            last_event_id=self.last_event_id,
            last_event_age=self.last_event_age,
            retry_due_in=self.retry_due_in,
            slot_freed=self.slot_freed,
        )


@dataclass(frozen=True)
class LaneRow:
    id: int
    session_id: str
    listener: str
    lane: str
    workflow_id: str
    routed_through: int
    fired_through: int
    waiting_slot: bool
    last_event_id: int
    last_event_at: datetime | None
    now: datetime


@dataclass(frozen=True)
class BatchRow:
    id: int
    lane_id: int
    first_id: int
    last_id: int
    event_ids: list[int]
    entry_ids: list[int]
    retry: int
    verdict: dict[str, Any] | None
    counted: bool
    replay: int = 0
    replay_of: int | None = None

    @property
    def run_suffix(self) -> str:
        """What tells a replayed batch's run from the lane's own batch over the same events."""
        return f":r{self.replay}" if self.replay else ""


@dataclass(frozen=True)
class Replay:
    id: int
    event_ids: list[int]
    replay_of: int | None


@dataclass(frozen=True)
class RunRow:
    run_key: str
    lane_id: int
    batch_id: int
    execution_id: str
    retry: int
    state: str
    plan: dict[str, Any]


async def _busy_lanes(conn: Connection, lane_ids: Sequence[int]) -> dict[int, int]:
    """How many runs hold a slot in each of these lanes (a failed run waiting for its repeat included)."""
    if not lane_ids:
        return {}
    rows = await conn.fetch(
        "SELECT lane_id, count(*) AS held FROM lane_runs WHERE lane_id = ANY($1::bigint[]) GROUP BY lane_id",
        list(lane_ids),
    )
    return {r["lane_id"]: int(r["held"]) for r in rows}


def _age(now: datetime, at: datetime | None) -> float | None:
    return None if at is None else max((now - at).total_seconds(), 0.0)


def _batch(row: asyncpg.Record) -> BatchRow:
    return BatchRow(
        id=row["id"],
        lane_id=row["lane_id"],
        first_id=row["first_id"],
        last_id=row["last_id"],
        event_ids=list(row["event_ids"]),
        entry_ids=list(row["entry_ids"]),
        retry=row["retry"],
        verdict=row["verdict"],
        counted=row["counted"],
        replay=row["replay"],
        replay_of=row["replay_of"],
    )


def _run(row: asyncpg.Record) -> RunRow:
    return RunRow(
        run_key=row["run_key"],
        lane_id=row["lane_id"],
        batch_id=row["batch_id"],
        execution_id=row["execution_id"],
        retry=row["retry"],
        state=row["state"],
        plan=row["plan"],
    )


_LANE_COLUMNS = (
    "id, session_id, listener, lane, workflow_id, routed_through, fired_through, waiting_slot, last_event_id,"
    " last_event_at, clock_timestamp() AS now"
)
# When the oldest event waiting in lane `l` (past its `fired_through`) was committed; NULL when none waits.
_OLDEST_WAITING = (
    "(SELECT e.created_at FROM lane_events q JOIN events e ON e.id = q.event_id"
    " WHERE q.lane_id = l.id AND q.event_id > l.fired_through ORDER BY q.event_id LIMIT 1)"
)
_BATCH_COLUMNS = "id, lane_id, first_id, last_id, event_ids, entry_ids, retry, verdict, counted, replay, replay_of"
_RUN_COLUMNS = "run_key, lane_id, batch_id, execution_id, retry, state, plan"


class LaneQueues:
    """The lane queue statements; mixed into the engine's store, which provides `pool`."""

    pool: asyncpg.Pool

    # -- routing ---------------------------------------------------------------------------------------------

    @staticmethod
    async def queue(conn: Connection, session_id: str, lanes: Sequence[QueuedLane]) -> list[Nudge]:
        """Queue a round's events into their lanes; answer the lanes that were empty (they need a nudge).

        Runs in the routing round's transaction, so the queue rows and the router's position commit together.
        """
        if not lanes:
            return []
        names, keys, ids = [q.listener for q in lanes], [q.lane for q in lanes], [q.workflow_id for q in lanes]
        await conn.execute(
            "INSERT INTO lanes (session_id, listener, lane, workflow_id)"
            " SELECT $1, l, k, w FROM unnest($2::text[], $3::text[], $4::text[]) AS t(l, k, w)"
            " ON CONFLICT (session_id, listener, lane) DO NOTHING",
            session_id,
            names,
            keys,
            ids,
        )
        rows = await conn.fetch(
            f"SELECT {_LANE_COLUMNS} FROM lanes WHERE session_id = $1"
            " AND (listener, lane) IN (SELECT * FROM unnest($2::text[], $3::text[])) ORDER BY id FOR UPDATE",
            session_id,
            names,
            keys,
        )
        found = {(r["listener"], r["lane"]): r for r in rows}
        lane_ids, event_ids = [], []
        for q in lanes:
            row = found[(q.listener, q.lane)]
            lane_ids += [row["id"]] * len(q.event_ids)
            event_ids += q.event_ids
        await conn.execute(
            "INSERT INTO lane_events (lane_id, event_id) SELECT * FROM unnest($1::bigint[], $2::bigint[])"
            " ON CONFLICT DO NOTHING",
            lane_ids,
            event_ids,
        )
        busy = await _busy_lanes(conn, [found[(q.listener, q.lane)]["id"] for q in lanes if q.run_slots is not None])
        nudges: list[Nudge] = []
        updates: list[tuple[Any, ...]] = []
        for q in lanes:
            row = found[(q.listener, q.lane)]
            empty = row["routed_through"] <= row["fired_through"]
            newer = q.last_event_id is not None and q.last_event_id > row["last_event_id"]
            # An empty lane whose runs hold all its slots cannot fire before one of them ends, and the record of
            # that end hands the slot on to a lane left waiting for it: so it is left waiting, not nudged (a
            # nudge would only wake it to find no slot). A lane with an idle timer is nudged all the same: its
            # clock learns of new events from nudges.
            holds = empty and q.run_slots is not None and busy.get(row["id"], 0) >= q.run_slots
            waits = holds and q.declared.idle_after_seconds is None
            updates.append(
                (
                    row["id"],
                    max(q.event_ids),
                    q.declared.window_seconds,
                    q.last_event_id if newer else row["last_event_id"],
                    q.last_event_at if newer else row["last_event_at"],
                    empty,
                    waits,
                )
            )
            if empty and not waits:
                nudges.append(
                    Nudge(
                        session_id=session_id,
                        listener=q.listener,
                        lane=q.lane,
                        workflow_id=row["workflow_id"],
                        pending_age=_age(row["now"], q.first_event_at),
                        last_event_id=q.last_event_id if newer else None,
                        last_event_age=_age(row["now"], q.last_event_at) if newer else None,
                        declared=q.declared,
                        # An empty lane waits for no slot (a lane left waiting has events behind it): whatever
                        # the lane believed, it fires when this window closes.
                        slot_freed=True,
                    )
                )
        await conn.executemany(
            "UPDATE lanes SET routed_through = GREATEST(routed_through, $2), window_seconds = $3,"
            " last_event_id = $4, last_event_at = $5,"
            " nudged_at = CASE WHEN $6 THEN clock_timestamp() ELSE nudged_at END,"
            " waiting_slot = waiting_slot OR $7 WHERE id = $1",
            updates,
        )
        return nudges

    async def stale_lanes(self, limit: int = 100) -> list[Nudge]:
        """Lanes with events waiting that nobody has nudged for their window and a grace (a nudge lost with a
        router, a lane terminated from outside or lost with its history): nudged now, by one router each. A lane
        waiting for a slot is left alone while a run of its own holds one (its end hands the slot on), and
        nudged after a longer grace otherwise (a key slot held by other lanes: it asks again)."""
        rows = await self.pool.fetch(
            "WITH stale AS (SELECT id FROM lanes l WHERE routed_through > fired_through"
            " AND nudged_at < clock_timestamp() - make_interval(secs => window_seconds + $1)"
            " AND (NOT waiting_slot OR (nudged_at < clock_timestamp() - make_interval(secs => window_seconds + $3)"
            "  AND NOT EXISTS (SELECT 1 FROM lane_runs r WHERE r.lane_id = l.id)))"
            " ORDER BY nudged_at LIMIT $2 FOR UPDATE SKIP LOCKED)"
            " UPDATE lanes l SET nudged_at = clock_timestamp() FROM stale WHERE l.id = stale.id"
            " RETURNING l.session_id, l.listener, l.lane, l.workflow_id,"
            f" extract(epoch FROM clock_timestamp() - {_OLDEST_WAITING}) AS age",
            STALE_GRACE_SECONDS,
            limit,
            STALE_WAITING_SECONDS,
        )
        return [
            Nudge(
                session_id=row["session_id"],
                listener=row["listener"],
                lane=row["lane"],
                workflow_id=row["workflow_id"],
                pending_age=float(row["age"]) if row["age"] is not None else 0.0,
                slot_freed=True,
            )
            for row in rows
        ]

    # -- a fire's statements, in its transaction ---------------------------------------------------------------

    async def fire_context(
        self, session_id: str, listener: str
    ) -> tuple[dict[str, Any], bool, dict[str, Any] | None, bool]:
        """What a fire reads before it takes its lane's lock, in one round trip: the session, whether the
        listener is switched off in it, the listener's version in effect now (None: deleted), and whether it is
        paused."""
        row = await self.pool.fetchrow(
            "SELECT s.id, s.alias, s.status,"
            " EXISTS (SELECT 1 FROM listener_switches w WHERE w.session_id = s.id AND w.name = $2 AND NOT w.enabled)"
            "   AS switched_off,"
            " EXISTS (SELECT 1 FROM listener_pauses p WHERE p.name = $2"
            "   AND (p.session_id IS NULL OR p.session_id = s.id)) AS paused,"
            # The newest version in effect (one saved during the activation delay acts once it takes effect),
            # or the newest saved when none is yet (its events cannot have been routed before it was).
            " (SELECT jsonb_build_object('version', v.version, 'body', v.body) FROM listeners l"
            "   JOIN listener_versions v ON v.name = l.name WHERE l.name = $2 AND l.deleted_at IS NULL"
            "   ORDER BY v.effective_at <= clock_timestamp() DESC, v.version DESC LIMIT 1) AS listener"
            " FROM sessions s WHERE s.id = $1",
            session_id,
            listener,
        )
        if row is None:
            return {"id": session_id, "alias": None, "status": "closed"}, False, None, False
        session = {"id": row["id"], "alias": row["alias"], "status": row["status"]}
        return session, bool(row["switched_off"]), row["listener"], bool(row["paused"])

    # -- pauses ----------------------------------------------------------------------------------------------

    async def pause_listener(self, name: str, session_id: str | None) -> None:
        await self.pool.execute(
            "INSERT INTO listener_pauses (name, session_id) VALUES ($1, $2)"
            " ON CONFLICT (name, coalesce(session_id, '')) DO NOTHING",
            name,
            session_id,
        )

    async def resume_listener(self, name: str, session_id: str | None) -> list[Nudge]:
        """Lift the pause; answer the lanes with events waiting that it held (to be nudged)."""
        await self.pool.execute(
            "DELETE FROM listener_pauses WHERE name = $1 AND coalesce(session_id, '') = coalesce($2, '')",
            name,
            session_id,
        )
        rows = await self.pool.fetch(
            "UPDATE lanes l SET waiting_slot = false, nudged_at = clock_timestamp()"
            " WHERE l.listener = $1 AND ($2::text IS NULL OR l.session_id = $2) AND l.routed_through > l.fired_through"
            " AND NOT EXISTS (SELECT 1 FROM lane_runs r WHERE r.lane_id = l.id)"
            " RETURNING l.session_id, l.lane, l.workflow_id",
            name,
            session_id,
        )
        return [
            Nudge(r["session_id"], name, r["lane"], r["workflow_id"], pending_age=0.0, slot_freed=True) for r in rows
        ]

    async def paused_listeners(self, session_id: str) -> set[str]:
        rows = await self.pool.fetch(
            "SELECT name FROM listener_pauses WHERE session_id IS NULL OR session_id = $1", session_id
        )
        return {r["name"] for r in rows}

    @staticmethod
    async def lock_lane(conn: Connection, session_id: str, listener: str, lane: str) -> LaneRow | None:
        row = await conn.fetchrow(
            f"SELECT {_LANE_COLUMNS} FROM lanes WHERE session_id = $1 AND listener = $2 AND lane = $3 FOR UPDATE",
            session_id,
            listener,
            lane,
        )
        return None if row is None else LaneRow(**dict(row))

    @staticmethod
    async def lock_lane_by_id(conn: Connection, lane_id: int) -> LaneRow:
        row = await conn.fetchrow(f"SELECT {_LANE_COLUMNS} FROM lanes WHERE id = $1 FOR UPDATE", lane_id)
        assert row is not None
        return LaneRow(**dict(row))

    @staticmethod
    async def claimed_batch(conn: Connection, lane_id: int) -> BatchRow | None:
        """A batch a fire took and did not finish (its worker died in between): the next fire finishes it."""
        row = await conn.fetchrow(
            f"SELECT {_BATCH_COLUMNS} FROM batches WHERE lane_id = $1 AND state = 'claimed' ORDER BY id LIMIT 1",
            lane_id,
        )
        return None if row is None else _batch(row)

    @staticmethod
    async def batch(conn: Connection, batch_id: int) -> BatchRow:
        row = await conn.fetchrow(f"SELECT {_BATCH_COLUMNS} FROM batches WHERE id = $1", batch_id)
        assert row is not None
        return _batch(row)

    @staticmethod
    async def waiting_events(conn: Connection, lane_id: int, after: int, limit: int) -> list[tuple[Event, str | None]]:
        """The lane's queued events after `after`, in id order, each with its write's traceparent."""
        columns = ", ".join(f"e.{c.strip()}" for c in EVENT_COLUMNS.split(","))
        rows = await conn.fetch(
            f"SELECT {columns}, e.traceparent, {WHOLE_MESSAGE} FROM lane_events q JOIN events e ON e.id = q.event_id"
            " WHERE q.lane_id = $1 AND q.event_id > $2 ORDER BY q.event_id LIMIT $3",
            lane_id,
            after,
            limit,
        )
        return [(event_from_row(r), r["traceparent"]) for r in rows]

    @staticmethod
    async def oldest_waiting_at(conn: Connection, lane: LaneRow) -> datetime:
        """When the lane's oldest waiting event was committed (the lane has one)."""
        at = await conn.fetchval(f"SELECT {_OLDEST_WAITING} FROM lanes l WHERE l.id = $1", lane.id)
        return at if at is not None else lane.now

    @staticmethod
    async def events_by_id(conn: Connection, ids: Sequence[int]) -> list[tuple[Event, str | None]]:
        rows = await conn.fetch(
            f"SELECT {EVENT_COLUMNS}, traceparent, {WHOLE_MESSAGE} FROM events e"
            " WHERE id = ANY($1::bigint[]) ORDER BY id",
            list(ids),
        )
        return [(event_from_row(r), r["traceparent"]) for r in rows]

    @staticmethod
    async def runs_holding(conn: Connection, lane_id: int) -> int:
        return int(await conn.fetchval("SELECT count(*) FROM lane_runs WHERE lane_id = $1", lane_id))

    @staticmethod
    async def due_repeat(conn: Connection, lane_id: int, due_by_lane: bool) -> RunRow | None:
        """The lane's run whose repeat is due now (its backoff over), locked, or None. When the lane's own
        clock says one is due (`due_by_lane`), the one due first is, whatever the database's clock says."""
        row = await conn.fetchrow(
            f"SELECT {_RUN_COLUMNS} FROM lane_runs WHERE lane_id = $1 AND state = 'waiting'"
            " AND ($2 OR due_at <= clock_timestamp()) ORDER BY due_at LIMIT 1 FOR UPDATE",
            lane_id,
            due_by_lane,
        )
        return None if row is None else _run(row)

    @staticmethod
    async def fires_in_last_minute(conn: Connection, session_id: str, listener: str) -> int:
        """The listener's fires in the session in the last minute, under a lock held until commit: the fire
        that counts itself in next sees this one (the throttle is exact under parallel and keyed lanes)."""
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('fires:' || $1 || ':' || $2))", session_id, listener)
        return int(
            await conn.fetchval(
                "SELECT count(*) FROM batches WHERE session_id = $1 AND listener = $2 AND counted"
                " AND created_at > clock_timestamp() - interval '60 seconds'",
                session_id,
                listener,
            )
        )

    @staticmethod
    async def take_batch(
        conn: Connection,
        lane: LaneRow,
        event_ids: Sequence[int],
        entry_ids: Sequence[int],
        retry: int,
        verdict: dict[str, Any] | None,
        counted: bool,
        fills_last_slot: bool = False,
        replay: Replay | None = None,
        repeats: BatchRow | None = None,
    ) -> BatchRow:
        """Record a batch (claimed) and, for a new one, move the lane's `fired_through` past it.

        A batch whose run takes the lane's last slot while events are left behind it leaves the lane waiting
        for a slot: the record of that run's end hands the slot on to what is left.
        """
        number, replay_of = (repeats.replay, repeats.replay_of) if repeats is not None else (0, None)
        if replay is not None:
            replay_of = replay.replay_of
            number = 1 + int(
                await conn.fetchval(
                    "SELECT coalesce(max(replay), 0) FROM batches WHERE lane_id = $1 AND first_id = $2",
                    lane.id,
                    min(event_ids),
                )
            )
            await conn.execute("DELETE FROM replays WHERE id = $1", replay.id)
        row = await conn.fetchrow(
            "INSERT INTO batches (lane_id, session_id, listener, first_id, last_id, event_ids, entry_ids, retry,"
            " verdict, counted, replay, replay_of) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
            f" RETURNING {_BATCH_COLUMNS}",
            lane.id,
            lane.session_id,
            lane.listener,
            min(event_ids),
            max(event_ids),
            list(event_ids),
            list(entry_ids),
            retry,
            verdict,
            counted,
            number,
            replay_of,
        )
        assert row is not None
        if retry == 0 and number == 0:
            await conn.execute(
                "UPDATE lanes SET fired_through = GREATEST(fired_through, $2),"
                " waiting_slot = $3 AND routed_through > GREATEST(fired_through, $2) WHERE id = $1",
                lane.id,
                max(event_ids),
                fills_last_slot,
            )
        return _batch(row)

    @staticmethod
    async def next_replay(conn: Connection, lane_id: int) -> Replay | None:
        row = await conn.fetchrow(
            "SELECT id, event_ids, replay_of FROM replays WHERE lane_id = $1 ORDER BY id LIMIT 1", lane_id
        )
        return None if row is None else Replay(row["id"], list(row["event_ids"]), row["replay_of"])

    async def ask_replay(
        self,
        session_id: str,
        listener: str,
        lane: str,
        workflow_id: str,
        chunks: Sequence[Sequence[int]],
        of: int | None,
    ) -> Nudge:
        """Queue batches to be taken again by the lane (its row made when it has none yet); answer its nudge."""
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO lanes (session_id, listener, lane, workflow_id) VALUES ($1, $2, $3, $4)"
                " ON CONFLICT (session_id, listener, lane) DO NOTHING",
                session_id,
                listener,
                lane,
                workflow_id,
            )
            lane_id = await conn.fetchval(
                "SELECT id FROM lanes WHERE session_id = $1 AND listener = $2 AND lane = $3 FOR UPDATE",
                session_id,
                listener,
                lane,
            )
            await conn.executemany(
                "INSERT INTO replays (lane_id, event_ids, replay_of) VALUES ($1, $2, $3)",
                [(lane_id, list(chunk), of) for chunk in chunks],
            )
        # Long past any window: the lane fires at once (a slot permitting).
        return Nudge(session_id, listener, lane, workflow_id, pending_age=1e9, slot_freed=True)

    async def find_batch(self, session_id: str, listener: str, first_id: int) -> dict[str, Any] | None:
        row = await self.pool.fetchrow(
            "SELECT b.event_ids, b.entry_ids, l.lane, l.workflow_id FROM batches b JOIN lanes l ON l.id = b.lane_id"
            " WHERE b.session_id = $1 AND b.listener = $2 AND b.first_id = $3 AND b.retry = 0 AND b.replay = 0",
            session_id,
            listener,
            first_id,
        )
        return None if row is None else dict(row)

    @staticmethod
    async def set_waiting_slot(conn: Connection, lane_id: int, waiting: bool) -> None:
        await conn.execute("UPDATE lanes SET waiting_slot = $2 WHERE id = $1", lane_id, waiting)

    @staticmethod
    async def hold_slot(
        conn: Connection, run_key: str, lane_id: int, batch_id: int, execution_id: str, retry: int, plan: dict[str, Any]
    ) -> None:
        """The run's slot, held from its batch's claim until the record of its end (or a stop) releases it."""
        await conn.execute(
            "INSERT INTO lane_runs (run_key, lane_id, batch_id, execution_id, retry, plan)"
            " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (run_key) DO UPDATE"
            " SET execution_id = EXCLUDED.execution_id, retry = EXCLUDED.retry, state = 'running', due_at = NULL",
            run_key,
            lane_id,
            batch_id,
            execution_id,
            retry,
            plan,
        )

    @staticmethod
    async def lane_run(conn: Connection, run_key: str) -> RunRow | None:
        row = await conn.fetchrow(f"SELECT {_RUN_COLUMNS} FROM lane_runs WHERE run_key = $1 FOR UPDATE", run_key)
        return None if row is None else _run(row)

    @staticmethod
    async def release_slot(conn: Connection, run_key: str) -> None:
        """Give the run's slot back, noting when on its batch (the end of the batch's hold on its lane)."""
        await conn.execute(
            "WITH gone AS (DELETE FROM lane_runs WHERE run_key = $1 RETURNING batch_id)"
            " UPDATE batches SET released_at = clock_timestamp() FROM gone WHERE batches.id = gone.batch_id",
            run_key,
        )

    @staticmethod
    async def wait_for_repeat(conn: Connection, run_key: str, delay_seconds: float) -> None:
        """A failed run keeps its slot through its backoff; its repeat is due in `delay_seconds`."""
        await conn.execute(
            "UPDATE lane_runs SET state = 'waiting', due_at = clock_timestamp() + make_interval(secs => $2)"
            " WHERE run_key = $1",
            run_key,
            delay_seconds,
        )

    @staticmethod
    async def finish_batch(conn: Connection, batch_id: int) -> None:
        await conn.execute("UPDATE batches SET state = 'done' WHERE id = $1", batch_id)

    async def window_due(self, session_id: str, listener: str, lane: str) -> tuple[float, float] | None:
        """How long the lane's oldest waiting event has waited, and its window; None when nothing waits."""
        row = await self.pool.fetchrow(
            f"SELECT l.window_seconds, extract(epoch FROM clock_timestamp() - {_OLDEST_WAITING}) AS pending_age"
            " FROM lanes l WHERE l.session_id = $1 AND l.listener = $2 AND l.lane = $3",
            session_id,
            listener,
            lane,
        )
        if row is None or row["pending_age"] is None:
            return None
        return float(row["pending_age"]), float(row["window_seconds"])

    async def news(self, session_id: str, listener: str, lane: str) -> dict[str, Any]:
        """What the lane should know now: the age of its oldest waiting event (None: nothing waits), of its
        newest event, whether it waits for a slot, and when its next repeat is due."""
        row = await self.pool.fetchrow(
            "SELECT l.waiting_slot, l.last_event_id,"
            " extract(epoch FROM clock_timestamp() - l.last_event_at) AS last_event_age,"
            f" coalesce(extract(epoch FROM clock_timestamp() - {_OLDEST_WAITING}),"
            "  (SELECT 1e9 FROM replays p WHERE p.lane_id = l.id LIMIT 1)) AS pending_age,"
            " (SELECT extract(epoch FROM min(r.due_at) - clock_timestamp()) FROM lane_runs r"
            "   WHERE r.lane_id = l.id AND r.state = 'waiting') AS retry_due_in"
            " FROM lanes l WHERE l.session_id = $1 AND l.listener = $2 AND l.lane = $3",
            session_id,
            listener,
            lane,
        )
        if row is None:
            return {}
        return {
            "waiting_slot": row["waiting_slot"],
            "last_event_id": row["last_event_id"] or None,
            "last_event_age": None if row["last_event_age"] is None else max(float(row["last_event_age"]), 0.0),
            "pending_age": None if row["pending_age"] is None else max(float(row["pending_age"]), 0.0),
            "retry_due_in": None if row["retry_due_in"] is None else max(float(row["retry_due_in"]), 0.0),
        }

    # -- what status shows -------------------------------------------------------------------------------------

    async def lanes_of(self, session_id: str) -> list[dict[str, Any]]:
        """Every lane of the session with what waits in it and since when, the runs holding its slots (since
        their batch's claim), its place in its listener's queue for a key slot, and its last batch."""
        rows = await self.pool.fetch(
            "SELECT l.listener, l.lane, l.workflow_id, l.fired_through, l.routed_through, l.waiting_slot,"
            " l.window_seconds, l.last_event_at,"
            " (SELECT count(*) FROM lane_events q WHERE q.lane_id = l.id AND q.event_id > l.fired_through) AS pending,"
            f" {_OLDEST_WAITING} AS pending_since,"
            " (SELECT coalesce(json_agg(json_build_object('run_key', r.run_key, 'execution_id', r.execution_id,"
            "   'retry', r.retry, 'state', r.state, 'due_at', r.due_at, 'since', b.created_at)"
            "   ORDER BY r.run_key), '[]')"
            "   FROM lane_runs r JOIN batches b ON b.id = r.batch_id WHERE r.lane_id = l.id) AS runs,"
            " (SELECT count(*) FROM batches b WHERE b.lane_id = l.id AND b.retry = 0) AS batches,"
            " (SELECT json_build_object('first_id', b.first_id, 'last_id', b.last_id) FROM batches b"
            "   WHERE b.lane_id = l.id ORDER BY b.id DESC LIMIT 1) AS last_batch,"
            " (SELECT 1 + (SELECT count(*) FROM key_slots w WHERE w.session_id = k.session_id"
            "   AND w.listener = k.listener AND NOT w.holding AND (w.since, w.lane) < (k.since, k.lane))"
            "   FROM key_slots k WHERE k.session_id = l.session_id AND k.listener = l.listener AND k.lane = l.lane"
            "   AND NOT k.holding) AS key_slot_place"
            " FROM lanes l WHERE l.session_id = $1 ORDER BY l.listener, l.lane",
            session_id,
        )
        return [dict(r) for r in rows]

    async def event_by_id(self, session_id: str, event_id: int) -> Event:
        row = await self.pool.fetchrow(
            f"SELECT {EVENT_COLUMNS}, {WHOLE_MESSAGE} FROM events e WHERE session_id = $1 AND id = $2",
            session_id,
            event_id,
        )
        if row is None:
            raise CommandError("not_found", f"event_id: no event {event_id} in session {session_id!r}")
        return event_from_row(row)

    async def routed_position(self, session_id: str) -> int:
        position = await self.pool.fetchval(
            "SELECT routed_event_id FROM routing_cursors WHERE session_id = $1", session_id
        )
        return int(position or 0)

    async def event_fate(self, session_id: str, listener: str, lane: str, event_id: int) -> dict[str, Any]:
        """What became of an event in one listener's lane: queued when, in which batches (with their verdicts,
        runs, outcomes and receipts), or still waiting."""
        row = await self.pool.fetchrow(
            "SELECT l.id, l.workflow_id, l.fired_through, q.queued_at FROM lanes l"
            " LEFT JOIN lane_events q ON q.lane_id = l.id AND q.event_id = $4"
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
        batches = await self.pool.fetch(
            "SELECT b.first_id, b.last_id, b.retry, b.replay, b.state, b.verdict, b.created_at,"
            " event_id = ANY(b.entry_ids) AS entry,"
            " (SELECT json_build_object('status', o.status, 'reason', o.reason, 'execution_id', o.execution_id,"
            "   'message', o.message) FROM outcomes o WHERE o.session_id = $1 AND o.listener = $2"
            "   AND o.batch_key = $3 || ':' || b.first_id || ':' || b.last_id || ':' || b.retry"
            "   || CASE WHEN b.replay > 0 THEN ':r' || b.replay ELSE '' END"
            "   ORDER BY o.id DESC LIMIT 1) AS outcome,"
            " (SELECT e.id FROM events e WHERE e.session_id = $1 AND e.idempotency_key ="
            "   'receipt:' || $2 || ':' || $3 || ':' || b.first_id || ':' || b.last_id || ':' || b.retry"
            "   || CASE WHEN b.replay > 0 THEN ':r' || b.replay ELSE '' END) AS receipt"
            " FROM batches b, (SELECT $4::bigint AS event_id) x"
            " WHERE b.lane_id = $5 AND $4 = ANY(b.event_ids) ORDER BY b.id",
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
            }
            for b in batches
        ]
        if not batches:
            fate["waiting"] = True
        return fate

    async def fires_lately(self, session_id: str) -> dict[str, tuple[int, datetime]]:
        """Per listener: its fires in the session in the last minute and the oldest of them (the throttle)."""
        rows = await self.pool.fetch(
            "SELECT listener, count(*) AS fires, min(created_at) AS oldest FROM batches"
            " WHERE session_id = $1 AND counted AND created_at > clock_timestamp() - interval '60 seconds'"
            " GROUP BY listener",
            session_id,
        )
        return {r["listener"]: (int(r["fires"]), r["oldest"]) for r in rows}
