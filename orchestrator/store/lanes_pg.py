"""The lane store on PostgreSQL: each verb one statement, a call of 0002_lanes.sql's functions.

Owns turning the core's values into those functions' JSON and back. What the functions guarantee (the lock
order, the checks a record makes over its snapshot) is written beside them in the migration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from orchestrator.causes import batch_cause
from orchestrator.core.declaration import ListenerDeclaration, ThrottleSpec
from orchestrator.core.events import envelope_of, pointer
from orchestrator.core.lane_keys import execution_id_of
from orchestrator.core.lane_snapshot import (
    FETCH_EVENTS,
    BatchRecord,
    HeldSlot,
    LaneAddress,
    LaneSnapshot,
    ListenerNow,
    PastBatch,
    Queued,
    Replay,
    RunPlan,
    Take,
    verdict_json,
    verdict_of,
)
from orchestrator.core.run_checks import RunRecord
from orchestrator.core.throttles import UNKEYED
from orchestrator.core.waits import CANCEL_WATCH_SEQ, MAX_WAIT_SECONDS, STOP_SEQ, StartMade, StopAsked
from orchestrator.store.lane_store import (
    STALE_GRACE_SECONDS,
    CancelWatch,
    Ended,
    Ending,
    Finished,
    Finishing,
    Recorded,
    RoutedPage,
    RouteNudge,
    Stale,
    StaleLane,
    TracedEvent,
    answer_of,
)
from orchestrator.store.waits import compiled_conditions

# A stop asked of a run before its start was made, noted told by whoever made the start (who tells it).
STOP_TOLD = (
    "UPDATE orchestrator.run_waits SET told_at = clock_timestamp() WHERE execution_id = $1 AND run_id = ''"
    f" AND seq = {STOP_SEQ} AND told_at IS NULL"
)


def stop_of(grace_seconds: float | None, reason: str | None) -> StopAsked | None:
    return None if reason is None else StopAsked(grace_seconds=grace_seconds or 0.0, reason=reason)


def queued_of(row: Sequence[Any]) -> Queued:
    """A waiting event as `orchestrator_queued` reads it: [id, commit, depth, size, distinct, accepted,
    traceparent, type, alias, item id, execution id, nodes], its pointer put together from its parts
    (0017_fewer_calls_per_event.sql)."""
    event_id, committed, depth, size, distinct, accepted, traceparent, type_, alias, item_id, execution_id, nodes = row
    message = pointer(event_id, type_, alias, item_id, execution_id, nodes)
    return Queued(int(event_id), float(committed), depth, size, distinct, accepted, message, traceparent)


def with_keys(
    events: tuple[Queued, ...], throttle: ThrottleSpec | None, keys: Sequence[str] | None
) -> tuple[Queued, ...]:
    """Events read with the key each counts under in the listener's throttle: `_` for every one of a throttle with no
    key, else the snapshot's keys read beside them in their order (`orchestrator_lane_snapshot`)."""
    if throttle is None or not events:
        return events
    if throttle.key is None:
        return tuple(q._replace(throttle_key=UNKEYED) for q in events)
    assert keys is not None and len(keys) == len(events), "a key read for each event"
    return tuple(q._replace(throttle_key=k) for q, k in zip(events, keys, strict=True))


def _address(data: Mapping[str, Any]) -> LaneAddress:
    return LaneAddress(str(data["session_id"]), str(data["listener"]), str(data["lane"]), str(data["workflow_id"]))


def _run(data: Mapping[str, Any]) -> HeldSlot:
    return HeldSlot(
        run_key=str(data["run_key"]),
        batch_id=int(data["batch_id"]),
        execution_id=str(data["execution_id"]),
        retry=int(data["retry"]),
        plan=RunPlan.from_json(data["plan"]),
        due_at=None if data.get("due_at") is None else float(data["due_at"]),
        since=None if data.get("since") is None else float(data["since"]),
    )


def _batch(data: Mapping[str, Any]) -> BatchRecord:
    return BatchRecord(
        id=int(data["id"]),
        first_id=int(data["first_id"]),
        last_id=int(data["last_id"]),
        event_ids=tuple(int(i) for i in data["event_ids"]),
        entry_ids=tuple(int(i) for i in data["entry_ids"]),
        retry=int(data["retry"]),
        verdict=verdict_of(data.get("verdict")),
        replay=int(data.get("replay") or 0),
        replay_of=data.get("replay_of"),
        run_key=data.get("run_key"),
        throttle_keys=tuple(str(k) for k in data.get("throttle_keys") or ()),
    )


