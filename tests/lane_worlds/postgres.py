"""The world on PostgreSQL: a migrated database set up through the platform's own commands, read by its tables,
its clock moved on by moving every time it holds into the past (`_shift_times`)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import asyncpg

from orchestrator.config import Settings
from orchestrator.core.declaration import ListenerDeclaration
from orchestrator.core.lane_snapshot import LaneAddress
from orchestrator.core.limits import Limits
from orchestrator.lanes.executions import ExecutionRecords
from orchestrator.platform import Platform
from orchestrator.store.lane_store import LaneStore
from tests.databases import Databases
from tests.lane_worlds.held import BatchRow, EventRow, ExecutionRow, Held, LaneRow, RunRow


def world_settings(limits: Limits) -> Settings:
    """Settings for a world's platform: `limits`, with listeners in effect at once; nothing read from the
    environment's servers."""
    return Settings(
        database_url=None,
        temporal_address=None,
        limits=limits.model_copy(update={"activation_delay_seconds": 0}),
    )


class PgWorld:
    """A migrated database, set up through the platform's commands and read by its tables."""

    def __init__(self, platform: Platform, give_back: tuple[Databases, str] | None = None) -> None:
        self.platform = platform
        self.pool: asyncpg.Pool = platform.store.pool
        self.lanes: LaneStore = platform.store.lanes
        self.records: ExecutionRecords = platform.store
        self._give_back = give_back
        self._advanced = 0.0
        self._shift: str | None = None

    @classmethod
    async def lend(cls, databases: Databases, settings: Settings) -> PgWorld:
        """A world on a database lent by `databases`, given back by `close`."""
        url = await databases.lend()
        try:
            platform = await Platform.connect(settings, url)
        except BaseException:
            await databases.give_back(url)
            raise
        return cls(platform, (databases, url))

    async def close(self) -> None:
        await self.platform.close()
        if self._give_back is not None:
            databases, url = self._give_back
            self._give_back = None
            await databases.give_back(url)

    def now(self) -> float:
        return time.time() + self._advanced

    async def advance(self, seconds: float) -> None:
        if self._shift is None:
            self._shift = await _shift_times(self.pool)
        await self.pool.execute(self._shift.replace("$seconds", repr(float(seconds))))
        self._advanced += seconds

    async def _ok(self, command: str, **args: Any) -> dict[str, Any]:
        reply = await self.platform.command({"command": command, **args})
        assert reply["status"] == "success", reply
        return reply

    async def open_session(self) -> str:
        return str((await self._ok("open_session"))["session"]["id"])

    async def close_session(self, session_id: str) -> None:
        await self._ok("close_session", session_id=session_id)

    async def mark_deleting(self, session_id: str) -> None:
        await self.pool.execute("UPDATE orchestrator.sessions SET status = 'deleting' WHERE id = $1", session_id)

    async def write(self, session_id: str, alias: str) -> int:
        reply = await self._ok("write_object", session_id=session_id, alias=alias, value={"type": "t"})
        return int(reply["event_id"])

    async def save_listener(self, body: dict[str, Any], delay_seconds: float = 0.0) -> int:
        if not delay_seconds:
            return int((await self._ok("save_listener", listener=body))["listener"]["version"])
        # The command's delay is the deployment's (none here): the store's own save, with the body as the command
        # would store it.
        stored = ListenerDeclaration.model_validate(body).model_dump(mode="json", exclude_unset=True)
        return int((await self.platform.store.save_listener(body["name"], stored, delay_seconds))["version"])

    async def delete_listener(self, name: str) -> None:
        await self._ok("delete_listener", name=name)

    async def switch(self, session_id: str, name: str, enabled: bool) -> None:
        await self._ok("switch_listener", session_id=session_id, name=name, enabled=enabled)

    async def pause(self, name: str) -> None:
        await self._ok("pause_listener", name=name)

    async def resume(self, name: str) -> None:
        # The store's own, not the command: it nudges the lanes it lets go, and a world has no Temporal to nudge.
        await self.platform.store.resume_listener(name, None)

    async def ask_replay(self, lane_id: int, event_ids: Sequence[int], replay_of: int | None) -> None:
        await self.pool.execute(
            "INSERT INTO orchestrator.replays (lane_id, event_ids, replay_of) VALUES ($1, $2, $3)",
            lane_id,
            list(event_ids),
            replay_of,
        )

    async def versions(self) -> list[dict[str, Any]]:
        return await self.platform.store.listener_versions()

    async def position(self, session_id: str) -> int:
        found = await self.pool.fetchval(
            "SELECT routed_event_id FROM orchestrator.routing_cursors WHERE session_id = $1", session_id
        )
        return int(found or 0)

    async def held(self) -> Held:
        at = self._advanced
        async with self.pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            lanes = await conn.fetch(
                "SELECT l.id, l.session_id, l.listener, l.lane, l.workflow_id, l.routed_through, l.fired_through,"
                " ARRAY(SELECT q.event_id FROM orchestrator.lane_events q WHERE q.lane_id = l.id) AS queue"
                " FROM orchestrator.lanes l"
            )
            batches = await conn.fetch(
                "SELECT id, lane_id, first_id, last_id, event_ids, retry, replay, state, counted,"
                " extract(epoch FROM created_at)::float8 AS created_at, run_key, verdict,"
                " released_at IS NOT NULL AS released, throttle_keys FROM orchestrator.batches"
            )
            runs = await conn.fetch(
                "SELECT run_key, lane_id, batch_id, execution_id, retry, extract(epoch FROM due_at)::float8 AS due_at"
                " FROM orchestrator.lane_runs"
            )
            slots = await conn.fetch("SELECT lane_id, holding FROM orchestrator.key_slots")
            executions = await conn.fetch(
                "SELECT id, status, error, listener, run_key, batch FROM orchestrator.executions"
            )
            events = await conn.fetch(
                "SELECT id, type, extract(epoch FROM created_at)::float8 AS committed,"
                " execution ->> 'id' AS execution_id FROM orchestrator.events"
            )
            outcomes = await conn.fetch("SELECT listener, batch_key, status FROM orchestrator.outcomes")
            replays = await conn.fetchval("SELECT count(*) FROM orchestrator.replays")
            unrouted = await conn.fetchval(
                "SELECT count(*) FROM orchestrator.events e"
                " JOIN orchestrator.routing_cursors c ON c.session_id = e.session_id WHERE e.id > c.routed_event_id"
            )
        return Held(
            lanes={
                r["id"]: LaneRow(
                    r["id"],
                    r["session_id"],
                    r["listener"],
                    r["lane"],
                    r["workflow_id"],
                    r["routed_through"],
                    r["fired_through"],
                    frozenset(r["queue"]),
                )
                for r in lanes
            },
            batches={
                r["id"]: BatchRow(
                    r["id"],
                    r["lane_id"],
                    r["first_id"],
                    r["last_id"],
                    tuple(r["event_ids"]),
                    r["retry"],
                    r["replay"],
                    r["state"],
                    r["counted"],
                    r["created_at"] + at,
                    r["run_key"],
                    r["verdict"],
                    tuple(r["throttle_keys"]),
                )
                for r in batches
            },
            runs={
                r["run_key"]: RunRow(
                    r["run_key"],
                    r["lane_id"],
                    r["batch_id"],
                    r["execution_id"],
                    r["retry"],
                    None if r["due_at"] is None else r["due_at"] + at,
                )
                for r in runs
            },
            key_slots={r["lane_id"]: r["holding"] for r in slots},
            executions={
                r["id"]: ExecutionRow(r["id"], r["status"], r["error"], r["listener"], r["run_key"], r["batch"])
                for r in executions
            },
            events={r["id"]: EventRow(r["id"], r["type"], r["committed"] + at, r["execution_id"]) for r in events},
            outcomes={(r["listener"], r["batch_key"]): r["status"] for r in outcomes},
            replays=int(replays),
            unrouted=int(unrouted),
            released=Counter(r["run_key"] for r in batches if r["released"] and r["run_key"] is not None),
        )

    async def queue_rows(self, where: LaneAddress) -> list[int]:
        rows = await self.pool.fetch(
            "SELECT q.event_id FROM orchestrator.lane_events q JOIN orchestrator.lanes l ON l.id = q.lane_id"
            " WHERE l.session_id = $1 AND l.listener = $2 AND l.lane = $3 ORDER BY q.event_id",
            where.session_id,
            where.listener,
            where.lane,
        )
        return [int(r["event_id"]) for r in rows]

    async def backdate_nudges(self, seconds: float) -> None:
        await self.pool.execute(
            "UPDATE orchestrator.lanes SET nudged_at = nudged_at - make_interval(secs => $1)", seconds
        )

    async def backdate_oldest_fire(self, seconds: float) -> None:
        await self.pool.execute(
            "UPDATE orchestrator.batches SET created_at = created_at - make_interval(secs => $1)"
            " WHERE id = (SELECT min(id) FROM orchestrator.batches WHERE counted)",
            seconds,
        )

    async def postdate_newest_fire(self, seconds: float) -> None:
        await self.pool.execute(
            "UPDATE orchestrator.batches SET created_at = created_at + make_interval(secs => $1)"
            " WHERE id = (SELECT max(id) FROM orchestrator.batches WHERE counted)",
            seconds,
        )


