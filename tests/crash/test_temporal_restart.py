"""The servers under the platform restarted while events are written: nothing lost, and the worker carries on
(and says the outage in a few lines, not a line or a traceback a retry).

The Temporal dev server is SIGKILLed and started again on its SQLite file and port (lane state, timers and
runs in flight survive in the file); PostgreSQL is stopped and started again on its data folder. Neither
restart touches the worker process: it must ride out the outage and reconnect by itself.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

import asyncpg
import pytest

from orchestrator.platform import Platform
from tests.crash.conftest import (
    DevServer,
    RestartablePostgres,
    Workload,
    crash_settings,
    explain_missing,
    queue_times,
    settle,
    temporal_client,
    wait_for_a_run_in_flight,
)

pytestmark = pytest.mark.devserver
log = logging.getLogger(__name__)

OUTAGE_SECONDS = 1.5


async def test_temporal_restarted_on_its_data_file_loses_nothing(
    crash_db: str, writer: Platform, temporal_server: DevServer, workers_for: Any
) -> None:
    workers = workers_for(crash_db, temporal_server.address)
    worker = await workers.start()
    load = await Workload.begin(writer)
    for _ in range(2):
        await load.burst(50)
        assert await wait_for_a_run_in_flight(crash_db), "Temporal dies with a run in flight"
        await temporal_server.kill()
        # Committed while Temporal is away: the router queues them, but cannot nudge their lanes.
        await load.burst(30)
        await asyncio.sleep(OUTAGE_SECONDS)
        await temporal_server.start_again()
        await load.pause(0.2, 1.0)
    await load.burst(50)

    verdict = await settle(crash_db, watch=[worker])
    temporal = await temporal_client(temporal_server.address)
    assert not verdict.missing, await explain_missing(crash_db, temporal, verdict)
    verdict.assert_sound()
    assert worker.alive(), f"the worker died with Temporal's restart:\n{worker.log_tail()}"
    log.info("%d writes, 2 Temporal crashes: %s", load.written, verdict.summary())


# Longer than the router's 2 s poll, so the poll always lands in the outage.
DATABASE_OUTAGE_SECONDS = 4.0


async def test_postgres_restarted_loses_nothing_and_the_worker_reconnects(
    private_postgres: RestartablePostgres, temporal_server: DevServer, workers_for: Any
) -> None:
    database_url = private_postgres.url
    writer = await Platform.connect(crash_settings(), database_url)
    try:
        workers = workers_for(database_url, temporal_server.address)
        worker = await workers.start()
        load = await Workload.begin(writer)
        await load.burst(50)
        assert await wait_for_a_run_in_flight(database_url), "PostgreSQL goes away with a run in flight"
        said_before = worker.log_path.read_text(errors="replace")
        await private_postgres.stop()
        # Writes during the outage fail and are retried until the database is back.
        during = asyncio.create_task(load.burst(30))
        await asyncio.sleep(DATABASE_OUTAGE_SECONDS)
        await private_postgres.start_again()
        await during
        await load.pause(0.5, 1.5)
        await load.burst(50)
        verdict = await settle(database_url, within=45.0, watch=[worker])
    finally:
        await writer.close()
    temporal = await temporal_client(temporal_server.address)
    assert worker.alive(), f"the worker died after PostgreSQL's restart:\n{worker.log_tail()}"
    assert not verdict.missing, await explain_missing(database_url, temporal, verdict)
    verdict.assert_sound()
    log.info("%d writes, 1 PostgreSQL restart: %s", load.written, verdict.summary())
    assert_outage_said_once(worker.log_path.read_text(errors="replace")[len(said_before) :])


def assert_outage_said_once(said: str) -> None:
    """The worker's log over an outage shorter than a minute: the router's loss and return said once each at most
    (it retries every second), retention's at most once (every round), and no traceback, asyncpg's pool refilling
    its floor included (at 1, 2, 4 s): an outage said at each attempt buries what else happened."""
    # A router asleep through the outage (between its polls, its listening connection lost) never meets it.
    lost = [line for line in said.splitlines() if "the router lost the database" in line]
    assert len(lost) <= 1, f"said once, not every second:\n{said}"
    assert "still without the database" not in said, "an outage under a minute is said once"
    assert said.count("the router has the database again") == len(lost), f"its end said as its start:\n{said}"
    assert said.count("a retention round failed") <= 1, said
    # Each log record: its first line (time, level, logger, message) and what follows it (a traceback). The app's
    # own activities that fail meanwhile keep theirs (Temporal's SDK logs them; they are the app's to read).
    records = re.split(r"\n(?=\d{4}-\d\d-\d\d )", said)
    platform = [r for r in records if re.match(r"\S+ \S+ \w+ (orchestrator|asyncpg)", r) or "'orchestrator." in r]
    assert platform, said
    assert not [r for r in platform if "Traceback" in r], f"no traceback of the platform's for a database away:\n{said}"


# From commit to the lane's queue when the router is woken by NOTIFY: tens of milliseconds, so half a second
# is room for a loaded machine; a router left to its 2 s poll takes about a second on average.
PROMPT_SECONDS = 0.5


async def trickle(load: Workload) -> None:
    """Single writes, far enough apart that each is routed on its own."""
    for _ in range(5):
        await load.burst(1)
        await asyncio.sleep(0.7)


async def test_the_router_wakes_promptly_again_after_a_postgres_restart(
    private_postgres: RestartablePostgres, temporal_server: DevServer, workers_for: Any
) -> None:
    database_url = private_postgres.url
    writer = await Platform.connect(crash_settings(), database_url)
    try:
        workers = workers_for(database_url, temporal_server.address)
        worker = await workers.start()
        load = await Workload.begin(writer, sessions=1)
        await load.burst(5)
        await asyncio.sleep(2.0)
        first_before = load.written
        await trickle(load)
        await private_postgres.stop()
        # Shorter than the router's poll, so that the router usually outlives the outage.
        await asyncio.sleep(0.5)
        await private_postgres.start_again()
        await asyncio.sleep(3.0)
        first_after = load.written
        await trickle(load)
        await asyncio.sleep(3.0)
    finally:
        await writer.close()
    assert worker.alive(), f"the worker died with PostgreSQL's restart:\n{worker.log_tail()}"
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch(
            "SELECT id, split_part(alias, '/', 3)::int AS n, extract(epoch FROM created_at)::float8 AS at"
            " FROM orchestrator.events WHERE alias LIKE 'crash/%'"
        )
    finally:
        await conn.close()
    queued = await queue_times(database_url)
    before, delays = [], []
    for row in rows:
        assert row["id"] in queued, f"event {row['id']} was never queued into a lane"
        if row["n"] >= first_before:
            (delays if row["n"] >= first_after else before).append(queued[row["id"]] - row["at"])
    log.info(
        "commit to queue: before the restart %s, after %s",
        [f"{d:.3f}" for d in sorted(before)],
        [f"{d:.3f}" for d in sorted(delays)],
    )
    assert len(delays) == 5
    # The slowest of five: a router left to its poll gets all five under half a second about once in a thousand.
    assert max(delays) < PROMPT_SECONDS, f"routing is slow after the restart: {sorted(delays)}"
