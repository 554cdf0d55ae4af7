"""A router's listening connection: the wake-up shards it holds and listens on (`core/wake_shards.py`).

The connection is the router's own, to the direct URL (LISTEN and session-level advisory locks need one). On it
the router holds a shared lock that counts it among the deployment's routers, and one lock per shard it holds,
so that a router that dies, or whose connection drops, frees its shards for the others' next turn at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import asyncpg

from orchestrator.core.wake_shards import PRESENCE, SHARDS, channel, lock_space, rebalance

# The routers of this deployment: those holding its presence lock, in this database.
_ROUTERS = (
    "SELECT count(*)::integer FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND classid = $1::bigint::oid AND objid = $2::bigint::oid"
)
# Free shards, up to $3, taken as they are found (a try-lock in the filter: the scan stops at the limit).
_TAKE = (
    "SELECT s FROM generate_series(0, $4::integer - 1) s"
    " WHERE s <> ALL($2::integer[]) AND pg_try_advisory_lock($1, s) LIMIT $3"
)
_GIVE_BACK = "SELECT pg_advisory_unlock($1, s) FROM unnest($2::integer[]) s"

# The most a statement on the listening connection may take: a connection left half open by the network would
# otherwise hold the router's loop for good. Past it the router drops the connection and connects again.
STATEMENT_SECONDS = 10.0
# A client gone without a word (a host lost, a network cut) is dropped by the server within about 30 s, and
# its shards with it: 15 s idle, then 3 probes 5 s apart (TCP connections only; a socket cannot be cut so).
_KEEPALIVE = "SET tcp_keepalives_idle = 15; SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3"

Notify = Callable[[Any, int, str, Any], None]


class ShardListener:
    def __init__(self, conn: asyncpg.Connection, space: int, on_notify: Notify) -> None:
        self.conn = conn
        self.space = space
        self.on_notify = on_notify
        self.held: set[int] = set()

    @classmethod
    async def open(cls, database_url: str, schema: str, on_notify: Notify) -> ShardListener:
        """Connected, counted among the routers, and holding the free shards up to its fair share."""
        conn = await asyncpg.connect(database_url)
        try:
            listener = cls(conn, lock_space(schema), on_notify)
            await conn.execute(_KEEPALIVE, timeout=STATEMENT_SECONDS)
            await conn.execute(
                "SELECT pg_advisory_lock_shared($1, $2)", listener.space, PRESENCE, timeout=STATEMENT_SECONDS
            )
            await listener.balance()
        except BaseException:
            conn.terminate()  # needs no await: a cancellation cannot leave it open
            raise
        return listener

    def is_closed(self) -> bool:
        return self.conn.is_closed()

    async def balance(self) -> bool:
        """Gives back the shards beyond its fair share, or takes free ones up to it; whether it took any (their
        sessions' notifications before now went to nobody, so the caller looks at the sessions behind)."""
        routers = int(await self.conn.fetchval(_ROUTERS, self.space, PRESENCE, timeout=STATEMENT_SECONDS))
        share = rebalance(len(self.held), routers)
        if share.give_back:
            gone = sorted(self.held)[-share.give_back :]
            for shard in gone:
                await asyncio.wait_for(self.conn.remove_listener(channel(shard), self.on_notify), STATEMENT_SECONDS)
            await self.conn.execute(_GIVE_BACK, self.space, gone, timeout=STATEMENT_SECONDS)
            self.held.difference_update(gone)
            return False
        if not share.take:
            return False
        free = await self.conn.fetch(
            _TAKE, self.space, sorted(self.held), share.take, SHARDS, timeout=STATEMENT_SECONDS
        )
        taken = [int(r[0]) for r in free]
        for shard in taken:
            # Listening after the lock: what was sent before is what the caller's look at the sessions behind finds.
            await asyncio.wait_for(self.conn.add_listener(channel(shard), self.on_notify), STATEMENT_SECONDS)
            self.held.add(shard)
        return bool(taken)

    def terminate(self) -> None:
        """Closed at once, its locks freed with it (a connection the server left half open would keep them)."""
        self.conn.terminate()

    async def close(self) -> None:
        await self.conn.close()
