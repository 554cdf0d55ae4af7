"""A lane store with the little world around it, on PostgreSQL or in memory, in one shape for both.

The contract suite (tests/store/test_lane_store_contract.py), the lane machine (tests/engine/lane_machine.py) and
the crossing faults (tests/engine/crossing_world.py) set a world up (sessions, listeners, writes, pauses,
replays asked for), drive the store's verbs through the real driver, move the world's clock on, and read back
what the store holds (`Held`: lanes, batches, slots, runs, events) to check their promises. `MemoryWorld` is
the in-memory twin; `PgWorld` is a migrated database behind the platform's own commands and `PgLaneStore`.

PostgreSQL's clock is the database's, which a test cannot set: `PgWorld.advance` moves the world on by moving
every time the database holds into the past by as much (`_shift_times`), so what was due is due and what
waited has waited. A world's `now` is its own clock: the wall clock plus every advance so far, and the times a
`Held` reports are on it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import asyncpg

from orchestrator.config import Settings
from orchestrator.core.declaration import ListenerDeclaration
from orchestrator.core.lane_keys import lane_workflow_id
from orchestrator.core.lane_snapshot import LaneAddress
from orchestrator.core.limits import Limits
from orchestrator.core.routing import route, versions_by_name
from orchestrator.lanes.executions import ExecutionRecords
from orchestrator.platform import Platform
from orchestrator.store.lane_store import LaneStore, RoutedPage
from orchestrator.store.lanes_memory import MemoryLaneStore
from tests.databases import Databases


@dataclass(frozen=True)
class LaneRow:
    id: int
    session_id: str
    listener: str
    lane: str
    workflow_id: str
    routed_through: int
    fired_through: int
    # The lane's queue rows: the event ids it holds.
    queue: frozenset[int]

    @property
    def address(self) -> LaneAddress:
        return LaneAddress(self.session_id, self.listener, self.lane, self.workflow_id)


@dataclass(frozen=True)
class BatchRow:
    id: int
    lane_id: int
    first_id: int
    last_id: int
    event_ids: tuple[int, ...]
    retry: int
    replay: int
    state: str
    counted: bool
    created_at: float
    run_key: str | None
    verdict: dict[str, Any] | None

    @property
    def own(self) -> bool:
        """The lane's own batch: neither a repeat nor a replay."""
        return self.retry == 0 and self.replay == 0


@dataclass(frozen=True)
class RunRow:
    """A run slot held: by a run in flight, or by a failed run whose repeat is due at `due_at`."""

    run_key: str
    lane_id: int
    batch_id: int
    execution_id: str
    retry: int
    due_at: float | None


@dataclass(frozen=True)
class ExecutionRow:
    id: str
    status: str
    error: str | None
    listener: str | None
    run_key: str | None
    batch: dict[str, Any] | None


@dataclass(frozen=True)
class EventRow:
    id: int
    type: str
    committed: float
    # An execution event's execution id.
    execution_id: str | None


@dataclass
class Held:
    """What a world's store holds, read at once."""

    lanes: dict[int, LaneRow] = field(default_factory=dict)
    batches: dict[int, BatchRow] = field(default_factory=dict)
    runs: dict[str, RunRow] = field(default_factory=dict)
    # lane id -> whether it holds its key slot (False: queued for one).
    key_slots: dict[int, bool] = field(default_factory=dict)
    executions: dict[str, ExecutionRow] = field(default_factory=dict)
    events: dict[int, EventRow] = field(default_factory=dict)
    # (listener, batch key) -> the outcome's status.
    outcomes: dict[tuple[str, str], str] = field(default_factory=dict)
    replays: int = 0
    # Events of the world's sessions not yet routed.
    unrouted: int = 0
    # How often each run's slot was given back, by run key: once, or the store is wrong.
    released: Counter[str] = field(default_factory=Counter)

    def lane_of(self, listener: str, lane: str) -> LaneRow | None:
        return next((x for x in self.lanes.values() if (x.listener, x.lane) == (listener, lane)), None)

    def ended(self) -> Counter[str]:
        """How many `execution.ended` events each execution has."""
        return Counter(e.execution_id for e in self.events.values() if e.type == "execution.ended" and e.execution_id)


