"""The listener versions compiled for routing, kept beside them (0007_routing.sql): written when a version is saved.

Owns the rows `orchestrator_route_page` reads: each version's rule (`core/rules.compile_rule`), its probes, and
the paths some version probes by. Derived data: a version saved before the rules existed is compiled by the
first process that opens the store (`compile_missing_rules`); a rule is written once, with its version.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from orchestrator.core.declaration import ListenerDeclaration
from orchestrator.core.rules import NO_EQ_PATH, compile_rule, split_path

Conn = asyncpg.Connection | PoolConnectionProxy


async def save_rule(conn: Conn, name: str, version: int, effective_at: datetime, body: Any) -> None:
    """Compile a version and write its rule and probes (in the caller's transaction), once; then every version of
    the listener hands over to the next at that one's `effective_at`."""
    rule = compile_rule(name, version, ListenerDeclaration.model_validate(body))
    written = await conn.fetchval(
        "INSERT INTO orchestrator.listener_rules (name, version, effective_at, type_res, alias_res, where_conds,"
        " key_root,"
        " key_rest, key_segments, distinct_root, distinct_rest, window_seconds, idle, slots, key_slots)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)"
        " ON CONFLICT (name, version) DO NOTHING RETURNING 1",
        name,
        version,
        effective_at,
        None if rule.type_res is None else list(rule.type_res),
        None if rule.alias_res is None else list(rule.alias_res),
        list(rule.where),
        rule.key_root,
        list(rule.key_rest),
        rule.key_segments,
        rule.distinct_root,
        list(rule.distinct_rest),
        rule.window_seconds,
        rule.idle,
        rule.slots,
        rule.key_slots,
    )
    if written is None:
        return
    if rule.throttle_runs is not None:
        # Its own statement, for a version with a throttle only: a version without one is written as before it
        # existed (0028_listener_throttle.sql).
        await conn.execute(
            "UPDATE orchestrator.listener_rules SET throttle_runs = $3, throttle_seconds = $4, throttle_root = $5,"
            " throttle_rest = $6 WHERE name = $1 AND version = $2",
            name,
            version,
            rule.throttle_runs,
            rule.throttle_seconds,
            rule.throttle_root,
            list(rule.throttle_rest),
        )
    # A version with no `eq` term probes with JSON null, which no event's value ever is (null reads as missing).
    probes = rule.probes
    await conn.execute(
        "INSERT INTO orchestrator.listener_probes (name, version, probe_key, type_head)"
        " SELECT DISTINCT $1::text, $2::integer, orchestrator.orchestrator_probe_key(a, p, v::jsonb), t"
        " FROM unnest($3::text[], $4::text[], $5::text[], $6::text[]) AS x(t, a, p, v)",
        name,
        version,
        [p.type_head for p in probes],
        [p.alias_head for p in probes],
        [p.eq_path for p in probes],
        # As JSON text: a list value would read as a dimension of the array.
        [json.dumps(p.eq_value) for p in probes],
    )
    paths = sorted({p.eq_path for p in probes if p.eq_path != NO_EQ_PATH})
    # Each path inserted even when there: the insert's table lock is what a pruning waits for (0025), so none of
    # these is pruned before these probes commit.
    for path in paths:
        root, rest = split_path(path)
        await conn.execute(
            "INSERT INTO orchestrator.listener_probe_paths (path, root, rest) VALUES ($1, $2, $3) ON CONFLICT (path)"
            " DO NOTHING",
            path,
            root,
            list(rest),
        )
    await conn.execute(
        "UPDATE orchestrator.listener_rules r SET effective_until = (SELECT min(w.effective_at) FROM"
        " orchestrator.listener_rules w"
        " WHERE w.name = r.name AND w.version > r.version) WHERE r.name = $1",
        name,
    )


async def compile_missing_rules(conn: asyncpg.Connection) -> int:
    """Compile every live version that has no rule yet (saved before rules were kept); answers how many. A deleted
    listener's versions, and those from before a listener's last deletion, route nothing: none is compiled."""
    rows = await conn.fetch(
        "SELECT v.name, v.version, v.effective_at, v.body FROM orchestrator.listener_versions v"
        " JOIN orchestrator.listeners l ON l.name = v.name AND l.deleted_at IS NULL"
        " LEFT JOIN orchestrator.listener_rules r ON r.name = v.name AND r.version = v.version"
        # A version whose rule its listener's deletion took (0025) has a later one with a rule.
        " WHERE r.name IS NULL AND NOT EXISTS (SELECT 1 FROM orchestrator.listener_rules w WHERE w.name = v.name"
        " AND w.version > v.version) ORDER BY v.name, v.version"
    )
    for row in rows:
        async with conn.transaction():
            await save_rule(conn, row["name"], row["version"], row["effective_at"], row["body"])
    return len(rows)


async def pruning_mark(pool: asyncpg.Pool) -> tuple[datetime, int]:
    """The time now, then a transaction id of its own, assigned after it: a transaction that wrote an event
    before the time had its id before (a writer's first step, the session's row lock, assigns it, and the
    event's `created_at` is read after), so its id is smaller. Costs one transaction id a mark."""
    now = await pool.fetchval("SELECT clock_timestamp()")
    xid = await pool.fetchval("SELECT pg_current_xact_id()::text::bigint")
    return now, int(xid)


async def transactions_ended_through(pool: asyncpg.Pool, xid: int) -> bool:
    """Whether every transaction with an id up to `xid` has ended (committed or rolled back): the oldest still
    running, if any, is younger."""
    return bool(await pool.fetchval("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint > $1", xid))


async def prune_superseded_probes(pool: asyncpg.Pool, before: datetime) -> int:
    """Drop the probes of versions that ended by `before` and before every event not yet routed (0026); `before`
    must be a time no event can still be committed from. Answers how many probes went."""
    return int(await pool.fetchval("SELECT orchestrator.orchestrator_prune_superseded_probes($1)", before))
