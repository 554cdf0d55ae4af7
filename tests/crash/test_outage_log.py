"""A worker whose database is away for a while says so in a few lines, not a line (or a traceback) a retry.

The router retries every second, retention every round, and asyncpg's pool refills its floor at 1, 2, 4 ...
seconds: said at each attempt, an outage of minutes is hundreds of lines and tracebacks that bury what else
happened (the production mix's logs). The worker here runs as in production (`orchestrator worker`, a process
of its own) while its PostgreSQL is stopped for longer than several of each retry, then started again.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from orchestrator.platform import Platform
from tests.crash.conftest import DevServer, RestartablePostgres, Workload, crash_settings, settle

pytestmark = pytest.mark.devserver

OUTAGE_SECONDS = 8.0


async def test_a_database_outage_is_said_once_with_its_end_and_no_traceback(
    private_postgres: RestartablePostgres, temporal_server: DevServer, workers_for: Any
) -> None:
    database_url = private_postgres.url
    writer = await Platform.connect(crash_settings(), database_url)
    try:
        worker = await workers_for(database_url, temporal_server.address).start()
        load = await Workload.begin(writer, sessions=1)
        await load.burst(5)
        await asyncio.sleep(2.0)
        said_before = worker.log_path.read_text(errors="replace")
        await private_postgres.stop()
        await asyncio.sleep(OUTAGE_SECONDS)
        await private_postgres.start_again()
        await load.burst(5)
        verdict = await settle(database_url, watch=[worker])
    finally:
        await writer.close()
    assert not verdict.missing, "every write reached its lane after the outage"
    said = worker.log_path.read_text(errors="replace")[len(said_before) :]
    assert worker.alive(), f"the worker died with PostgreSQL's stop:\n{worker.log_tail()}"
    lost = [line for line in said.splitlines() if "the router lost the database" in line]
    assert len(lost) == 1, f"said once, not every second:\n{said}"
    assert "still without the database" not in said, "an outage under a minute is said once"
    assert said.count("the router has the database again") == 1, f"its end said once:\n{said}"
    assert said.count("a retention round failed") <= 1, said
    assert "Traceback" not in said, f"no traceback for a database away:\n{said}"
    # asyncpg's pool still says its floor could not be restored, in a line naming why.
    floor = [line for line in said.splitlines() if "pool connection floor" in line]
    assert all("Error" in line for line in floor), floor