class LaneWorld(Protocol):
    lanes: LaneStore
    records: ExecutionRecords

    def now(self) -> float:
        """The world's clock: where its store's time stands."""
        ...

    async def advance(self, seconds: float) -> None:
        """Move the world's clock on."""
        ...

    async def open_session(self) -> str: ...
    async def close_session(self, session_id: str) -> None: ...
    async def mark_deleting(self, session_id: str) -> None: ...
    async def write(self, session_id: str, alias: str) -> int: ...
    async def save_listener(self, body: dict[str, Any], delay_seconds: float = 0.0) -> int:
        """Save a listener's version, in effect `delay_seconds` from now (the activation delay)."""
        ...

    async def delete_listener(self, name: str) -> None: ...
    async def switch(self, session_id: str, name: str, enabled: bool) -> None: ...
    async def pause(self, name: str) -> None: ...
    async def resume(self, name: str) -> None: ...
    async def ask_replay(self, lane_id: int, event_ids: Sequence[int], replay_of: int | None) -> None: ...
    async def versions(self) -> list[dict[str, Any]]:
        """Every version routing matches against (`PostgresStore.listener_versions`' rows)."""
        ...

    async def position(self, session_id: str) -> int:
        """The session's routing position: the last event a round read."""
        ...

    async def held(self) -> Held: ...
    async def queue_rows(self, where: LaneAddress) -> list[int]: ...
    async def backdate_nudges(self, seconds: float) -> None: ...
    async def backdate_oldest_fire(self, seconds: float) -> None: ...
    async def postdate_newest_fire(self, seconds: float) -> None: ...
    async def close(self) -> None: ...


async def route_round(
    world: LaneWorld, session_id: str, parallel_cap: int, limit: int = 1000
) -> tuple[RoutedPage, dict[tuple[str, str], list[int]]]:
    """One routing round, as the router runs it, and what it should have queued into each lane (listener, lane)
    by the core's `route` over the events it read; the lanes and their counts are checked against the round's
    own."""
    before = await world.position(session_id)
    routed = await world.lanes.route_page(session_id, limit, parallel_cap)
    if not routed.read:
        return routed, {}
    through = await world.position(session_id)
    envelopes = [
        e for e in await world.lanes.envelopes(range(before + 1, through + 1)) if e["session_id"] == session_id
    ]
    versions = versions_by_name(await world.versions())
    deliveries = route([(e, datetime.fromisoformat(e["created_at"])) for e in envelopes], versions)
    queued = {(d.listener, d.lane): [int(e["id"]) for e in d.events] for d in deliveries}
    assert len(envelopes) == routed.read, f"the round read {routed.read} events, {len(envelopes)} lie past it"
    assert sorted((k[0], k[1], len(v)) for k, v in queued.items()) == sorted(routed.lanes), (queued, routed.lanes)
    return routed, queued


def lane_address(session_id: str, listener: str, lane: str) -> LaneAddress:
    return LaneAddress(session_id, listener, lane, lane_workflow_id(session_id, listener, lane))


# -- in memory -------------------------------------------------------------------------------------------------


