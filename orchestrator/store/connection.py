"""The connection type statements run on (a plain connection or one borrowed from the pool), and the errors that
say the database is away."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

import asyncpg

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
# What a loop that goes on (the router, retention) waits out as the database's trouble: away, or refusing.
DATABASE_TROUBLE: tuple[type[BaseException], ...] = (*DATABASE_AWAY, asyncpg.PostgresError)
