"""A long sweep of seeds for the crossing faults (the suite runs 120): the lane store's twin and Temporal's, the
real driver and sweep, the process dying at random crossings (`tests/engine/crossing_world.py`).

Prints, for the seeds run: how many schedules passed, the deaths at each crossing, what the sweep did (runs that
closed without a word, runs recorded and never started, batches claimed again, records forgotten), the starts
that failed before or after they were made, the nudges lost, and the seeds that failed with their first error.

Run: .venv/bin/python -m bench.crossing_faults [--seeds 0-2000] [--steps 160]
"""

from __future__ import annotations

import argparse
import logging
import time
from collections import Counter

from tests.engine import crossing_world


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0-2000", help="first-last (inclusive)")
    parser.add_argument("--steps", type=int, default=crossing_world.STEPS)
    args = parser.parse_args()
    first, _, last = args.seeds.partition("-")
    seeds = range(int(first), int(last or first) + 1)
    logging.disable(logging.WARNING)
    deaths: Counter[str] = Counter()
    sweeps: Counter[str] = Counter()
    failed: list[tuple[int, str]] = []
    starts = nudges_lost = 0
    began = time.perf_counter()
    for seed in seeds:
        try:
            world = crossing_world.run_schedule(seed, args.steps)
        except AssertionError as err:
            failed.append((seed, str(err).splitlines()[0][:200]))
            continue
        deaths.update(world.faults.deaths)
        sweeps.update(world.sweeps)
        starts += world.temporal.starts
        nudges_lost += world.nudges_lost
    took = time.perf_counter() - began
    print(f"schedules     {len(seeds) - len(failed)} of {len(seeds)} passed ({args.steps} steps each) in {took:.1f} s")
    print(f"runs started  {starts}; nudges lost {nudges_lost}")
    print("deaths        " + ", ".join(f"{k} {v}" for k, v in sorted(deaths.items())))
    print("sweep         " + ", ".join(f"{k} {v}" for k, v in sorted(sweeps.items())))
    for seed, error in failed[:20]:
        print(f"FAILED seed {seed}: {error}")
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
