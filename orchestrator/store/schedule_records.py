"""Schedules in PostgreSQL: each session's schedule definitions and the results of their firings.

Owns the SQL of `schedules` and `schedule_runs` (0004_schedules.sql); when a schedule fires is Temporal's.
A run is kept once per scheduled time and only while its schedule exists, so a firing retried after it
recorded, or one finishing after `delete_schedule`, adds nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from orchestrator.core.errors import CommandError
from orchestrator.store.postgres import PostgresStore

_SCHEDULE_COLUMNS = "session_id, alias, schedule_id, body, enabled, created_at, updated_at"
RECENT_RUNS = 100


def _schedule_json(row: asyncpg.Record) -> dict[str, Any]:
    return {
        "session_id": row["session_id"],
        "alias": row["alias"],
        "schedule_id": row["schedule_id"],
        **row["body"],
        "enabled": row["enabled"],
        "created_at": row["created_at"].isoformat(),
        "updated_at": row["updated_at"].isoformat(),
    }


def _missing(session_id: str, alias: str) -> CommandError:
    return CommandError("not_found", f"alias: no schedule {alias!r} in session {session_id!r}")


@dataclass(frozen=True)
class Replaced:
    """What a replace took away: the schedule's row as it was and its firings' records, put back when the
    replacement's clock is refused (Temporal kept the old clock then)."""

    body: dict[str, Any]
    enabled: bool
    created_at: datetime
    updated_at: datetime
    runs: list[tuple[Any, ...]]


_RUN_COLUMNS = "scheduled_at, status, message, event_id, execution_id, created_at"