class MemoryWorld:
    """The in-memory twin. Its clock stands still between advances (`frozen_at`), or runs with the wall clock
    as PostgreSQL's does."""

    def __init__(self, frozen_at: float | None = None) -> None:
        self._frozen = frozen_at is not None
        self._t = frozen_at if frozen_at is not None else 0.0
        self.store = MemoryLaneStore(self.now)
        self.lanes: LaneStore = self.store
        self.records: ExecutionRecords = self.store
        self.sessions = 0

    def now(self) -> float:
        return self._t if self._frozen else time.time() + self._t

    async def advance(self, seconds: float) -> None:
        self._t += seconds

    async def open_session(self) -> str:
        self.sessions += 1
        session_id = f"ses_{self.sessions}"
        self.store.open_session(session_id)
        return session_id

    async def close_session(self, session_id: str) -> None:
        self.store.close_session(session_id)

    async def mark_deleting(self, session_id: str) -> None:
        self.store.sessions[session_id]["status"] = "deleting"

    async def write(self, session_id: str, alias: str) -> int:
        return self.store.append(session_id, "object.written", alias=alias, data={"rev": 1})

    async def save_listener(self, body: dict[str, Any], delay_seconds: float = 0.0) -> int:
        return self.store.save_listener(body, effective_at=self.now() + delay_seconds)

    async def delete_listener(self, name: str) -> None:
        self.store.delete_listener(name)

    async def switch(self, session_id: str, name: str, enabled: bool) -> None:
        if enabled:
            self.store.switched_off.discard((session_id, name))
        else:
            self.store.switched_off.add((session_id, name))

    async def pause(self, name: str) -> None:
        self.store.pauses.add((name, None))

    async def resume(self, name: str) -> None:
        self.store.pauses.discard((name, None))

    async def ask_replay(self, lane_id: int, event_ids: Sequence[int], replay_of: int | None) -> None:
        self.store.ask_replay(lane_id, tuple(event_ids), replay_of)

    async def versions(self) -> list[dict[str, Any]]:
        return [
            {"name": name, "version": v, "effective_at": datetime.fromtimestamp(at, UTC).isoformat(), "body": body}
            for name, versions in sorted(self.store.listeners.items())
            for v, at, body in versions
        ]

    async def position(self, session_id: str) -> int:
        return self.store.cursors.get(session_id, 0)

    async def held(self) -> Held:
        s = self.store
        return Held(
            lanes={
                x.id: LaneRow(
                    x.id,
                    x.session_id,
                    x.listener,
                    x.lane,
                    x.workflow_id,
                    x.routed_through,
                    x.fired_through,
                    frozenset(x.queue),
                )
                for x in s.lanes.values()
            },
            batches={
                b.id: BatchRow(
                    b.id,
                    b.lane_id,
                    b.first_id,
                    b.last_id,
                    b.event_ids,
                    b.retry,
                    b.replay,
                    b.state,
                    b.counted,
                    b.created_at,
                    b.run_key,
                    b.verdict,
                )
                for b in s.batches.values()
            },
            runs={
                r.run_key: RunRow(r.run_key, r.lane_id, r.batch_id, r.execution_id, r.retry, r.due_at)
                for r in s.runs.values()
            },
            key_slots={k.lane_id: k.holding for k in s.key_slots.values()},
            executions={
                x.id: ExecutionRow(x.id, x.status, x.error, x.listener, x.run_key, x.batch)
                for x in s.executions.values()
            },
            events={
                e.id: EventRow(e.id, e.envelope["type"], e.committed, (e.envelope.get("execution") or {}).get("id"))
                for e in s.events.values()
            },
            outcomes={(listener, key): str(o["status"]) for (_, listener, key), o in s.outcomes.items()},
            replays=len(s.replays),
            unrouted=sum(1 for e in s.events.values() if e.id > s.cursors.get(e.session_id, 0)),
            released=Counter(s.released),
        )

    async def queue_rows(self, where: LaneAddress) -> list[int]:
        lane = next(
            (
                x
                for x in self.store.lanes.values()
                if (x.session_id, x.listener, x.lane) == (where.session_id, where.listener, where.lane)
            ),
            None,
        )
        return [] if lane is None else sorted(lane.queue)

    async def backdate_nudges(self, seconds: float) -> None:
        for lane in self.store.lanes.values():
            lane.nudged_at -= seconds

    async def backdate_oldest_fire(self, seconds: float) -> None:
        oldest = min((b for b in self.store.batches.values() if b.counted), key=lambda b: b.id)
        oldest.created_at -= seconds

    async def postdate_newest_fire(self, seconds: float) -> None:
        newest = max((b for b in self.store.batches.values() if b.counted), key=lambda b: b.id)
        newest.created_at += seconds

    async def close(self) -> None:
        pass


