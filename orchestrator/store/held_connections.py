"""The pool connections one piece of work took (a command at the HTTP door), so that it can be cut loose from a
database that stopped answering.

Owns the noting (the pool's `setup` hook notes each connection it hands out to the task whose connections are held,
that task's alone) and the closing. A cancelled statement on a database that answers nothing never ends: asyncpg sends
the cancel on a new connection, which that database never answers either, and the pool waits for the cancel before
it takes the connection back, so the cancelled work waits too, holding a connection of the pool. Closing the
connection (`terminate`: the socket dropped, nothing sent) ends both at once, and the pool opens a new one when
next asked. What the work does with the database is its own; when to cut it, the door's (`door/deadlines.py`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

# The tasks whose connections are held, while they run. By task, not by a context variable: a task copies the
# context of the one that starts it, so a task a command started (to run on after it, say) would have its
# connections noted as the command's, and closed under it when the command is late.
_HELD: dict[asyncio.Task[Any], HeldConnections] = {}


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


def holding(held: HeldConnections, task: asyncio.Task[Any]) -> None:
    """Note in `held` every connection the pool lends to `task` itself until it ends (not to a task it starts: that
    one's connections are its own). Called before `task` first runs, as soon as it is made."""
    _HELD[task] = held
    task.add_done_callback(_ended)


def _ended(task: asyncio.Task[Any]) -> None:
    _HELD.pop(task, None)


async def note_lent(conn: Any) -> None:
    """The pool's `setup`: run as it lends `conn`, in the borrowing task."""
    if not _HELD:
        return  # no work's connections held: not even the task asked for (Python 3.11's `current_task`: 0.3 us)
    task = asyncio.current_task()
    held = _HELD.get(task) if task is not None else None
    if held is not None:
        held.note(conn)