class ScheduleRecords(PostgresStore):
    """The store's schedule statements (mixed into `EngineRecords`)."""

    async def put_schedule(
        self, session_id: str, alias: str, schedule_id: str, body: dict[str, Any], enabled: bool, replace: bool
    ) -> tuple[dict[str, Any], str, Replaced | None]:
        """Write a schedule's row, not made yet, and answer it with its version (the row's `xmin`, which every
        later write of it changes) and, for a replace, what it replaced. `replace`: one already at the alias is
        replaced in the same transaction (its runs' records go with it), so creates at once never find the alias
        empty between a delete and an insert."""
        upsert = (
            " ON CONFLICT (session_id, alias) DO UPDATE SET body = EXCLUDED.body, enabled = EXCLUDED.enabled,"
            " made = false, created_at = clock_timestamp(), updated_at = clock_timestamp()"
            if replace
            else ""
        )
        # An upsert beside another's insert of the same new row may meet the schedule id's own unique index before
        # the arbiter's: the row is there then, and the upsert made again replaces it.
        for again in (replace, False):
            try:
                async with self.transaction() as conn:
                    old = None
                    if replace:
                        old = await conn.fetchrow(
                            "SELECT body, enabled, created_at, updated_at FROM orchestrator.schedules"
                            " WHERE session_id = $1 AND alias = $2 FOR UPDATE",
                            session_id,
                            alias,
                        )
                    row = await conn.fetchrow(
                        "INSERT INTO orchestrator.schedules (session_id, alias, schedule_id, body, enabled, made)"
                        f" VALUES ($1, $2, $3, $4, $5, false){upsert}"
                        f" RETURNING {_SCHEDULE_COLUMNS}, xmin::text AS version",
                        session_id,
                        alias,
                        schedule_id,
                        body,
                        enabled,
                    )
                    assert row is not None
                    replaced = None
                    if old is not None:
                        runs = await conn.fetch(
                            "DELETE FROM orchestrator.schedule_runs WHERE session_id = $1 AND alias = $2"
                            f" RETURNING {_RUN_COLUMNS}",
                            session_id,
                            alias,
                        )
                        replaced = Replaced(
                            old["body"], old["enabled"], old["created_at"], old["updated_at"], [tuple(r) for r in runs]
                        )
                return _schedule_json(row), str(row["version"]), replaced
            except asyncpg.UniqueViolationError:
                if not again:
                    raise CommandError(
                        "invalid_request", f"alias: session {session_id!r} already has a schedule {alias!r}"
                    ) from None
            except asyncpg.ForeignKeyViolationError:
                raise CommandError("not_found", f"session_id: no session {session_id!r}") from None
        raise AssertionError("the second attempt answers or raises")

    async def schedule_made(self, session_id: str, alias: str, version: str) -> bool:
        """The schedule's Temporal Schedule was made from the row at `version`: its row is made, if it is still at
        that version (False: written again since, or deleted)."""
        return bool(
            await self.pool.fetchval(
                "UPDATE orchestrator.schedules SET made = true WHERE session_id = $1 AND alias = $2"
                " AND xmin::text = $3 RETURNING true",
                session_id,
                alias,
                version,
            )
        )

    async def schedule_version(self, session_id: str, alias: str) -> tuple[dict[str, Any], str] | None:
        """The schedule's row and its version, or None."""
        row = await self.pool.fetchrow(
            f"SELECT {_SCHEDULE_COLUMNS}, xmin::text AS version FROM orchestrator.schedules"
            " WHERE session_id = $1 AND alias = $2",
            session_id,
            alias,
        )
        return None if row is None else (_schedule_json(row), str(row["version"]))

    async def put_back_schedule(
        self, session_id: str, alias: str, version: str, replaced: Replaced
    ) -> tuple[dict[str, Any], str] | None:
        """Put back what the replace written at `version` took away, unless the row was written since: the row as
        it was, not made (so its clock is brought to it again), and its firings' records. Answers the row and its
        version, or None."""
        async with self.transaction() as conn:
            row = await conn.fetchrow(
                "UPDATE orchestrator.schedules SET body = $4, enabled = $5, made = false, created_at = $6,"
                " updated_at = $7 WHERE session_id = $1 AND alias = $2 AND xmin::text = $3"
                f" RETURNING {_SCHEDULE_COLUMNS}, xmin::text AS version",
                session_id,
                alias,
                version,
                replaced.body,
                replaced.enabled,
                replaced.created_at,
                replaced.updated_at,
            )
            if row is None:
                return None
            await conn.executemany(
                f"INSERT INTO orchestrator.schedule_runs (session_id, alias, {_RUN_COLUMNS})"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (session_id, alias, scheduled_at) DO NOTHING",
                [(session_id, alias, *run) for run in replaced.runs],
            )
        return _schedule_json(row), str(row["version"])

    async def forget_schedule(self, session_id: str, alias: str, version: str) -> bool:
        """Delete the row written at `version` whose Temporal Schedule could not be made, unless written since;
        whether it was deleted."""
        return bool(
            await self.pool.fetchval(
                "DELETE FROM orchestrator.schedules WHERE session_id = $1 AND alias = $2 AND xmin::text = $3"
                " RETURNING true",
                session_id,
                alias,
                version,
            )
        )

    async def unmade_schedules(self, older_than_seconds: float, limit: int = 50) -> list[tuple[dict[str, Any], str]]:
        """Schedules written longer ago than `older_than_seconds` whose Temporal Schedule was never made, each with
        its version."""
        rows = await self.pool.fetch(
            f"SELECT {_SCHEDULE_COLUMNS}, xmin::text AS version FROM orchestrator.schedules WHERE NOT made"
            " AND created_at < clock_timestamp() - make_interval(secs => $1) ORDER BY created_at LIMIT $2",
            older_than_seconds,
            limit,
        )
        return [(_schedule_json(r), str(r["version"])) for r in rows]

    async def session_by_alias(self, alias: str) -> str | None:
        """The id of the session at `alias` (an app's declared schedules name their session so)."""
        found = await self.pool.fetchval(
            "SELECT id FROM orchestrator.sessions WHERE alias = $1 AND status <> 'deleting'", alias
        )
        return None if found is None else str(found)

    async def find_schedule(self, session_id: str, alias: str) -> dict[str, Any] | None:
        row = await self.pool.fetchrow(
            f"SELECT {_SCHEDULE_COLUMNS} FROM orchestrator.schedules WHERE session_id = $1 AND alias = $2",
            session_id,
            alias,
        )
        return None if row is None else _schedule_json(row)

    async def get_schedule(self, session_id: str, alias: str) -> dict[str, Any]:
        found = await self.find_schedule(session_id, alias)
        if found is None:
            raise _missing(session_id, alias)
        return found

    async def list_schedules(self, session_id: str) -> list[dict[str, Any]]:
        rows = await self.pool.fetch(
            f"SELECT {_SCHEDULE_COLUMNS} FROM orchestrator.schedules WHERE session_id = $1 ORDER BY alias", session_id
        )
        return [_schedule_json(r) for r in rows]

    async def update_schedule(self, session_id: str, alias: str, body: dict[str, Any], enabled: bool) -> dict[str, Any]:
        row = await self.pool.fetchrow(
            "UPDATE orchestrator.schedules SET body = $3, enabled = $4, updated_at = clock_timestamp()"
            f" WHERE session_id = $1 AND alias = $2 RETURNING {_SCHEDULE_COLUMNS}",
            session_id,
            alias,
            body,
            enabled,
        )
        if row is None:
            raise _missing(session_id, alias)
        return _schedule_json(row)

    async def delete_schedule(self, session_id: str, alias: str) -> dict[str, Any]:
        """Remove the schedule and its runs' records."""
        async with self.transaction() as conn:
            row = await conn.fetchrow(
                "DELETE FROM orchestrator.schedules WHERE session_id = $1 AND alias = $2 RETURNING"
                f" {_SCHEDULE_COLUMNS}",
                session_id,
                alias,
            )
            if row is None:
                raise _missing(session_id, alias)
            await conn.execute(
                "DELETE FROM orchestrator.schedule_runs WHERE session_id = $1 AND alias = $2", session_id, alias
            )
        return _schedule_json(row)

    async def record_schedule_run(
        self,
        session_id: str,
        alias: str,
        scheduled_at: datetime,
        status: str,
        message: str | None = None,
        event_id: int | None = None,
        execution_id: str | None = None,
    ) -> bool:
        """Keep a firing's result once per scheduled time, while the schedule exists; True if kept now."""
        kept = await self.pool.fetchval(
            "INSERT INTO orchestrator.schedule_runs (session_id, alias, scheduled_at, status, message, event_id,"
            " execution_id)"
            " SELECT $1, $2, $3, $4, $5, $6, $7"
            " WHERE EXISTS (SELECT 1 FROM orchestrator.schedules WHERE session_id = $1 AND alias = $2)"
            " ON CONFLICT (session_id, alias, scheduled_at) DO NOTHING RETURNING id",
            session_id,
            alias,
            scheduled_at,
            status,
            message,
            event_id,
            execution_id,
        )
        return kept is not None

    async def list_schedule_runs(self, session_id: str, alias: str, limit: int = RECENT_RUNS) -> list[dict[str, Any]]:
        """The schedule's most recent runs, oldest first."""
        await self.get_schedule(session_id, alias)
        rows = await self.pool.fetch(
            "SELECT scheduled_at, status, message, event_id, execution_id, created_at FROM ("
            " SELECT * FROM orchestrator.schedule_runs WHERE session_id = $1 AND alias = $2 ORDER BY id DESC LIMIT $3"
            ") recent ORDER BY scheduled_at, id",
            session_id,
            alias,
            limit,
        )
        return [
            {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in dict(r).items() if v is not None}
            for r in rows
        ]
