"""The connection type statements run on (a plain connection or one borrowed from the pool), and the errors that
say the database is away."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias
from urllib.parse import parse_qs, urlsplit

import asyncpg

from orchestrator.core.wake_shards import LEGACY_CHANNEL

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Connection: TypeAlias = asyncpg.Connection[Any] | PoolConnectionProxy[Any]
else:
    Connection = Any


# Errors that say only that the database is out of reach for now: a retry on a new connection may cure them.
# `InternalClientError` is a connection a server's death left mid-protocol ("cannot switch to state 11;
# another operation (2) is in progress"); the pool drops it when its reset fails, so the next try gets a new
# one.
DATABASE_AWAY: tuple[type[BaseException], ...] = (
    OSError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
)
# What a command is answered `unavailable` for (a try later may pass): the database out of reach, or stopping or
# restarting under the statement (its shutdown ends the connection's statement).
DATABASE_UNAVAILABLE: tuple[type[BaseException], ...] = (
    *DATABASE_AWAY,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
)
# What a loop that goes on (the router, retention) waits out as the database's trouble: away, or refusing.
DATABASE_TROUBLE: tuple[type[BaseException], ...] = (*DATABASE_AWAY, asyncpg.PostgresError)


class OutageWithoutTraceback(logging.Filter):
    """asyncpg's pool refills its floor in the background and logs each failed connect with a traceback (at
    1, 2, 4 ... 60 s while the database is away); one that failed because the database is away is one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        err = record.exc_info[1] if record.exc_info else None
        if isinstance(err, DATABASE_UNAVAILABLE):
            record.msg = f"{record.getMessage()} ({type(err).__name__}: {err})"
            record.args, record.exc_info, record.exc_text = None, None, None
        return True


QUIET_POOL = OutageWithoutTraceback()


def quiet_pool_outages() -> None:
    """Install `OutageWithoutTraceback` on asyncpg's pool logger (once, however often called)."""
    logging.getLogger("asyncpg.pool").addFilter(QUIET_POOL)


class DatabaseUnreachable(Exception):
    """The database a URL names cannot be reached: the message names its host or socket and what to do."""


def database_place(url: str) -> str:
    """Where `url` points, as a person finds it: `socket DIR/.s.PGSQL.PORT` or `host HOST:PORT`."""
    parts = urlsplit(url)
    port = parts.port or 5432
    host = (parse_qs(parts.query).get("host") or [parts.hostname or "localhost"])[0]
    if host.startswith("/"):
        return f"socket {host.rstrip('/')}/.s.PGSQL.{port}"
    return f"host {host}:{port}"


class DatabaseUrlInvalid(Exception):
    """The database URL is not one PostgreSQL's client can use (no `postgresql://`, an option it does not know): bad
    configuration that no retry cures, unlike `DatabaseUnreachable`. The message never shows the URL (it may hold a
    password)."""


def unreachable(url: str, err: BaseException) -> DatabaseUnreachable | DatabaseUrlInvalid:
    """What a failed connect to `url` raises: `DatabaseUrlInvalid` when asyncpg could not read the URL (its
    `ClientConfigurationError`, which is an `InterfaceError` and so in `DATABASE_AWAY`), else `DatabaseUnreachable`."""
    if isinstance(err, asyncpg.ClientConfigurationError):
        return DatabaseUrlInvalid(
            f"database_url: not a URL PostgreSQL's client can use ({err}): it takes"
            " postgresql://USER:PASSWORD@HOST:PORT/DATABASE"
        )
    return DatabaseUnreachable(
        f"database_url: cannot reach PostgreSQL at the {database_place(url)} ({err}): start the database it names,"
        " or point ORCHESTRATOR_DATABASE_URL at one that runs (`orchestrator dev` with it unset runs a database of"
        " its own)"
    )


# A listening connection (a router's, a stream hub's) is held for hours and mostly idle, so what the network does
# to it goes unseen: a statement on it answers within this or the connection is dropped and made again, and the
# server drops a client gone without a word within about 30 s (15 s idle, then 3 probes 5 s apart; TCP only),
# freeing the advisory locks it held.
LISTENING_STATEMENT_SECONDS = 10.0
LISTENING_KEEPALIVE = "SET tcp_keepalives_idle = 15; SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3"

# What a listening connection calls with each notification: (connection, server pid, channel, payload).
Notify: TypeAlias = Callable[[Any, int, str, Any], None]


async def listening_connection(database_url: str, on_notify: Notify) -> asyncpg.Connection[Any]:
    """A new connection to LISTEN on: its keepalives set, and listening on the releases' before channel
    (`LEGACY_CHANNEL`: during a rolling upgrade a process of the earlier release sets the writers' function bodies
    back to notifying there). The caller listens on its shards' channels."""
    conn = await asyncpg.connect(database_url, timeout=LISTENING_STATEMENT_SECONDS)
    try:
        await conn.execute(LISTENING_KEEPALIVE, timeout=LISTENING_STATEMENT_SECONDS)
        async with asyncio.timeout(LISTENING_STATEMENT_SECONDS):
            await conn.add_listener(LEGACY_CHANNEL, on_notify)
    except BaseException:
        conn.terminate()  # needs no await: a cancellation cannot leave it open
        raise
    return conn
