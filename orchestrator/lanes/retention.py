"""Retention in the workers: trimming what each session keeps and deleting sessions, Temporal's side included.

Owns when the store's retention statements run (`store/retention_records.py`, 0003_retention.sql). Each
worker runs one loop (`Retention.run`) beside its router: every `round_seconds` it takes the sessions due
(SKIP LOCKED, under a lease, so the work spreads over the workers as routing does) and deletes in statements
of at most `rows_per_statement` rows, for at most `ROUND_SECONDS` before it lets the next round go on. A
session to delete (`delete_session`, or closed past its retention) is marked first, so it answers not_found
from then on; its Temporal side is ended (lanes and running runs terminated, schedules deleted) before its
rows go, a table at a time, its own row last, so a worker that dies halfway leaves it for the next.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.config import Settings
from orchestrator.core.errors import CommandError
from orchestrator.core.outages import Outage
from orchestrator.crossings import crossing
from orchestrator.lanes.executions import SESSION_DELETED
from orchestrator.store.connection import DATABASE_TROUBLE
from orchestrator.store.engine_records import EngineRecords
from orchestrator.telemetry import METRICS, log_fields

log = logging.getLogger(__name__)

# Sessions one worker takes at a time (again while its round has time left), and how long it holds them: a
# worker that dies with one leaves it to another after the lease.
ROUND_SESSIONS = 20
LEASE_SECONDS = 60.0
# How long one round (or one `delete_session`) deletes before it lets go: the rest is the next round's.
ROUND_SECONDS = 2.0
# Temporal calls in flight at once while a session's workflows are ended.
TEMPORAL_CALLS = 16
# A round that meets these is tried again next round, with a warning (anything else is logged whole).
ROUND_TROUBLE: tuple[type[BaseException], ...] = (*DATABASE_TROUBLE, RPCError)


class Retention:
    """One worker's share of retention: `run` until cancelled; `delete` for `delete_session`."""

    def __init__(self, store: EngineRecords, temporal: Client | None, settings: Settings) -> None:
        self.store = store
        self.temporal = temporal
        self.settings = settings
        # Rows this process deleted, by table (for benchmarks and tests).
        self.deleted: dict[str, int] = {}

    async def run(self) -> None:
        # The database away: said when it starts, once a minute while it lasts and when it ends, not every round
        # (a round reads the database first, so one that went through ends it). Temporal out of reach fails only
        # the session a round was purging, leased for a minute: said as it comes, about once a minute.
        outage = Outage()
        while True:
            try:
                await self.round()
                if (lasted := outage.ended(time.monotonic())) is not None:
                    log.warning("retention rounds reach the database again, after %.0f s", lasted)
            except DATABASE_TROUBLE as err:
                if (lasted := outage.failed(time.monotonic())) is not None:
                    late = f" for {lasted:.0f} s" if lasted else ""
                    log.warning("a retention round failed%s (%s); trying again next round", late, err)
            except ROUND_TROUBLE as err:
                log.warning("a retention round failed (%s); trying again next round", err)
            except Exception:
                # Never the worker's end: what a round leaves is the next round's (its sessions' leases run out).
                log.exception("a retention round failed; trying again next round")
            await asyncio.sleep(self.settings.retention.round_seconds)

    async def round(self) -> int:
        """Take the sessions due and do what each needs; answer the rows deleted."""
        retention = self.settings.retention
        deadline = time.monotonic() + ROUND_SECONDS
        deleted = 0
        while time.monotonic() < deadline:
            due = await self.store.retention_due(ROUND_SESSIONS, LEASE_SECONDS, retention.closed_session_seconds)
            for session_id, action in due:
                if time.monotonic() >= deadline:
                    await self.store.release_retention(session_id)  # not looked at: the next round's
                    continue
                if action == "purge":
                    await self.store.mark_deleting(session_id, retention.closed_session_seconds)
                    done, rows = await self.purge(session_id, deadline)
                    if done:
                        log.info("session %s deleted (%d rows)", session_id, rows, extra=log_fields(session_id))
                else:
                    rows = await self.trim(session_id, deadline)
                deleted += rows
            if len(due) < ROUND_SESSIONS:
                break
        age = await self.store.oldest_event_age()
        if age is not None:
            METRICS.retention_oldest.set(age)
        return deleted

    async def trim(self, session_id: str, deadline: float) -> int:
        """Trim statements for one session until it has nothing more to delete now, or the round's time is up."""
        retention = self.settings.retention
        deleted = 0
        while True:
            found = await self.store.trim_session(
                session_id, retention.rows_per_statement, retention.event_seconds, retention.closed_session_seconds
            )
            if found is None:
                return deleted
            for table, rows in found["deleted"].items():
                deleted += self._count(table, int(rows))
            if not found["more"] or time.monotonic() >= deadline:
                return deleted

    async def purge(self, session_id: str, deadline: float | None) -> tuple[bool, int]:
        """End a deleting session's workflows, then delete its rows until it is gone or `deadline` (monotonic)
        passes; answer whether it is gone, and the rows deleted."""
        if self.temporal is None:
            return False, 0  # a door without Temporal: a worker ends its workflows
        crossing("session.marked")
        await end_workflows(self.temporal, await self.store.session_workflows(session_id))
        crossing("session.ended_on_temporal")
        deleted = 0
        while True:
            step = await self.store.purge_step(session_id, self.settings.retention.rows_per_statement)
            deleted += self._count(str(step.get("table", "")), int(step.get("deleted") or 0))
            if step["done"] or not step.get("table"):
                return bool(step["done"]), deleted
            if deadline is not None and time.monotonic() >= deadline:
                await self.store.release_retention(session_id)
                return False, deleted

    async def delete(self, session_id: str, seconds: float = ROUND_SECONDS * 5) -> tuple[bool, int]:
        """`delete_session`: mark it (not_found from now on), then delete it for at most `seconds`; what is left
        is the workers'. Raises not_found for a session that is not there (or being deleted already)."""
        if not await self.store.mark_deleting(session_id):
            raise CommandError("not_found", f"session_id: no session {session_id!r}")
        return await self.purge(session_id, time.monotonic() + seconds)

    def _count(self, table: str, rows: int) -> int:
        if rows and table:
            self.deleted[table] = self.deleted.get(table, 0) + rows
            METRICS.retention_deleted.add(rows, {"table": table})
        return rows


async def end_workflows(temporal: Client, held: dict[str, list[str]]) -> None:
    """Terminate a session's lanes and running runs and delete its schedules (what is gone already is fine);
    raises when Temporal cannot be reached, so that the session's rows stay until it can."""
    gate = asyncio.Semaphore(TEMPORAL_CALLS)

    async def quietly(call: Callable[[], Awaitable[Any]]) -> None:
        async with gate:
            try:
                await call()
            except RPCError as err:
                if err.status != RPCStatusCode.NOT_FOUND:
                    raise

    calls: list[Callable[[], Awaitable[Any]]] = [
        *(_deleting(temporal, schedule_id) for schedule_id in held.get("schedules", [])),
        *(_terminating(temporal, workflow_id) for workflow_id in [*held.get("runs", []), *held.get("lanes", [])]),
    ]
    await asyncio.gather(*(quietly(call) for call in calls))


def _deleting(temporal: Client, schedule_id: str) -> Callable[[], Awaitable[Any]]:
    return lambda: temporal.get_schedule_handle(schedule_id).delete()


def _terminating(temporal: Client, workflow_id: str) -> Callable[[], Awaitable[Any]]:
    return lambda: temporal.get_workflow_handle(workflow_id).terminate(reason=SESSION_DELETED)
