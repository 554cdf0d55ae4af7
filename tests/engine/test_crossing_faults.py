"""The crossings between PostgreSQL and Temporal under seeded random faults (`crossing_world.World`).

The suite runs `SCHEDULES` seeded schedules (`bench/crossing_faults.py` runs as many more as it is asked); each
one checks the promises after every step and once settled (see `crossing_world`). A failing seed is named in
the assertion, and `python -m bench.crossing_faults --seeds N-N` runs it again alone.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.engine.crossing_world import run_schedule

SCHEDULES = 120


@pytest.mark.parametrize("block", range(4))
def test_random_faults_at_the_crossings_lose_nothing_and_end_no_run_that_temporal_did_not(block: int) -> None:
    deaths: Counter[str] = Counter()
    sweeps: Counter[str] = Counter()
    for seed in range(block * SCHEDULES // 4, (block + 1) * SCHEDULES // 4):
        world = run_schedule(seed)
        deaths.update(world.faults.deaths)
        sweeps.update(world.sweeps)
    # The schedules reached the crossings they are about.
    for point in ("batch.recorded", "run.started", "run_end.recorded", "route.saved", "batch.finished"):
        assert deaths[point] > 0, f"no schedule died at {point}: {deaths}"
    # And the sweep met runs recorded and never started, and runs that closed without a word.
    assert sweeps["DriveLane"] > 0 and sweeps["RecordEnd"] > 0, sweeps
