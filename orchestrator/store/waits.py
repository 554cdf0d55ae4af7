"""The statements of runs that hear events: a run's waits and its cancel watches, in PostgreSQL.

Owns the records of `RunSession.wait_for_event` and of a listener's `cancel_on` (`run_waits`, 0027): a wait put in
place and answered at once from the log when it can be (`orchestrator_wait_open`), closed on its timeout, the
answers a routing round found and nobody has told yet, and the cancellations whose grace ran out. Which events
answer a wait is decided in SQL as `core/waits.answer` says; what is compiled for it is `core/rules`'. The router
tells the runs (`engine/wait_answers.py`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import asyncpg

from orchestrator.core.declaration import CancelOn, WaitCondition
from orchestrator.core.rules import compile_filter, split_path
from orchestrator.core.waits import STOP_SEQ
from orchestrator.store.lane_store import LaneStore, WaitAnswer, answer_of


def compiled_conditions(conditions: Sequence[WaitCondition], key_segments: int | None = None) -> list[dict[str, Any]]:
    """The conditions as `orchestrator_wait_open` takes them: each compiled as a listener's filter is, with its
    probes; a `cancel_on`'s key split as a path is, cut to the listener's `key_segments` as its lanes' keys are."""
    found = []
    for condition in conditions:
        rule = compile_filter(condition)
        key = condition.key if isinstance(condition, CancelOn) else None
        root, rest = split_path(key) if key is not None else (None, ())
        found.append(
            {
                "type_res": None if rule.type_res is None else list(rule.type_res),
                "alias_res": None if rule.alias_res is None else list(rule.alias_res),
                "where": list(rule.where),
                "key_root": root,
                "key_rest": list(rest),
                "key_segments": key_segments if key is not None else None,
                "probes": [
                    {"type_head": p.type_head, "alias_head": p.alias_head, "eq_path": p.eq_path, "eq_value": p.eq_value}
                    for p in rule.probes
                ],
            }
        )
    return found


# The most an answer's events may weigh, as JSON, to cross whole in its signal or reply (Temporal refuses a payload
# of 2 MB); a heavier answer carries their ids, and the run reads them in pages (`RunSession.wait_for_event`).
ANSWER_EVENTS_BYTES = 512 * 1024


async def answer_events(lanes: LaneStore, session_id: str, ids: Sequence[int]) -> list[dict[str, Any]] | None:
    """The events a wait took, whole and in id order, or None when they weigh more than `ANSWER_EVENTS_BYTES`."""
    if not ids:
        return []
    found = sorted((e for e in await lanes.envelopes(ids) if e["session_id"] == session_id), key=lambda e: e["id"])
    return found if len(json.dumps(found, default=str)) <= ANSWER_EVENTS_BYTES else None


