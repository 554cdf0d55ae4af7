"""What the pool's `setup` hook costs an acquire: the store's pools took `held_connections.note_lent` on every
acquire, the engine's too (router, drivers, activities), where only the HTTP door's commands need it; now only a
pool a door uses takes it (`Platform.connect(door=False)` opens one without).

Measured on one embedded PostgreSQL, on pools of one connection each of the store's class (no wait for a
connection, no connect, no reset query on release): the hook alone, awaited as the pool awaits it, with no
command's connections held and with one's (the hook then asks which task borrows); an acquire and its release
with no `setup` and with `note_lent` as `setup` (the process's CPU time: the machine's other load is not
counted); and a `SELECT 1` through the pool (an acquire, a round trip, a release) for scale. Each figure is the
median of `--rounds` rounds of `--count` acquires, the variants taking turns round by round so that the machine's
load falls on each alike.

Run: .venv/bin/python -m bench.pool_acquire [--count 10000] [--rounds 9]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import asyncpg

from bench.common import row, scratch_database
from orchestrator.core.database_schema import DEFAULT_SCHEMA
from orchestrator.store.held_connections import HeldConnections, holding, note_lent
from orchestrator.store.postgres import connection_class


async def _acquires(pool: asyncpg.Pool, count: int) -> float:
    """The process's CPU time per acquire and release (the machine's other load is not counted)."""
    began = time.process_time()
    for _ in range(count):
        async with pool.acquire():
            pass
    return (time.process_time() - began) / count


async def _selects(pool: asyncpg.Pool, count: int) -> float:
    """The wall time per `SELECT 1` through the pool."""
    began = time.perf_counter()
    for _ in range(count):
        await pool.fetchval("SELECT 1")
    return (time.perf_counter() - began) / count


async def _hook(count: int) -> float:
    """The process's CPU time per call of the hook alone, as the pool awaits it, for a task whose connections are
    not held (the engine's, or the door's outside a command)."""
    lent = object()
    began = time.process_time()
    for _ in range(count):
        await note_lent(lent)
    return (time.process_time() - began) / count


async def _hook_beside_a_command(count: int) -> float:
    """The same while a command's connections are held (another task's): the hook then asks which task borrows."""
    command = asyncio.ensure_future(asyncio.Event().wait())
    holding(HeldConnections(), command)
    try:
        return await _hook(count)
    finally:
        command.cancel()


async def main(count: int, rounds: int) -> None:
    async with scratch_database() as url:
        pools = {
            # The store's connections (no reset query on release: no round trip).
            label: await asyncpg.create_pool(
                url,
                min_size=1,
                max_size=1,
                setup=note_lent if noted else None,
                connection_class=connection_class(DEFAULT_SCHEMA),
            )
            for label, noted in (("no setup", False), ("setup=note_lent", True))
        }
        try:
            took: dict[str, list[float]] = {label: [] for label in pools}
            selects: dict[str, list[float]] = {label: [] for label in pools}
            alone: list[float] = []
            beside: list[float] = []
            for _ in range(rounds):
                alone.append(await _hook(count * 10))
                beside.append(await _hook_beside_a_command(count * 10))
                for label, pool in pools.items():
                    took[label].append(await _acquires(pool, count))
                    selects[label].append(await _selects(pool, count // 4))
        finally:
            for pool in pools.values():
                await pool.close()
    print(f"Pool acquire and release, median of {rounds} rounds of {count}")
    row("note_lent alone, awaited (CPU)", 1e9 * statistics.median(alone), "ns")
    row("note_lent alone, a command's connections held (CPU)", 1e9 * statistics.median(beside), "ns")
    for label in pools:
        row(f"acquire + release, {label} (CPU)", 1e9 * statistics.median(took[label]), "ns")
        row(f"SELECT 1 through the pool, {label} (wall)", 1e6 * statistics.median(selects[label]), "µs")
    hook = statistics.median(took["setup=note_lent"]) - statistics.median(took["no setup"])
    row("what setup=note_lent adds to an acquire (CPU)", 1e9 * hook, "ns")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    asyncio.run(main(args.count, args.rounds))