def _past(data: Mapping[str, Any] | None) -> PastBatch | None:
    if data is None:
        return None
    run = data.get("run")
    return PastBatch(
        batch=_batch(data["batch"]),
        entries=tuple(queued_of(e) for e in data["entries"]),
        run=None if run is None else _run(run),
    )


def snapshot_of(
    session_id: str, listener: str, lane: str, data: Mapping[str, Any], complete: bool = True
) -> LaneSnapshot:
    row = data["lane"]
    found = data.get("listener")
    now_listener = None
    if found is not None:
        now_listener = ListenerNow(
            version=int(found["version"]),
            declaration=ListenerDeclaration.model_validate(found["body"]),
            switched_off=bool(found["switched_off"]),
            paused=bool(found["paused"]),
        )
    throttle = data.get("throttle") or {}
    spec = None if now_listener is None else now_listener.declaration.throttle
    waiting = with_keys(tuple(queued_of(e) for e in data["waiting"]), spec, throttle.get("waiting"))
    oldest = data.get("oldest_at")
    replay = data.get("replay")
    session = data.get("session") or {"status": "closed", "alias": None}
    fires = data.get("fires") or {}
    return LaneSnapshot(
        address=LaneAddress(session_id, listener, lane, str(row["workflow_id"])),
        lane_id=int(row["id"]),
        seq=int(row["seq"]),
        fired_through=int(row["fired_through"]),
        now=float(data["now"]),
        session_status=str(session["status"]),
        session_alias=session.get("alias"),
        listener=now_listener,
        pending=max(len(waiting), 0 if oldest is None else 1),
        waiting=waiting,
        oldest_at=None if oldest is None else float(oldest),
        complete=complete,
        newest_at=None if row.get("newest_at") is None else float(row["newest_at"]),
        newest_id=int(row.get("newest_id") or 0),
        routed_through=int(row.get("routed_through") or 0),
        runs=tuple(_run(r) for r in data["runs"]),
        claimed=_past(data.get("claimed")),
        repeat=_past(data.get("repeat")),
        replay=None
        if replay is None
        else Replay(
            id=int(replay["id"]),
            events=with_keys(tuple(queued_of(e) for e in replay["events"]), spec, throttle.get("replay")),
            replay_of=replay.get("replay_of"),
            number=int(replay["number"]),
        ),
        key_slot=data.get("key_slot"),
        keys_held=int(data.get("keys_held") or 0),
        fires_last_minute=int(fires.get("count") or 0),
        oldest_fire_at=None if fires.get("oldest") is None else float(fires["oldest"]),
        running_executions=int(data.get("running") or 0),
        throttle_head=throttle.get("head"),
        throttle_free_at={str(k): float(v) for k, v in (throttle.get("free_at") or {}).items()},
        throttled_until=None if row.get("throttled_until") is None else float(row["throttled_until"]),
    )


def batch_info(take: Take, address: LaneAddress) -> dict[str, Any]:
    """What an execution's record keeps of its batch (`list_executions`, `listener.failed`)."""
    info: dict[str, Any] = {
        "first_id": take.first_id,
        "last_id": take.last_id,
        "count": len(take.entries),
        "retry": take.retry,
        "lane": address.lane,
        "event_ids": list(take.consumed),
    }
    if take.replay_of is not None:
        info["replay_of"] = take.replay_of
    return info


def throttle_of(snap: LaneSnapshot, take: Take) -> dict[str, Any] | None:
    """What a record checks and counts of the listener's own throttle: its limit, and the keys the batch counts
    under (None: not a counted batch of a listener with one)."""
    decl = snap.listener.declaration if snap.listener is not None else None
    if not take.counted or decl is None or decl.throttle is None:
        return None
    throttle = decl.throttle
    return {"runs": throttle.runs, "per_seconds": throttle.per_seconds, "keys": list(take.throttle_keys)}