class Waits:
    """Mixed into the engine's store, which provides `pool`."""

    pool: asyncpg.Pool

    async def open_wait(self, request: dict[str, Any]) -> dict[str, Any]:
        """Put a wait in place (`orchestrator_wait_open`'s `p`), answered at once when the log holds its answer;
        answers it as it stands (`state`, `matched`, `event_ids`). The same run and number again find it."""
        found: dict[str, Any] = await self.pool.fetchval("SELECT orchestrator.orchestrator_wait_open($1)", request)
        return found

    async def close_wait(
        self, execution_id: str, run_id: str, seq: int, *, given_up: bool = False
    ) -> dict[str, Any] | None:
        """A wait its run's timeout ended: `timed_out`, or its answer when one came first; `given_up`: its caller
        gave up on it, `abandoned` whatever came (None: no such wait)."""
        function = "orchestrator_wait_given_up" if given_up else "orchestrator_wait_close"
        found: dict[str, Any] | None = await self.pool.fetchval(
            f"SELECT orchestrator.{function}($1, $2, $3)", execution_id, run_id, seq
        )
        return found

    async def untold_answers(self, older_than_seconds: float, limit: int = 100) -> list[WaitAnswer]:
        """Answers a round found that no router has told their run after `older_than_seconds` (it died first)."""
        rows = await self.pool.fetch(
            "SELECT id AS wait_id, session_id, execution_id, run_id, seq, kind, matched, event_ids, grace_seconds"
            " FROM orchestrator.run_waits WHERE state = 'answered' AND told_at IS NULL"
            " AND ended_at < clock_timestamp() - make_interval(secs => $1) ORDER BY ended_at LIMIT $2",
            older_than_seconds,
            limit,
        )
        return [answer_of(r) for r in rows]

    async def answers_told(self, wait_ids: Sequence[int]) -> None:
        await self.pool.execute(
            "UPDATE orchestrator.run_waits SET told_at = clock_timestamp() WHERE id = ANY ($1::bigint[])"
            " AND told_at IS NULL",
            list(wait_ids),
        )

    async def cancels_past_grace(self, limit: int = 100) -> list[WaitAnswer]:
        """Runs cancelled by an event that still run after their grace: the router terminates them."""
        rows = await self.pool.fetch(
            "SELECT w.id AS wait_id, w.session_id, w.execution_id, w.run_id, w.seq, w.kind, w.matched, w.event_ids,"
            " w.grace_seconds"
            " FROM orchestrator.run_waits w JOIN orchestrator.executions x ON x.id = w.execution_id"
            " WHERE w.kind = 'cancel' AND w.state = 'answered' AND w.told_at IS NOT NULL"
            # A stop's grace is its own; a cancel watch's, the condition that heard the event (10 s by default).
            " AND w.told_at < clock_timestamp() - make_interval(secs => coalesce(w.grace_seconds,"
            " (w.conditions -> w.matched ->> 'grace_seconds')::float8, 10))"
            " AND x.status = 'running' ORDER BY w.told_at LIMIT $1",
            limit,
        )
        return [answer_of(r) for r in rows]

    async def open_waits(self, execution_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Each of these runs' open wait (its number, conditions, position, deadline), by run."""
        rows = await self.pool.fetch(
            "SELECT execution_id, seq, conditions, after_id, max_events, deadline FROM orchestrator.run_waits"
            " WHERE execution_id = ANY ($1::text[]) AND state = 'open' AND kind = 'wait' ORDER BY seq",
            list(execution_ids),
        )
        return {
            r["execution_id"]: {
                "seq": r["seq"],
                "conditions": r["conditions"],
                "after": r["after_id"],
                "max_events": r["max_events"],
                "deadline": r["deadline"].isoformat(),
            }
            for r in rows
        }

    async def stop_asked(
        self, session_id: str, execution_id: str, reason: str, grace_seconds: float
    ) -> tuple[int, float]:
        """A stop (`stop_execution`): a cancel row answered from the start, and its id; `grace_seconds` 0 for a
        `terminate`. Noted told once Temporal took it (`answers_told`), or by whoever makes the run's start when it
        had none yet (`Finished.stop`, `StartMade.stop`), or else told by the router's poll as any answer; the
        poll terminates a run still running once its grace has passed from then. A second stop with less grace
        (a `terminate` after a graceful one) takes its place, with its reason. Answers its id and its grace now."""
        found = await self.pool.fetchrow(
            "INSERT INTO orchestrator.run_waits AS w (session_id, execution_id, seq, kind, conditions,"
            " after_id, state, matched, event_ids, grace_seconds, reason, ended_at)"
            " VALUES ($1, $2, $3, 'cancel', '[]', 0, 'answered', 0, '{}', $4, $5, clock_timestamp())"
            " ON CONFLICT (execution_id, run_id, seq) DO UPDATE SET"
            " grace_seconds = least(w.grace_seconds, EXCLUDED.grace_seconds),"
            " reason = CASE WHEN EXCLUDED.grace_seconds < w.grace_seconds THEN EXCLUDED.reason ELSE w.reason END"
            " RETURNING id, grace_seconds",
            session_id,
            execution_id,
            STOP_SEQ,
            grace_seconds,
            reason,
        )
        assert found is not None, "the row inserted or updated"
        return int(found["id"]), float(found["grace_seconds"] or 0.0)

    async def waits_taking(self, session_id: str, event_id: int) -> list[dict[str, Any]]:
        """The waits (and cancel watches) an event answered: their run, number and the condition it met."""
        rows = await self.pool.fetch(
            "SELECT execution_id, seq, kind, matched, listener FROM orchestrator.run_waits"
            " WHERE session_id = $1 AND state = 'answered' AND $2 = ANY (event_ids) ORDER BY id",
            session_id,
            event_id,
        )
        return [dict(r) for r in rows]


__all__ = ["ANSWER_EVENTS_BYTES", "Waits", "answer_events", "compiled_conditions"]
