"""A router's listening connection: the wake-up shards it holds and listens on (`core/wake_shards.py`).

The connection is the router's own, to the direct URL (LISTEN and session-level advisory locks need one: behind
a transaction pooler, `database_direct_url`). On it the router holds a shared lock that counts it among the
deployment's routers, and one lock per shard it holds, so that a router that dies, or whose connection drops,
frees its shards for the others' next turn at once. It also listens on the channel of the releases before the
shards (`LEGACY_CHANNEL`), which nothing notifies once the upgrade is done.
"""

from __future__ import annotations

import asyncio

import asyncpg

from orchestrator.core.wake_shards import SHARDS, channel, lock_space, presence_space, rebalance
from orchestrator.store.connection import LISTENING_STATEMENT_SECONDS as STATEMENT_SECONDS
from orchestrator.store.connection import Notify, listening_connection

# The routers of this deployment: those holding its presence lock, in this database.
_ROUTERS = (
    "SELECT count(*)::integer FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND classid = $1::bigint::oid AND objid = 0"
)
# Free shards, up to $3, taken as they are found (the scan stops at the limit). A held shard is never tried:
# the try-lock would take it once more (advisory locks count), and one give-back would then leave it locked.
# The CASE keeps the order; PostgreSQL orders plain AND-ed conditions by their cost, not as written.
_TAKE = (
    "SELECT s FROM generate_series(0, $4::integer - 1) s"
    " WHERE CASE WHEN s = ANY($2::integer[]) THEN false ELSE pg_try_advisory_lock($1, s) END LIMIT $3"
)
_GIVE_BACK = "SELECT bool_and(pg_advisory_unlock($1, s)) FROM unnest($2::integer[]) s"


class ShardListener:
    def __init__(self, conn: asyncpg.Connection, schema: str, on_notify: Notify) -> None:
        self.conn = conn
        self.space = lock_space(schema)
        self.presence = presence_space(schema)
        self.on_notify = on_notify
        self.held: set[int] = set()

    @classmethod
    async def open(cls, database_url: str, schema: str, on_notify: Notify) -> ShardListener:
        """Connected, counted among the routers, and holding the free shards up to its fair share."""
        conn = await listening_connection(database_url, on_notify)
        try:
            listener = cls(conn, schema, on_notify)
            await conn.execute("SELECT pg_advisory_lock_shared($1, 0)", listener.presence, timeout=STATEMENT_SECONDS)
            await listener.balance()
        except BaseException:
            conn.terminate()  # needs no await: a cancellation cannot leave it open
            raise
        return listener

    def is_closed(self) -> bool:
        return self.conn.is_closed()

    async def routers(self) -> int:
        """How many routers of this deployment listen in this database (each holds the presence lock)."""
        return int(await self.conn.fetchval(_ROUTERS, self.presence, timeout=STATEMENT_SECONDS))

    async def balance(self) -> list[int]:
        """Gives back the shards beyond its fair share, or takes free ones up to it; answers those it took (their
        sessions' notifications before now went to nobody: the caller looks at their sessions behind).

        Raises:
            RuntimeError: a shard it gave back was not locked by this connection (its locks are not what it
                thinks: the caller drops the connection, and with it every lock it holds).
        """
        share = rebalance(len(self.held), await self.routers())
        if share.give_back:
            gone = sorted(self.held)[-share.give_back :]
            for shard in gone:
                async with asyncio.timeout(STATEMENT_SECONDS):
                    await self.conn.remove_listener(channel(shard), self.on_notify)
            self.held.difference_update(gone)
            if not await self.conn.fetchval(_GIVE_BACK, self.space, gone, timeout=STATEMENT_SECONDS):
                raise RuntimeError(f"wake-up shards {gone} were not this connection's to give back")
            return []
        if not share.take:
            return []
        free = await self.conn.fetch(
            _TAKE, self.space, sorted(self.held), share.take, SHARDS, timeout=STATEMENT_SECONDS
        )
        taken = [int(r[0]) for r in free]
        for shard in taken:
            # Listening after the lock: what was sent before is what the caller's look at the sessions behind finds.
            async with asyncio.timeout(STATEMENT_SECONDS):
                await self.conn.add_listener(channel(shard), self.on_notify)
            self.held.add(shard)
        return taken

    def terminate(self) -> None:
        """Closed at once, its locks freed with it (a connection the server left half open would keep them)."""
        self.conn.terminate()

    async def close(self) -> None:
        await self.conn.close()