async def _shift_times(pool: asyncpg.Pool) -> str:
    """One statement that moves every time the platform's tables hold (`timestamptz` columns and arrays of them)
    `$seconds` into the past, triggers and foreign keys left out (a replica's role): the world's clock moved on."""
    rows = await pool.fetch(
        "SELECT c.relname AS table_name, a.attname AS column_name, t.typname = '_timestamptz' AS is_array"
        " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_type t ON t.oid = a.atttypid"
        " WHERE c.relnamespace = 'orchestrator'::regnamespace AND c.relkind = 'r' AND a.attnum > 0"
        " AND NOT a.attisdropped AND t.typname IN ('timestamptz', '_timestamptz')"
        " AND c.relname NOT IN ('schema_migrations', 'schema_functions') ORDER BY 1, 2"
    )
    shift = "make_interval(secs => $seconds)"
    by_table: dict[str, list[str]] = {}
    for r in rows:
        column = f'"{r["column_name"]}"'
        moved = (
            f"CASE WHEN {column} IS NULL THEN NULL ELSE ARRAY(SELECT x - {shift} FROM unnest({column})"
            f" WITH ORDINALITY u(x, n) ORDER BY n) END"
            if r["is_array"]
            else f"{column} - {shift}"
        )
        by_table.setdefault(r["table_name"], []).append(f"{column} = {moved}")
    updates = "".join(f'UPDATE orchestrator."{table}" SET {", ".join(sets)};' for table, sets in by_table.items())
    return f"DO $do$ BEGIN SET LOCAL session_replication_role = replica; {updates} END $do$"
