"""PostgreSQL restored from a backup while Temporal keeps its newer state, and Temporal's state lost while
PostgreSQL keeps its own (docs/operations.md, "Restore").

A worker runs against the test's own cluster and dev server; the database is backed up and restored into a new
database by the page's own commands (`tests/backups.py`: the wheel's `pg_dump` and `pg_restore`, then
`orchestrator restored`) while a run is in flight or before more is written, with the workers stopped in between,
and a worker on the same task queue is started on the copy. The last test keeps the database and starts the worker
on an empty dev server instead, after the page's `orchestrator restored --temporal-only`. What the platform then
does is read from its tables (`crash_runs`, which the app's runs write, among them) and from the new Temporal.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client as TemporalClient
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.platform import Platform
from tests.backups import back_up, mark_schedules_after_temporal_restore, restore, running_query
from tests.crash.conftest import (
    DevServer,
    RestartablePostgres,
    Workers,
    crash_settings,
    start_dev_server,
    temporal_client,
)
from tests.timeouts import stop_within

pytestmark = pytest.mark.devserver
log = logging.getLogger(__name__)

LISTENER = "restore_serial"
# The run sleeps long enough for the dump to land in it.
RUN_SLEEP_SECONDS = 4.0
# A worker's sweep asks Temporal about runs the records call running this often.
RUN_CHECK = {"ORCHESTRATOR_RUN_CHECK_SECONDS": "2"}
RESTORED = "restored"


def listener_body() -> dict[str, Any]:
    return {
        "name": LISTENER,
        "filter": {"types": ["object.**"], "aliases": ["restore/**"]},
        "batch": {"window_seconds": 0.2, "max_events": 100},
        "action": {"type": "workflow", "workflow": "tracked", "input": {"sleep": RUN_SLEEP_SECONDS}},
    }


async def restore_into_new(postgres: RestartablePostgres, folder: Path) -> str:
    """docs/operations.md's restore of `folder`'s dump into a new database of the cluster; answers its URL."""
    url = postgres.server.url_for(RESTORED)
    await restore(postgres.url, folder, RESTORED, url)
    return url


async def until(what: str, check: Callable[[], Awaitable[Any]], within: float = 45.0) -> Any:
    deadline = time.monotonic() + within
    while True:
        found = await check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within:.0f} s: {what}")
        await asyncio.sleep(0.3)


async def rows(url: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(url)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


async def executions(url: str) -> list[asyncpg.Record]:
    return await rows(
        url, "SELECT id, status, error, ended_at FROM orchestrator.executions WHERE listener = $1 ORDER BY id", LISTENER
    )


async def begin(url: str) -> tuple[Platform, str]:
    writer = await Platform.connect(crash_settings(), url)
    reply = await writer.command({"command": "save_listener", "listener": listener_body()})
    assert reply["status"] == "success", reply
    reply = await writer.command({"command": "open_session"})
    assert reply["status"] == "success", reply
    return writer, reply["session"]["id"]


async def write(writer: Platform, session_id: str, alias: str) -> int:
    reply = await writer.command(
        {"command": "write_object", "session_id": session_id, "alias": alias, "value": {"type": "crash"}}
    )
    assert reply["status"] == "success", reply
    return int(reply["event_id"])


async def paused_schedule(url: str, temporal_address: str, task_queue: str, session_id: str) -> str:
    """A schedule of the session, its clock made paused (it never fires) on the Temporal at `temporal_address`;
    answers its id."""
    settings = crash_settings().model_copy(update={"temporal_address": temporal_address, "task_queue": task_queue})
    platform = await Platform.connect(settings, url, await temporal_client(temporal_address))
    try:
        reply = await platform.command(
            {
                "command": "create_schedule",
                "session_id": session_id,
                "alias": "restore/clock",
                "repeat": {"type": "interval", "every_seconds": 3600},
                "invocation_target_type": "workflow",
                "target": {"workflow": "tracked", "input": {}},
                "enabled": False,
            }
        )
        assert reply["status"] == "success", reply
        return str(reply["schedule"]["schedule_id"])
    finally:
        await platform.close()


async def paused_clock(temporal: TemporalClient, schedule_id: str) -> bool:
    """Whether Temporal has the schedule's clock, paused as its row says (False: not made yet)."""
    try:
        described = await temporal.get_schedule_handle(schedule_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return described.schedule.state.paused


async def _ended(url: str, at_least: int = 1) -> list[asyncpg.Record]:
    """The listener's executions once at least `at_least` exist and none is running (else nothing)."""
    found = await executions(url)
    return found if len(found) >= at_least and all(x["status"] != "running" for x in found) else []


async def ran(url: str, event_id: int) -> list[asyncpg.Record]:
    """The runs of the app's workflow that took the event and ended (the app records them: `crash_runs`)."""
    return await rows(url, "SELECT * FROM crash_runs WHERE $1 = ANY(event_ids) AND ended_at IS NOT NULL", event_id)


async def test_a_run_that_ended_after_the_backup_is_recorded_ended_and_its_lane_goes_on(
    private_postgres: RestartablePostgres, temporal_server: DevServer, workers_for: Any, tmp_path: Path
) -> None:
    url = private_postgres.url
    workers: Workers = workers_for(url, temporal_server.address)
    worker = await workers.start(RUN_CHECK)
    writer, session_id = await begin(url)
    try:
        await write(writer, session_id, "restore/1")
        [running] = await until("a run in flight", lambda: executions(url))
        assert running["status"] == "running"
        await back_up(url, tmp_path)
        # It ends on Temporal, and in the original's records, after the backup.
        [ended] = await until("the run's end", lambda: _ended(url))
        assert (ended["id"], ended["status"], ended["error"]) == (running["id"], "completed", None)
    finally:
        await writer.close()
    await workers.kill(worker)

    restored = await restore_into_new(private_postgres, tmp_path)
    [before] = await executions(restored)
    assert (before["id"], before["status"]) == (running["id"], "running")
    workers.database_url = restored
    worker = await workers.start(RUN_CHECK)
    # The sweep finds it ended on Temporal and records its end there.
    [after] = await until("the run recorded ended on the restored database", lambda: _ended(restored))
    log.info("after the restore: %s", dict(after))
    assert (after["id"], after["status"]) == (running["id"], "completed")
    assert after["error"] == "the run closed as completed without reporting"
    # Its lane is not stuck: a new write starts a new run, which ends.
    writer = await Platform.connect(crash_settings(), restored)
    try:
        new_id = await write(writer, session_id, "restore/2")
        [run] = await until("a run of the write after the restore", lambda: ran(restored, new_id))
        [_, second] = await until("both runs ended", lambda: _ended(restored, 2))
        assert (second["id"], second["status"], second["error"]) == (run["execution_id"], "completed", None)
        # The page's check after a restore: no run the records call running once Temporal has none.
        assert await rows(restored, running_query()) == []
    finally:
        await writer.close()
    assert worker.alive(), worker.log_tail()


async def test_a_write_after_the_restore_runs_though_a_run_of_the_lost_interval_had_its_id(
    private_postgres: RestartablePostgres, temporal_server: DevServer, workers_for: Any, tmp_path: Path
) -> None:
    url = private_postgres.url
    workers: Workers = workers_for(url, temporal_server.address)
    worker = await workers.start(RUN_CHECK)
    writer, session_id = await begin(url)
    try:
        await write(writer, session_id, "restore/1")
        await until("the first run's end", lambda: _ended(url))
        await back_up(url, tmp_path)
        # Written, run and ended after the backup: lost with the restore, but its run stays on Temporal.
        lost_id = await write(writer, session_id, "restore/2")
        [_, lost] = await until("the lost write's run's end", lambda: _ended(url, 2))
    finally:
        await writer.close()
    await workers.kill(worker)

    restored = await restore_into_new(private_postgres, tmp_path)
    workers.database_url = restored
    worker = await workers.start(RUN_CHECK)
    writer = await Platform.connect(crash_settings(), restored)
    try:
        new_id = await write(writer, session_id, "restore/3")
        log.info("the lost write: event %d, run %s; the write after the restore: %d", lost_id, lost["id"], new_id)
        # Without the page's jump the write took the lost one's id and its batch adopted the lost run: it never ran.
        assert new_id > lost_id + 10**12 - 10
        [run] = await until("a run of the write after the restore", lambda: ran(restored, new_id))
        assert run["execution_id"] != lost["id"]
        [*_, last] = await until("its run recorded ended", lambda: _ended(restored, 2))
        assert (last["id"], last["status"], last["error"]) == (run["execution_id"], "completed", None)
    finally:
        await writer.close()
    assert worker.alive(), worker.log_tail()


async def test_on_a_new_temporal_the_run_in_flight_runs_again_and_the_lanes_go_on(
    private_postgres: RestartablePostgres, temporal_server: DevServer, workers_for: Any, tmp_path: Path
) -> None:
    """Temporal's state lost, PostgreSQL kept: the sweep starts the run the records call running again, by its id,
    the lanes take new writes, and the schedule the page's command marked is made again on the new Temporal."""
    url = private_postgres.url
    workers: Workers = workers_for(url, temporal_server.address)
    worker = await workers.start(RUN_CHECK)
    writer, session_id = await begin(url)
    try:
        first = await write(writer, session_id, "restore/1")
        schedule_id = await paused_schedule(url, temporal_server.address, workers.task_queue, session_id)
        [running] = await until("a run in flight", lambda: executions(url))
        await workers.kill(worker)
        await temporal_server.stop()
        empty = await start_dev_server(tmp_path / "new-temporal")
        try:
            said = await mark_schedules_after_temporal_restore(url, tmp_path)
            assert "left as they were" in said and "schedules    1 marked" in said, said
            workers.temporal_address = empty.address
            worker = await workers.start(RUN_CHECK)
            [again] = await until("the run ended on the new Temporal", lambda: _ended(url), within=60.0)
            assert (again["id"], again["status"], again["error"]) == (running["id"], "completed", None)
            assert [r["execution_id"] for r in await ran(url, first)] == [running["id"]]
            later = await write(writer, session_id, "restore/2")
            [run] = await until("a run of a write on the new Temporal", lambda: ran(url, later))
            assert run["execution_id"] != running["id"]
            await until("both runs ended", lambda: _ended(url, 2))
            new_temporal = await temporal_client(empty.address)
            await until("the schedule's clock made again", lambda: paused_clock(new_temporal, schedule_id))
            assert worker.alive(), worker.log_tail()
        finally:
            await workers.kill(worker)
            await stop_within(empty.stop(), "the new Temporal dev server")
            await temporal_server.start_again()
    finally:
        await writer.close()
