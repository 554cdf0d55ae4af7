"""The production mix's meter: each process's CPU and memory, the database's size and the backlog, over time.

Every `interval` seconds it reads, per part (each API and worker by name, across its restarts; the Temporal
server; PostgreSQL's postmaster and backends, those it reaped included; the writers; the bench itself), the CPU
seconds used so far and the resident memory now, the machine's busy CPU, the database's size and Temporal's
SQLite file, and from PostgreSQL the events written, the events waiting in lanes and the runs started. From the
samples: CPU per part over a span, the busiest 10 s of each, memory and size slopes (least squares, per minute).
PostgreSQL's postmaster is read with its reaped children, so a backend that exited still counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import psutil

# Per part, the pids it has had (a restarted part has a new one), read fresh at each sample.
Pids = Callable[[], list[int]]


@dataclass
class Sample:
    at: float
    cpu: dict[str, float]
    rss_mb: dict[str, float]
    machine_busy: float
    database_mb: float | None = None
    temporal_mb: float | None = None
    events: int | None = None
    queued: int | None = None
    runs: int | None = None


def _process_cpu(process: psutil.Process, reaped: bool = False) -> float:
    """A process's CPU seconds; with `reaped`, its reaped children's too (a postmaster's exited backends). The
    bench's own are read without: it reaps the parts it restarts, which are counted by their own names."""
    t = process.cpu_times()
    return t.user + t.system + ((t.children_user + t.children_system) if reaped else 0.0)


def _machine_busy() -> float:
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + t.irq + t.softirq + t.steal


@dataclass
class Meter:
    parts: dict[str, Pids]
    postgres_pid: Callable[[], int | None]
    database_url: str
    temporal_file: Path
    interval: float = 10.0
    samples: list[Sample] = field(default_factory=list)
    _seen: dict[str, dict[int, float]] = field(default_factory=dict)

    def _read(self) -> tuple[dict[str, float], dict[str, float]]:
        cpu: dict[str, float] = {}
        rss: dict[str, float] = {}
        for name, pids in self.parts.items():
            seen = self._seen.setdefault(name, {})
            rss[name] = 0.0
            for pid in pids():
                with contextlib.suppress(psutil.Error):
                    process = psutil.Process(pid)
                    seen[pid] = _process_cpu(process)
                    rss[name] += process.memory_info().rss / 2**20
            cpu[name] = sum(seen.values())
        seen = self._seen.setdefault("PostgreSQL", {})
        rss["PostgreSQL"] = 0.0
        if (master := self.postgres_pid()) is not None:
            with contextlib.suppress(psutil.Error):
                postmaster = psutil.Process(master)
                seen[master] = _process_cpu(postmaster, reaped=True)
                rss["PostgreSQL"] += postmaster.memory_info().rss / 2**20
                for backend in postmaster.children():
                    with contextlib.suppress(psutil.Error):
                        t = backend.cpu_times()
                        seen[backend.pid] = t.user + t.system
                        memory = backend.memory_info()
                        rss["PostgreSQL"] += (memory.rss - memory.shared) / 2**20
        cpu["PostgreSQL"] = sum(seen.values())
        return cpu, rss

    async def sample(self) -> Sample:
        cpu, rss = await asyncio.to_thread(self._read)
        taken = Sample(time.time(), cpu, rss, _machine_busy())
        with contextlib.suppress(OSError):
            taken.temporal_mb = (
                sum(p.stat().st_size for p in self.temporal_file.parent.glob(self.temporal_file.name + "*")) / 2**20
            )
        with contextlib.suppress(OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
            conn = await asyncpg.connect(self.database_url, timeout=3)
            try:
                taken.database_mb = await conn.fetchval("SELECT pg_database_size(current_database())") / 2**20
                taken.events = await conn.fetchval("SELECT coalesce(max(id), 0) FROM orchestrator.events")
                taken.queued = await conn.fetchval("SELECT count(*) FROM orchestrator.lane_events")
                taken.runs = await conn.fetchval("SELECT count(*) FROM public.mix_runs")
            finally:
                await conn.close()
        self.samples.append(taken)
        return taken

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.sample()


def between(samples: list[Sample], start: float, end: float) -> list[Sample]:
    return [s for s in samples if start - 1 <= s.at <= end + 1]


def cpu_used(samples: list[Sample]) -> dict[str, float]:
    """CPU seconds each part used from the first sample to the last, and the machine's busy seconds."""
    first, last = samples[0], samples[-1]
    used = {name: last.cpu[name] - first.cpu.get(name, 0.0) for name in last.cpu}
    used["machine (every process on it)"] = last.machine_busy - first.machine_busy
    return used


def peak_cores(samples: list[Sample], interval: float) -> dict[str, tuple[float, float]]:
    """Per part, the most cores it used over one interval between samples, and when (seconds after the first);
    an interval much shorter than the meter's (a sample taken at the end) is too short to tell."""
    peaks: dict[str, tuple[float, float]] = {}
    for a, b in itertools.pairwise(samples):
        span = b.at - a.at
        if span < interval / 2:
            continue
        loads = {name: (b.cpu[name] - a.cpu.get(name, 0.0)) / span for name in b.cpu}
        loads["machine (every process on it)"] = (b.machine_busy - a.machine_busy) / span
        for name, cores in loads.items():
            if cores > peaks.get(name, (-1.0, 0.0))[0]:
                peaks[name] = (cores, b.at - samples[0].at)
    return peaks


def slope_per_minute(points: list[tuple[float, float]]) -> float:
    """The least-squares slope of (seconds, value) points, per minute."""
    if len(points) < 2:
        return float("nan")
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    if spread == 0:
        return float("nan")
    return 60 * sum((t - mean_t) * (v - mean_v) for t, v in points) / spread


def machine_cores() -> int:
    return os.cpu_count() or 1
