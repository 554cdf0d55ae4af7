"""A request's deadline at the HTTP door: the door answers within it whatever the database does.

Owns the wait and the cut. The work (the door's look at who calls, a command) runs as a task of its own while the
request waits for it at most its deadline; past that the request is answered at once (`Missed`, which the door turns
into `unavailable`: `core/command_deadlines.not_answered`) and the work is let go behind the answer: cancelled, which
on a database that answers stops its statement within a round trip, then, if it is still not done
`CANCEL_GRACE_SECONDS` later, its connections closed (`store/held_connections`): on a database that answers nothing
the cancel itself is never answered, and the pool would hold the connection, and the work, until it was. How long
each command may take is `core/command_deadlines.deadline_of`'s.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from orchestrator.store.held_connections import HeldConnections, holding

log = logging.getLogger(__name__)

T = TypeVar("T")

# How long a cancelled command has to end before its connections are closed under it: a database that answers
# takes a cancel in a round trip (milliseconds, a second on a machine at a load of 10); one that does not, never.
CANCEL_GRACE_SECONDS = 2.0


@dataclass(frozen=True)
class Missed:
    """Work not done within its deadline: whether it took a connection (`reached`), and whether it was on the
    database when the time was up (holding a connection, or waiting for its first)."""

    seconds: float
    reached: bool
    on_database: bool


class Deadlines:
    """One per app: runs work within a deadline, and keeps the work it let go until that has ended."""

    def __init__(self) -> None:
        self._letting_go: set[asyncio.Task[None]] = set()
        # The work let go that has not ended yet.
        self._let_go: set[asyncio.Task[Any]] = set()

    @property
    def unfinished(self) -> int:
        """How many commands let go past their deadline have not ended yet."""
        return len(self._let_go)

    async def run(self, work: Coroutine[Any, Any, T], seconds: float | None) -> T | Missed:
        """`work`'s result, or `Missed` once `seconds` have passed (None: no deadline, it is awaited here)."""
        if seconds is None:
            return await work
        held = HeldConnections()
        with holding(held):
            task = asyncio.ensure_future(work)
        try:
            done, _ = await asyncio.wait({task}, timeout=seconds)
        except asyncio.CancelledError:
            self._let_go_of(task, held)  # the request itself was cancelled (a stop past its bound): so is its work
            raise
        if done:
            return task.result()
        missed = Missed(seconds, held.reached, held.holds_one() or not held.reached)
        self._let_go_of(task, held)
        return missed

    def _let_go_of(self, task: asyncio.Task[Any], held: HeldConnections) -> None:
        self._let_go.add(task)
        task.add_done_callback(self._let_go.discard)
        letting_go = asyncio.ensure_future(_end(task, held))
        self._letting_go.add(letting_go)
        letting_go.add_done_callback(self._letting_go.discard)

    async def close(self) -> None:
        """Wait for the work let go to end (each within twice the grace, its connections closed by then)."""
        if self._letting_go:
            await asyncio.wait(set(self._letting_go))


async def _end(task: asyncio.Task[Any], held: HeldConnections) -> None:
    """Cancel `task`; close its connections if it has not ended within the grace."""
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=CANCEL_GRACE_SECONDS)
    if not done:
        closed = held.terminate()
        # A line each would be a line a request while the database hangs: its outage is said once (`late_reply`).
        log.debug(
            "a command past its deadline did not end within %.0f s of its cancel: %d of its connections closed",
            CANCEL_GRACE_SECONDS,
            closed,
        )
        done, _ = await asyncio.wait({task}, timeout=CANCEL_GRACE_SECONDS)
    if done:
        if not task.cancelled():
            task.exception()  # seen: what it ended with is the database's trouble, already answered
    else:
        log.warning("a command past its deadline still runs after its connections were closed")
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
