"""The connection type statements run on: a plain connection or one borrowed from the pool."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    import asyncpg
    from asyncpg.pool import PoolConnectionProxy

    Connection: TypeAlias = asyncpg.Connection[Any] | PoolConnectionProxy[Any]
else:
    Connection = Any
