"""The pool connections one piece of work took (a command at the HTTP door), so that it can be cut loose from a
database that stopped answering.

Owns the noting (the pool's `setup` hook notes each connection it hands out to the work whose `HeldConnections`
is current) and the closing. A cancelled statement on a database that answers nothing never ends: asyncpg sends
the cancel on a new connection, which that database never answers either, and the pool waits for the cancel before
it takes the connection back, so the cancelled work waits too, holding a connection of the pool. Closing the
connection (`terminate`: the socket dropped, nothing sent) ends both at once, and the pool opens a new one when
next asked. What the work does with the database is its own; when to cut it, the door's (`door/deadlines.py`).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import asyncpg

_CURRENT: contextvars.ContextVar[HeldConnections | None] = contextvars.ContextVar(
    "orchestrator_held_connections", default=None
)


class HeldConnections:
    """The connections the work taken under `holding(self)` took, each as the pool lent it (a proxy that refuses
    every call once given back, so a connection that went back and on to other work is never touched)."""

    def __init__(self) -> None:
        self._lent: list[Any] = []

    @property
    def reached(self) -> bool:
        """Whether the work took any connection (else nothing of it reached the database)."""
        return bool(self._lent)

    def holds_one(self) -> bool:
        """Whether the work holds a connection now."""
        return any(_open_and_lent(conn) for conn in self._lent)

    def terminate(self) -> int:
        """Close every connection the work still holds, at once and without a word to the database: what it was
        waiting on fails, and the pool lets it go. Answers how many."""
        closed = 0
        for conn in self._lent:
            if _open_and_lent(conn):
                conn.terminate()
                closed += 1
        return closed

    def note(self, conn: Any) -> None:
        self._lent.append(conn)


def _open_and_lent(conn: Any) -> bool:
    try:
        return not conn.is_closed()  # any call of a connection given back to the pool is refused
    except asyncpg.InterfaceError:
        return False


@contextlib.contextmanager
def holding(held: HeldConnections) -> Iterator[None]:
    """Note in `held` every connection the pool lends to work started (or tasks created) inside this block."""
    token = _CURRENT.set(held)
    try:
        yield
    finally:
        _CURRENT.reset(token)


async def note_lent(conn: Any) -> None:
    """The pool's `setup`: run as it lends `conn`, in the borrowing task."""
    held = _CURRENT.get()
    if held is not None:
        held.note(conn)
