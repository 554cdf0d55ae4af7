"""Two workers on one task queue, one SIGKILLed mid-way: the survivor routes and runs everything, and no lane
ever runs two batches at once.

Each session is routed by one worker at a time (its routing row is held for the whole round). While both
run, an event therefore reaches its lane in exactly one `deliver` signal; only the round the killed worker
had signalled but not saved is sent again, by the survivor. So every event a lane was sent twice must have
been first sent just before the kill: one sent twice long before it means two routers routed one session
at once.
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
    redeliveries,
    settle,
    temporal_client,
)

pytestmark = pytest.mark.devserver
log = logging.getLogger(__name__)

# A round reads, signals and saves within well under a second; the margin is for a loaded 2-core machine.
ROUND_MARGIN_SECONDS = 5.0


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
    assert verdict.open_runs == 0, verdict.summary()
    assert not verdict.overlaps, f"two batches of one lane in flight at once: {verdict.overlaps}"
    assert survivor.alive(), survivor.log_tail()
    assert verdict.runs_by_pid.get(survivor.pid), f"the survivor ran nothing: {verdict.runs_by_pid}"

    delivered, repeated = await redeliveries(temporal)
    early = [r for r in repeated if r.first_at < killed_at - ROUND_MARGIN_SECONDS]
    log.info(
        "%d writes: %s; runs by pid %s (victim %d); %d events signalled, %d sent twice, %d long before the kill",
        load.written,
        verdict.summary(),
        verdict.runs_by_pid,
        victim.pid,
        delivered,
        len(repeated),
        len(early),
    )
    assert not early, f"events sent to a lane twice while both routers lived (two routers on one session): {early}"
