"""A request's deadline at the HTTP door: the door answers within it whatever the database does.

Owns the wait and the cut. The work (the door's look at who calls, a command) runs as a task of its own while the
request waits for it at most its deadline; past that the request is answered at once (`Missed`, which the door turns
into `unavailable`: `core/command_deadlines.not_answered`) and the work is let go behind the answer. Work that has
taken a connection is left to end for as long again (on a database that is slow, not gone, a command of several steps
then ends whole, not cut between two of them; one that took none has written nothing and is cut at once), then
cancelled, which on a database that answers stops its statement within a round trip, then, if it is still not done
`CANCEL_GRACE_SECONDS` later, its connections closed (`store/held_connections`): on a database that answers nothing
the cancel itself is never answered, and the pool would hold the connection, and the work, until it was. Its
connections are those its own task took: a task it starts keeps its own. At shutdown what is still let go is cut at
once. How long each command may take is `core/command_deadlines.deadline_of`'s.
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
        # The work let go that has not ended yet, and the connections each took.
        self._let_go: dict[asyncio.Task[Any], HeldConnections] = {}

    @property
    def unfinished(self) -> int:
        """How many commands let go past their deadline have not ended yet."""
        return len(self._let_go)

    async def run(self, work: Coroutine[Any, Any, T], seconds: float | None, *, whole: bool = True) -> T | Missed:
        """`work`'s result, or `Missed` once `seconds` have passed (None: no deadline, it is awaited here).

        `whole`: work that took a connection is left as long again to end whole (a command's steps); without it,
        work past its deadline is cut at once, for work whose end behind the answer would make the answer untrue
        (a stream's opening uses its ticket up as its last step: not once the answer said it was not used)."""
        if seconds is None:
            return await work
        held = HeldConnections()
        task = asyncio.ensure_future(work)
        holding(held, task)
        try:
            done, _ = await asyncio.wait({task}, timeout=seconds)
        except asyncio.CancelledError:
            # The request itself was cancelled (a stop past its bound): so is its work, at once.
            self._let_go_of(task, held, 0.0)
            raise
        if done:
            return task.result()
        missed = Missed(seconds, held.reached, held.holds_one() or not held.reached)
        # Work that took no connection yet wrote nothing: cut at once. Work that did is left as long again to end.
        self._let_go_of(task, held, seconds if held.reached and whole else 0.0)
        return missed

    def _let_go_of(self, task: asyncio.Task[Any], held: HeldConnections, left: float) -> None:
        self._let_go[task] = held
        task.add_done_callback(lambda done: self._let_go.pop(done, None))
        task.add_done_callback(_seen)
        letting_go = asyncio.ensure_future(_end(task, held, left))
        self._letting_go.add(letting_go)
        letting_go.add_done_callback(self._letting_go.discard)

    async def close(self) -> None:
        """At shutdown: cut the work still let go at once (cancelled, its connections closed: a stop has no time to
        give it), and wait for it to end."""
        for task, held in list(self._let_go.items()):
            task.cancel()
            held.terminate()
        if self._letting_go:
            await asyncio.wait(set(self._letting_go))


async def _end(task: asyncio.Task[Any], held: HeldConnections, left: float) -> None:
    """Leave `task` `left` seconds to end whole, then cancel it; close its connections if it has not ended within
    the grace."""
    if left > 0:
        await asyncio.wait({task}, timeout=left)
    if task.done():
        return
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=CANCEL_GRACE_SECONDS)
    if done:
        return
    closed = held.terminate()
    # A line each would be a line a request while the database hangs: its outage is said once (`late_reply`).
    log.debug(
        "a command past its deadline did not end within %.0f s of its cancel: %d of its connections closed",
        CANCEL_GRACE_SECONDS,
        closed,
    )
    done, _ = await asyncio.wait({task}, timeout=CANCEL_GRACE_SECONDS)
    if not done:
        log.warning("a command past its deadline still runs after its connections were closed")


def _seen(task: asyncio.Task[Any]) -> None:
    """What work let go ended with is taken: its lateness (or the database's trouble) was answered already."""
    if not task.cancelled():
        task.exception()
