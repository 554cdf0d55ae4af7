"""The desk application's own side: its table, its migration, and writes to it in its own transactions.

`migrate` (the app's, `app.py` declares it) makes `public.tickets`; `orchestrator dev --app examples.desk.app`,
a worker and the testing kit run it before the app's capture is planned on the table.

    python -m examples.desk.tables create             # make public.tickets by hand (what `migrate` does)
    python -m examples.desk.tables write SESSION_ID   # a few tickets: created, escalated, one rolled back

Both read the database from ORCHESTRATOR_DATABASE_URL, as the application would read its own.
"""

from __future__ import annotations

import asyncio
import os
import sys

import asyncpg

from orchestrator.transactional import emit

TABLE = """
CREATE TABLE IF NOT EXISTS public.tickets (
    id             bigint PRIMARY KEY,
    session_id     text NOT NULL,
    title          text NOT NULL,
    priority       integer NOT NULL DEFAULT 3,
    internal_notes text
)
"""


async def create(conn: asyncpg.Connection) -> None:
    await conn.execute(TABLE)


async def migrate(database_url: str) -> None:
    """The app's migration: its table, made if missing (a real app would run Alembic or its framework's here)."""
    conn = await asyncpg.connect(database_url)
    try:
        await create(conn)
    finally:
        await conn.close()


async def write(conn: asyncpg.Connection, session_id: str) -> None:
    async with conn.transaction():
        await conn.execute(
            "INSERT INTO tickets (id, session_id, title, internal_notes) VALUES (1, $1, 'printer jammed', 'vip')"
            " ON CONFLICT (id) DO NOTHING",
            session_id,
        )
        await conn.execute(
            "INSERT INTO tickets (id, session_id, title) VALUES (2, $1, 'no coffee') ON CONFLICT (id) DO NOTHING",
            session_id,
        )
    # An escalation: the row's change and its event commit together, or neither does.
    async with conn.transaction():
        await conn.execute("UPDATE tickets SET priority = 1 WHERE id = 1")
        await emit(conn, session_id, "ticket.escalated", {"ticket": 1, "reason": "on fire"})
    # A change the application takes back: no event is left of it.
    try:
        async with conn.transaction():
            await conn.execute("UPDATE tickets SET title = 'never mind' WHERE id = 2")
            raise LookupError("rolled back")
    except LookupError:
        pass
    await conn.execute("DELETE FROM tickets WHERE id = 2")


async def main(argv: list[str]) -> int:
    url = os.environ.get("ORCHESTRATOR_DATABASE_URL")
    if not url or not argv or argv[0] not in ("create", "write") or (argv[0] == "write" and len(argv) != 2):
        sys.stderr.write(__doc__ or "")
        return 2
    conn = await asyncpg.connect(url)
    try:
        await (create(conn) if argv[0] == "create" else write(conn, argv[1]))
    finally:
        await conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
