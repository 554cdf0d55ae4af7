"""A worker SIGKILLed mid-batch and started again loses no event and never runs two batches of a lane at once."""

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

KILLS = 3


async def test_killed_worker_loses_no_event_and_never_overlaps_a_lane(
    crash_db: str, writer: Platform, temporal_server: DevServer, workers_for: Any
) -> None:
    workers = workers_for(crash_db, temporal_server.address)
    worker = await workers.start()
    load = await Workload.begin(writer)
    kills = []
    for _ in range(KILLS):
        await load.burst(50)
        await load.pause(0.2, 1.5)
        kills.append(await kill_mid_batch(workers, worker, crash_db))
        # Events committed while no worker runs wait in the stream for the next router.
        await load.burst(30)
        worker = await workers.start()
        await load.pause(0.0, 1.0)
    await load.burst(60)

    verdict = await settle(crash_db, watch=[worker])
    temporal = await temporal_client(temporal_server.address)
    assert not verdict.missing, await explain_missing(crash_db, temporal, verdict)
    verdict.assert_sound()
    log.info("%d writes, %d kills: %s", load.written, len(kills), verdict.summary())
    # Runs went on in the workers started after a kill, not only in the first.
    assert len(verdict.runs_by_pid) >= 2, verdict.runs_by_pid
