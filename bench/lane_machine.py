"""The lane machine with many more examples than the suite runs (300 on the in-memory twin, 60 on PostgreSQL):
hypothesis drives the lane step, the real driver and a lane store (`--store memory`, the twin; `--store
postgres`, an embedded PostgreSQL of its own, a database per example) through writes, rounds, drives, runs
ending, drivers dying, pauses, replays, repeats called off and the clock moving on (`tests/engine/lane_machine.py`).

Prints how many examples passed and what they reached (steps, batches, runs, repeats, replays, drivers dead at
each verb), and the time taken; a failure is hypothesis's own report, its steps shrunk (the exit status is 1).

Run: .venv/bin/python -m bench.lane_machine [--examples 1000] [--steps 40] [--store memory|postgres]
"""

from __future__ import annotations

import argparse
import logging
import time
from collections import Counter
from contextlib import ExitStack

from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from orchestrator.core.limits import Limits
from tests.databases import databases_of_their_own
from tests.engine.lane_machine import WorldOpener, machine_on
from tests.lane_worlds import LaneWorld, MemoryWorld, PgWorld, world_settings


async def in_memory(limits: Limits) -> LaneWorld:
    return MemoryWorld(frozen_at=1_000.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=40, help="steps at most per example")
    parser.add_argument("--store", choices=["memory", "postgres"], default="memory")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    tally: Counter[str] = Counter()
    with ExitStack() as stack:
        open_world: WorldOpener = in_memory
        if args.store == "postgres":
            databases = stack.enter_context(databases_of_their_own())

            async def on_postgres(limits: Limits) -> LaneWorld:
                return await PgWorld.lend(databases, world_settings(limits))

            open_world = on_postgres
        began = time.perf_counter()
        try:
            run_state_machine_as_test(
                machine_on(open_world, tally),
                settings=settings(
                    max_examples=args.examples,
                    stateful_step_count=args.steps,
                    deadline=None,
                    database=None,
                    suppress_health_check=[HealthCheck.too_slow],
                ),
            )
        except Exception:
            print(f"FAILED on {args.store} after {tally['examples']} examples passed; hypothesis's report follows")
            raise
        finally:
            took = time.perf_counter() - began
    print(f"examples      {tally['examples']} passed on {args.store} (up to {args.steps} steps each) in {took:.1f} s")
    print(
        f"reached       {tally['steps']} steps, {tally['batches']} batches, {tally['runs']} runs,"
        f" {tally['repeats']} repeats, {tally['replays']} replays"
    )
    print(
        f"stops         {tally['repeats stopped']} repeats called off, {tally['stale after a stopped repeat']}"
        " decisions read before one recorded stale"
    )
    print(f"throttle      {tally['held by the throttle']} drives ended held by the listener's own throttle")
    dead = {k.removeprefix("died at "): v for k, v in sorted(tally.items()) if k.startswith("died at ")}
    print("drivers dead  " + ", ".join(f"at {k} {v}" for k, v in dead.items()))


if __name__ == "__main__":
    main()