# -- on PostgreSQL ---------------------------------------------------------------------------------------------


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
        await self.pool.execute("UPDATE sessions SET status = 'deleting' WHERE id = $1", session_id)

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
            "INSERT INTO replays (lane_id, event_ids, replay_of) VALUES ($1, $2, $3)",
            lane_id,
            list(event_ids),
            replay_of,
        )

    async def versions(self) -> list[dict[str, Any]]:
        return await self.platform.store.listener_versions()

    async def position(self, session_id: str) -> int:
        found = await self.pool.fetchval(
            "SELECT routed_event_id FROM routing_cursors WHERE session_id = $1", session_id
        )
        return int(found or 0)

    async def held(self) -> Held:
        at = self._advanced
        async with self.pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            lanes = await conn.fetch(
                "SELECT l.id, l.session_id, l.listener, l.lane, l.workflow_id, l.routed_through, l.fired_through,"
                " ARRAY(SELECT q.event_id FROM lane_events q WHERE q.lane_id = l.id) AS queue FROM lanes l"
            )
            batches = await conn.fetch(
                "SELECT id, lane_id, first_id, last_id, event_ids, retry, replay, state, counted,"
                " extract(epoch FROM created_at)::float8 AS created_at, run_key, verdict,"
                " released_at IS NOT NULL AS released FROM batches"
            )
            runs = await conn.fetch(
                "SELECT run_key, lane_id, batch_id, execution_id, retry, extract(epoch FROM due_at)::float8 AS due_at"
                " FROM lane_runs"
            )
            slots = await conn.fetch("SELECT lane_id, holding FROM key_slots")
            executions = await conn.fetch("SELECT id, status, error, listener, run_key, batch FROM executions")
            events = await conn.fetch(
                "SELECT id, type, extract(epoch FROM created_at)::float8 AS committed,"
                " execution ->> 'id' AS execution_id FROM events"
            )
            outcomes = await conn.fetch("SELECT listener, batch_key, status FROM outcomes")
            replays = await conn.fetchval("SELECT count(*) FROM replays")
            unrouted = await conn.fetchval(
                "SELECT count(*) FROM events e JOIN routing_cursors c ON c.session_id = e.session_id"
                " WHERE e.id > c.routed_event_id"
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
            "SELECT q.event_id FROM lane_events q JOIN lanes l ON l.id = q.lane_id"
            " WHERE l.session_id = $1 AND l.listener = $2 AND l.lane = $3 ORDER BY q.event_id",
            where.session_id,
            where.listener,
            where.lane,
        )
        return [int(r["event_id"]) for r in rows]

    async def backdate_nudges(self, seconds: float) -> None:
        await self.pool.execute("UPDATE lanes SET nudged_at = nudged_at - make_interval(secs => $1)", seconds)

    async def backdate_oldest_fire(self, seconds: float) -> None:
        await self.pool.execute(
            "UPDATE batches SET created_at = created_at - make_interval(secs => $1)"
            " WHERE id = (SELECT min(id) FROM batches WHERE counted)",
            seconds,
        )

    async def postdate_newest_fire(self, seconds: float) -> None:
        await self.pool.execute(
            "UPDATE batches SET created_at = created_at + make_interval(secs => $1)"
            " WHERE id = (SELECT max(id) FROM batches WHERE counted)",
            seconds,
        )


async def _shift_times(pool: asyncpg.Pool) -> str:
    """One statement that moves every time the platform's tables hold (`timestamptz` columns and arrays of them)
    `$seconds` into the past, triggers and foreign keys left out (a replica's role): the world's clock moved on."""
    rows = await pool.fetch(
        "SELECT c.relname AS table_name, a.attname AS column_name, t.typname = '_timestamptz' AS is_array"
        " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_type t ON t.oid = a.atttypid"
        " WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' AND a.attnum > 0"
        " AND NOT a.attisdropped AND t.typname IN ('timestamptz', '_timestamptz')"
        " AND c.relname <> 'schema_migrations' ORDER BY 1, 2"
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
    updates = "".join(f'UPDATE "{table}" SET {", ".join(sets)};' for table, sets in by_table.items())
    return f"DO $do$ BEGIN SET LOCAL session_replication_role = replica; {updates} END $do$"
