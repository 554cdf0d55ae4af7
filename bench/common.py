"""What the benchmarks share: an embedded PostgreSQL in a temporary folder, and figures printed plainly."""

from __future__ import annotations

import os
import statistics
import tempfile
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg

from orchestrator.dev.embedded import start_postgres

# The benchmark's own load, processes that live across blocks (the writers, `bench.burst.process_pool`): never
# counted as the platform's, whenever they started.
LOAD_PIDS: set[int] = set()


@asynccontextmanager
async def scratch_database(statements: bool = False) -> AsyncIterator[str]:
    """A fresh database on an embedded PostgreSQL that lives as long as the benchmark; with `statements`, the
    server loads `pg_stat_statements` (a restart), so `statement_counts` can tell what ran."""
    with tempfile.TemporaryDirectory(prefix="bench-") as folder:
        server = await start_postgres(Path(folder))
        try:
            admin = await asyncpg.connect(server.url)
            if statements:
                await admin.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
                await admin.close()
                await server.stop()
                server = await start_postgres(Path(folder))
                admin = await asyncpg.connect(server.url)
            await admin.execute("CREATE DATABASE bench")
            await admin.close()
            if statements:
                bench = await asyncpg.connect(server.url_for("bench"))
                await bench.execute("CREATE EXTENSION pg_stat_statements")
                await bench.close()
            yield server.url_for("bench")
        finally:
            await server.stop()


async def statement_counts(database_url: str, reset: bool = False) -> dict[str, tuple[int, float]]:
    """How often each top-level statement ran on the database since the last reset (by its text), and its time
    in milliseconds: wall time, so a statement waiting for a lock counts the wait."""
    conn = await asyncpg.connect(database_url)
    try:
        if reset:
            await conn.execute("SELECT pg_stat_statements_reset()")
            return {}
        rows = await conn.fetch(
            "SELECT query, calls, total_exec_time FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid"
            " WHERE d.datname = current_database()"
        )
        return {r["query"]: (int(r["calls"]), float(r["total_exec_time"])) for r in rows}
    finally:
        await conn.close()


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def row(label: str, value: float, unit: str) -> None:
    print(f"  {label:<58} {value:>12,.1f} {unit}")


async def postmaster_pid(database_url: str) -> int:
    """The pid of the PostgreSQL server behind `database_url` (the parent of a backend)."""
    import psutil

    conn = await asyncpg.connect(database_url)
    try:
        return psutil.Process(int(await conn.fetchval("SELECT pg_backend_pid()"))).ppid()
    finally:
        await conn.close()


def cpu_seconds(pid: int | None = None) -> float:
    """User plus system CPU time a process has used so far (this one by default), from /proc."""
    with open(f"/proc/{pid or os.getpid()}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load_cpu_seconds() -> float:
    """CPU seconds the benchmark's load (`LOAD_PIDS`) has used so far, those that exited not counted."""
    total = 0.0
    for pid in LOAD_PIDS:
        try:
            total += cpu_seconds(pid)
        except OSError:
            continue
    return total


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy so far, every core and every process (from /proc/stat):
    on a machine shared with other work, theirs too."""
    with open("/proc/stat") as stat:
        fields = [int(f) for f in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU seconds the platform's parts used between `start` and `stop`: the Temporal server, this process
    (the worker and router), PostgreSQL (the benchmark's own server, `postgres_pid`: its postmaster and every
    backend, those that exited meanwhile included; other PostgreSQL servers on the machine are not the
    platform's) and the API (this process's children alive at the start but those in `not_platform` and the
    writers, `LOAD_PIDS`: the load, not the platform).

    After `stop`, `used` holds what it answered and `postgres_by_client` PostgreSQL's part split by whom its
    backends serve: this process's connections (the engine's), the API's, and the rest (the server's own
    processes, such as its WAL writer and autovacuum, and backends that exited meanwhile), each backend told by
    the process at the other end of its socket."""

    def __init__(
        self, temporal_pid: int | None, postgres_pid: int | None = None, not_platform: Collection[int | None] = ()
    ) -> None:
        self.temporal_pid = temporal_pid
        self.postgres_pid = postgres_pid
        self.not_platform = set(not_platform)
        self._start: dict[str, float] = {}
        self._backends_start: dict[int, float] = {}
        self._children: list[int] = []
        self.used: dict[str, float] = {}
        self.postgres_by_client: dict[str, float] = {}

    def _postgres(self) -> tuple[float, dict[int, float]]:
        """The server's CPU seconds so far, and each live backend's."""
        import psutil

        if self.postgres_pid is None:
            return 0.0, {}
        postmaster = psutil.Process(self.postgres_pid)
        times = postmaster.cpu_times()
        total = times.user + times.system + times.children_user + times.children_system
        backends: dict[int, float] = {}
        for backend in postmaster.children():
            try:
                times = backend.cpu_times()
            except psutil.Error:
                continue
            backends[backend.pid] = times.user + times.system
            total += backends[backend.pid]
        return total, backends

    def _parts(self) -> tuple[dict[str, float], dict[int, float]]:
        api = 0.0
        for pid in self._children:
            try:
                api += cpu_seconds(pid)
            except OSError:
                continue
        postgres, backends = self._postgres()
        parts = {
            "Temporal server": cpu_seconds(self.temporal_pid) if self.temporal_pid else 0.0,
            "worker and router": cpu_seconds(),
            "PostgreSQL": postgres,
            "API": api,
        }
        return parts, backends

    @staticmethod
    def _peers() -> dict[int, int]:
        """Each process with a Unix socket to another, to the pid at the other end (from `ss`, which names both
        ends of a socket by inode; the embedded PostgreSQL is reached by Unix socket)."""
        import re
        import subprocess

        out = subprocess.run(["ss", "-xpnH"], capture_output=True, text=True, check=False).stdout
        owner: dict[int, int] = {}
        peer: dict[int, int] = {}
        for inode, other, pid in re.findall(r"\s(\d+) +\S+ +(\d+) +users:\(\(\"[^\"]*\",pid=(\d+),", out):
            owner[int(inode)] = int(pid)
            peer[int(inode)] = int(other)
        return {pid: owner[peer[inode]] for inode, pid in owner.items() if peer[inode] in owner}

    def _split_postgres(self, total: float, backends: dict[int, float]) -> dict[str, float]:
        whom = {os.getpid(): "engine's connections", **{pid: "API's connections" for pid in self._children}}
        peers = self._peers()
        split = {"engine's connections": 0.0, "API's connections": 0.0}
        for pid, seconds in backends.items():
            if (client := peers.get(pid)) in whom:
                split[whom[client]] += seconds - self._backends_start.get(pid, 0.0)
        split["the server's own and exited backends"] = total - sum(split.values())
        return split

    def start(self) -> None:
        import psutil

        self._children = [
            c.pid
            for c in psutil.Process().children()
            if c.pid != self.temporal_pid and c.pid not in self.not_platform | LOAD_PIDS and c.name() != "postgres"
        ]
        self._start, self._backends_start = self._parts()

    def stop(self) -> dict[str, float]:
        end, backends = self._parts()
        self.used = {part: end[part] - self._start[part] for part in end}
        self.postgres_by_client = self._split_postgres(self.used["PostgreSQL"], backends)
        return self.used
