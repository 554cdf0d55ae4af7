"""Superseded listener versions leave routing: their probes go once no event can still be routed by them.

Owns when `orchestrator_prune_superseded_probes` (0026) may run. A version is in effect from its `effective_at`
until the next version's, and a routing round meets the probes of every version it keeps; one that ended is
still needed by an event committed before its end and not yet routed, or written before its end by a
transaction still open. The second is what this waits out, over two of the router's upkeep calls: the first
notes the time and then takes a transaction id (`pruning_mark`: any transaction that wrote before that time
has a smaller one); a later one, once every transaction up to that id has ended, prunes what ended by the time
noted (the function itself keeps what the oldest event not yet routed needs). A version's probes go two or
three polls after its end (about 4 to 6 s), once no event waiting to be routed is older. A process that dies
between the two loses only its note: the next starts again.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg

from orchestrator.store.listener_rules import prune_superseded_probes, pruning_mark, transactions_ended_through


class ProbePruning:
    """One of the router's upkeep tasks: call it every poll; it prunes at most every other call."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self._mark: tuple[datetime, int] | None = None

    async def __call__(self) -> int:
        if self._mark is None:
            self._mark = await pruning_mark(self.pool)
            return 0
        before, xid = self._mark
        if not await transactions_ended_through(self.pool, xid):
            return 0
        self._mark = None
        return await prune_superseded_probes(self.pool, before)