class PgLaneStore:
    """The lane store on a pool of the platform's database."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def snapshot(self, address: LaneAddress, fetch: int = FETCH_EVENTS) -> LaneSnapshot | None:
        data = await self.pool.fetchval(
            "SELECT orchestrator.orchestrator_lane_snapshot($1, $2, $3, $4)",
            address.session_id,
            address.listener,
            address.lane,
            fetch,
        )
        if data is None:
            return None
        return snapshot_of(address.session_id, address.listener, address.lane, data, complete=fetch > 0)

    async def record(
        self,
        snap: LaneSnapshot,
        take: Take,
        fires_limit: int,
        key_max: int,
        at: float | None = None,
        executions_limit: int | None = None,
    ) -> Recorded | Stale:
        address = snap.address
        run = None
        if take.plan is not None:
            run = {
                "run_key": take.run_key,
                "execution_id": take.execution_id,
                "retry": take.retry,
                "plan": take.plan.to_json(),
                "workflow": take.plan.workflow,
                "depth": take.depth + 1,
                "batch": batch_info(take, address),
                "cause": batch_cause(address, take),
            }
        body = {
            "lane_id": snap.lane_id,
            "seq": snap.seq,
            "session_id": address.session_id,
            "listener": address.listener,
            "lane": address.lane,
            "kind": take.kind,
            "replay_id": take.replay_id,
            "key_slot": take.key_slot,
            "key_max": key_max,
            "fires_limit": fires_limit,
            "executions_limit": executions_limit,
            "throttle": throttle_of(snap, take),
            "at": at,
            "batch": {
                "first_id": take.first_id,
                "last_id": take.last_id,
                "event_ids": list(take.consumed),
                "entry_ids": list(take.entry_ids),
                "retry": take.retry,
                "replay": take.replay_number,
                "replay_of": take.replay_of,
                "verdict": verdict_json(take.verdict),
                "counted": take.counted,
                "run_key": take.run_key if take.plan is not None or take.kind == "repeat" else None,
            },
            "run": run,
        }
        answer = await self.pool.fetchval("SELECT orchestrator.orchestrator_lane_record($1::jsonb)", body)
        if "stale" in answer:
            return Stale(str(answer["stale"]))
        return Recorded(int(answer["batch_id"]), tuple(_address(a) for a in answer["granted"]))

    async def finish(self, finishing: Finishing) -> Finished:
        snap, take, outcome = finishing.snap, finishing.take, finishing.outcome
        address = snap.address
        body: dict[str, Any] = {
            "batch_id": finishing.batch_id,
            "lane_id": snap.lane_id,
            "session_id": address.session_id,
            "listener": address.listener,
            "lane": address.lane,
            "started": finishing.started,
            "execution_id": take.execution_id,
            "run_key": take.run_key,
            "release": finishing.release,
            "keyed": take.plan is not None and take.plan.keyed,
            "key_max": finishing.key_max,
            "depth": take.depth + 1,
            "failed_execution": finishing.failed_execution,
            "fetch": finishing.fetch,
            # This finisher cancels a run its cancel watch heard before its start (one of the release before did
            # not: its runs' answers are left to the router's poll).
            "tells_cancel": True,
            "outcome": None
            if outcome is None
            else {
                "version": finishing.version,
                "status": outcome.status,
                "reason": outcome.reason,
                "first_id": outcome.first_id,
                "last_id": outcome.last_id,
                "event_ids": outcome.event_ids,
                "retry": outcome.retry,
                "execution_id": outcome.execution_id,
                "message": outcome.message,
                "batch_key": outcome.batch_key,
            },
            "receipt": finishing.receipt,
        }
        answer = await self.pool.fetchval("SELECT orchestrator.orchestrator_batch_finish($1::jsonb)", body)
        data = answer.get("snapshot")
        stop = answer.get("stop")
        return Finished(
            snapshot=None
            if data is None
            else snapshot_of(address.session_id, address.listener, address.lane, data, complete=finishing.fetch > 0),
            granted=tuple(_address(a) for a in answer["granted"]),
            outcome_new=bool(answer.get("outcome_new")),
            done_new=bool(answer.get("done_new")),
            stop=None if stop is None else stop_of(stop["grace_seconds"], stop["reason"]),
            cancel=bool(answer.get("cancel")),
        )

    async def hold(self, snap: LaneSnapshot, until: float) -> None:
        await self.pool.execute(
            "UPDATE orchestrator.lanes SET throttled_until = to_timestamp($2) WHERE id = $1 AND seq = $3",
            snap.lane_id,
            until,
            snap.seq,
        )

    async def queue_for_key_slot(self, snap: LaneSnapshot, key_max: int) -> bool:
        address = snap.address
        return bool(
            await self.pool.fetchval(
                "SELECT orchestrator.orchestrator_queue_for_key_slot($1, $2, $3, $4)",
                snap.lane_id,
                address.session_id,
                address.listener,
                key_max,
            )
        )

    async def give_back_key_slot(self, snap: LaneSnapshot, key_max: int) -> tuple[LaneAddress, ...]:
        address = snap.address
        granted = await self.pool.fetchval(
            "SELECT orchestrator.orchestrator_give_back_key_slot($1, $2, $3, $4)",
            snap.lane_id,
            address.session_id,
            address.listener,
            key_max,
        )
        return tuple(_address(a) for a in granted)

    async def envelopes(self, ids: Sequence[int]) -> list[dict[str, Any]]:
        rows = await self.pool.fetchval("SELECT orchestrator.orchestrator_events_json($1::bigint[])", list(ids))
        return [envelope_of(row) for row in rows]

    async def pointers(self, session_id: str, ids: Sequence[int]) -> list[dict[str, Any]]:
        rows = await self.pool.fetch(
            """SELECT id, type, alias, item ->> 'id', execution ->> 'id',
                      CASE WHEN jsonb_typeof(graph -> 'nodes') = 'array' THEN graph -> 'nodes' END
               FROM orchestrator.events WHERE session_id = $1 AND id = ANY ($2::bigint[]) ORDER BY id""",
            session_id,
            list(ids),
        )
        return [pointer(*row) for row in rows]

    async def drop_replay(self, replay_id: int) -> None:
        await self.pool.execute("DELETE FROM orchestrator.replays WHERE id = $1", replay_id)

    async def end_run(self, ending: Ending) -> Ended:
        body = {
            "execution_id": ending.execution_id,
            "session_id": ending.session_id,
            "listener": ending.listener,
            "status": ending.status,
            "error": ending.error,
            "error_type": ending.error_type,
            "keyed": ending.keyed,
            "key_max": ending.key_max,
            "repeat_in": ending.repeat_in,
            "gave_up": ending.gave_up,
            "lane": ending.lane,
            "fetch_own": ending.fetch_own,
            "fetch": FETCH_EVENTS,
        }
        answer = await self.pool.fetchval("SELECT orchestrator.orchestrator_run_end_read($1::jsonb)", body)
        drive = tuple(_address(a) for a in answer["drive"])
        first, data = (drive[0] if drive else None), answer.get("snapshot")
        snapshot = None
        if first is not None and data is not None:
            complete = ending.fetch_for(first) > 0
            snapshot = snapshot_of(first.session_id, first.listener, first.lane, data, complete=complete)
        return Ended(
            bool(answer["recorded"]),
            drive,
            snapshot,
            stopped=bool(answer.get("stopped")),
            status=answer.get("status"),
            error=answer.get("error"),
        )

    async def stop_repeat(self, session_id: str, execution_id: str, key_max: int) -> tuple[LaneAddress, ...] | None:
        answer = await self.pool.fetchval(
            "SELECT orchestrator.orchestrator_repeat_stopped($1, $2, $3)", session_id, execution_id, key_max
        )
        return None if answer is None else tuple(_address(a) for a in answer["drive"])

    async def route_page(self, session_id: str, limit: int, parallel_cap: int) -> RoutedPage:
        answer = await self.pool.fetchval(
            "SELECT orchestrator.orchestrator_route_page($1, $2, $3)", session_id, limit, parallel_cap
        )
        if not answer["read"]:
            return RoutedPage(0, busy=bool(answer["busy"]))
        return RoutedPage(
            read=int(answer["read"]),
            now=float(answer["now"]),
            nudges=tuple(
                RouteNudge(
                    address=LaneAddress(session_id, str(n["listener"]), str(n["lane"]), str(n["workflow_id"])),
                    oldest_at=float(n["oldest_at"]),
                    newest_id=int(n["newest_id"]) if n.get("newest_id") else None,
                    newest_at=None if n.get("newest_at") is None else float(n["newest_at"]),
                    version=int(n["version"]),
                )
                for n in answer["nudges"]
            ),
            lanes=tuple((str(x["listener"]), str(x["lane"]), int(x["events"])) for x in answer["lanes"] or ()),
            traced=tuple(
                TracedEvent(int(t["id"]), str(t["type"]), str(t["traceparent"]), int(t["lanes"]))
                for t in answer["traced"]
            ),
            answers=tuple(answer_of(a) for a in answer.get("answers") or ()),
        )

    async def stale_lanes(self, limit: int = 100) -> list[StaleLane]:
        rows = await self.pool.fetch(
            "WITH stale AS (SELECT id FROM orchestrator.lanes l WHERE"
            # A lane the throttle holds is woken by its own clock when it lets the lane go: left until then.
            " (l.throttled_until IS NULL OR l.throttled_until < clock_timestamp() - make_interval(secs => $1))"
            " AND (("
            # Events waiting past the window and the grace, or a replay asked for past the grace, with no nudge.
            "  ((routed_through > fired_through"
            "    AND nudged_at < clock_timestamp() - make_interval(secs => window_seconds + $1))"
            "   OR (nudged_at < clock_timestamp() - make_interval(secs => $1) AND l.id IN ("
            "    SELECT p.lane_id FROM orchestrator.replays p"
            "    WHERE p.requested_at < clock_timestamp() - make_interval(secs => $1))))"
            # Left to whoever frees the slot it waits for: its runs hold all of them, or it is queued for a key that
            # some lane holds (a queue nobody holds a slot of, its listener no longer keyed, is nobody's to hand on).
            "  AND NOT (run_slots IS NOT NULL"
            "   AND (SELECT count(*) FROM orchestrator.lane_runs r WHERE r.lane_id = l.id) >= run_slots)"
            "  AND NOT EXISTS (SELECT 1 FROM orchestrator.key_slots k WHERE k.lane_id = l.id AND NOT k.holding"
            "   AND EXISTS (SELECT 1 FROM orchestrator.key_slots h"
            "    WHERE h.session_id = k.session_id AND h.listener = k.listener AND h.holding))"
            # A batch its driver left claimed (it died between the record and the finish), or a failed run's repeat
            # due (its nudge lost with the report of its end): the step finishes it, or starts the repeat.
            " ) OR (nudged_at < clock_timestamp() - make_interval(secs => $1) AND l.id IN ("
            "  SELECT b.lane_id FROM orchestrator.batches b WHERE b.state = 'claimed'"
            "  AND b.created_at < clock_timestamp() - make_interval(secs => $1)"
            "  UNION ALL SELECT r.lane_id FROM orchestrator.lane_runs r"
            "  WHERE r.due_at < clock_timestamp() - make_interval(secs => $1))))"
            " ORDER BY nudged_at LIMIT $2 FOR UPDATE SKIP LOCKED)"
            " UPDATE orchestrator.lanes l SET nudged_at = clock_timestamp() FROM stale WHERE l.id = stale.id"
            " RETURNING l.session_id, l.listener, l.lane, l.workflow_id,"
            " extract(epoch FROM clock_timestamp() - (SELECT e.created_at"
            "  FROM orchestrator.orchestrator_lane_head(l.id, l.session_id, l.fired_through) e)) AS age",
            STALE_GRACE_SECONDS,
            limit,
        )
        return [
            StaleLane(
                address=LaneAddress(r["session_id"], r["listener"], r["lane"], r["workflow_id"]),
                pending_age=float(r["age"]) if r["age"] is not None else 0.0,
            )
            for r in rows
        ]

    async def unsettled_runs(self, older_than_seconds: float, limit: int = 50) -> list[RunRecord]:
        rows = await self.pool.fetch(
            "SELECT * FROM orchestrator.orchestrator_unsettled_runs($1, $2)", older_than_seconds, limit
        )
        return [
            RunRecord(
                execution_id=r["id"],
                session_id=r["session_id"],
                workflow=r["workflow"],
                listener=r["listener"],
                lane=r["lane"],
                run_key=r["run_key"],
                depth=int(r["depth"]),
                age_seconds=float(r["age"]),
                batch=r["batch_state"],
                start_input=r["start_input"],
            )
            for r in rows
        ]

    async def execution_start_made(self, execution_id: str) -> StartMade:
        row = await self.pool.fetchrow(
            "WITH made AS (UPDATE orchestrator.executions SET start_input = NULL WHERE id = $1 RETURNING session_id),"
            f" stop AS ({STOP_TOLD} RETURNING grace_seconds, reason)"
            " SELECT EXISTS (SELECT 1 FROM made m JOIN orchestrator.sessions x ON x.id = m.session_id"
            " WHERE x.status <> 'deleting') AS recorded, s.grace_seconds, s.reason"
            " FROM (SELECT 1) one LEFT JOIN stop s ON true",
            execution_id,
        )
        assert row is not None, "one row, whatever the statements found"
        return StartMade(recorded=row["recorded"], stop=stop_of(row["grace_seconds"], row["reason"]))

    async def watch_for_cancel(self, watch: CancelWatch) -> None:
        await self.pool.fetchval(
            "SELECT orchestrator.orchestrator_wait_open($1)",
            {
                "session_id": watch.session_id,
                "execution_id": watch.execution_id,
                "seq": CANCEL_WATCH_SEQ,
                "kind": "cancel",
                "listener": watch.listener,
                "lane": watch.lane,
                "after": watch.after,
                "max_events": 1,
                "timeout_seconds": MAX_WAIT_SECONDS,
                "conditions": [c.model_dump(mode="json") for c in watch.cancel_on],
                "compiled": compiled_conditions(watch.cancel_on, watch.key_segments),
            },
        )

    async def reopen_run(self, execution_id: str) -> LaneAddress | None:
        address = await self.pool.fetchval("SELECT orchestrator.orchestrator_reopen_run($1)", execution_id)
        return None if address is None else _address(address)


__all__ = ["PgLaneStore", "execution_id_of"]
