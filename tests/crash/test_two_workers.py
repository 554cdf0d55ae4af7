"""Two workers on one task queue, one SIGKILLed mid-way: the survivor routes and runs everything, and no lane
ever runs two batches at once.

Each session is routed by one worker at a time (its routing row is held for the whole round, and the queue
rows commit with the position), so an event is queued into a lane once, and a lane takes it in one batch:
two routers on one session, or two fires of one lane at once, would show as an event batched twice.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from orchestrator.platform import Platform
from tests.crash.conftest import (
    DevServer,
    Workload,
    explain_missing,
    kill_mid_batch,
    settle,
    temporal_client,
)

pytestmark = pytest.mark.devserver
log = logging.getLogger(__name__)


async def test_the_survivor_takes_over_and_nothing_is_lost(
    crash_db: str, writer: Platform, temporal_server: DevServer, workers_for: Any
) -> None:
    workers = workers_for(crash_db, temporal_server.address)
    first = await workers.start()
    second = await workers.start()
    # Four sessions, so that both routers have sessions to route while both live.
    load = await Workload.begin(writer, sessions=4)
    for _ in range(3):
        await load.burst(40)
        await load.pause(0.3, 1.0)
    victim, survivor = load.rng.sample([first, second], 2)
    killed_at = await kill_mid_batch(workers, victim, crash_db)
    for _ in range(3):
        await load.burst(40)
        await load.pause(0.3, 1.0)

    verdict = await settle(crash_db, watch=[survivor])
    temporal = await temporal_client(temporal_server.address)
    assert not verdict.missing, await explain_missing(crash_db, temporal, verdict)
    verdict.assert_sound()
    assert survivor.alive(), survivor.log_tail()
    assert verdict.runs_by_pid.get(survivor.pid), f"the survivor ran nothing: {verdict.runs_by_pid}"
    log.info(
        "%d writes: %s; runs by pid %s (victim %d, killed at %.1f)",
        load.written,
        verdict.summary(),
        verdict.runs_by_pid,
        victim.pid,
        killed_at,
    )
