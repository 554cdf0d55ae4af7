"""A long sweep of seeds for the crossing faults (the suite runs 120 on the in-memory twin and 30 on PostgreSQL):
a lane store (`--store memory`, the twin; `--store postgres`, an embedded PostgreSQL of its own, a database per
schedule) and Temporal's twin, the real driver and sweep, the process dying at random crossings
(`tests/engine/crossing_world.py`).

Prints, for the seeds run: how many schedules passed, the deaths at each crossing, what the sweep did (runs that
closed without a word, runs recorded and never started, batches claimed again, records forgotten), the starts
that failed before or after they were made, the nudges lost, and the seeds that failed with their first error.

Run: .venv/bin/python -m bench.crossing_faults [--seeds 0-2000] [--steps 160] [--store memory|postgres]
"""

from __future__ import annotations

import argparse
import logging
import time
from collections import Counter
from contextlib import ExitStack

from orchestrator.core.limits import Limits
from tests.databases import Databases, databases_of_their_own
from tests.engine import crossing_world
from tests.lane_worlds import LaneWorld, PgWorld, world_settings


def on_postgres(databases: Databases) -> crossing_world.WorldOpener:
    async def open_world(limits: Limits) -> LaneWorld:
        return await PgWorld.lend(databases, world_settings(limits))

    return open_world


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0-2000", help="first-last (inclusive)")
    parser.add_argument("--steps", type=int, default=crossing_world.STEPS)
    parser.add_argument("--store", choices=["memory", "postgres"], default="memory")
    args = parser.parse_args()
    first, _, last = args.seeds.partition("-")
    seeds = range(int(first), int(last or first) + 1)
    logging.disable(logging.WARNING)
    deaths: Counter[str] = Counter()
    sweeps: Counter[str] = Counter()
    failed: list[tuple[int, str]] = []
    starts = nudges_lost = 0
    with ExitStack() as stack:
        open_world: crossing_world.WorldOpener = crossing_world.in_memory
        if args.store == "postgres":
            open_world = on_postgres(stack.enter_context(databases_of_their_own()))
        began = time.perf_counter()
        for seed in seeds:
            try:
                world = crossing_world.run_schedule(seed, args.steps, open_world)
            except AssertionError as err:
                failed.append((seed, str(err).splitlines()[0][:200]))
                continue
            deaths.update(world.faults.deaths)
            sweeps.update(world.sweeps)
            starts += world.temporal.starts
            nudges_lost += world.nudges_lost
        took = time.perf_counter() - began
    print(
        f"schedules     {len(seeds) - len(failed)} of {len(seeds)} passed on {args.store}"
        f" ({args.steps} steps each) in {took:.1f} s"
    )
    print(f"runs started  {starts}; nudges lost {nudges_lost}")
    print("deaths        " + ", ".join(f"{k} {v}" for k, v in sorted(deaths.items())))
    print("sweep         " + ", ".join(f"{k} {v}" for k, v in sorted(sweeps.items())))
    for seed, error in failed[:20]:
        print(f"FAILED seed {seed}: {error}")
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
