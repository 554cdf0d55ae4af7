"""What the benchmarks share: an embedded PostgreSQL in a temporary folder, and figures printed plainly."""

from __future__ import annotations

import os
import statistics
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg

from orchestrator.embedded import start_postgres


@asynccontextmanager
async def scratch_database() -> AsyncIterator[str]:
    """A fresh database on an embedded PostgreSQL that lives as long as the benchmark."""
    with tempfile.TemporaryDirectory(prefix="bench-") as folder:
        server = await start_postgres(Path(folder))
        try:
            admin = await asyncpg.connect(server.url)
            await admin.execute("CREATE DATABASE bench")
            await admin.close()
            yield server.url_for("bench")
        finally:
            await server.stop()


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def row(label: str, value: float, unit: str) -> None:
    print(f"  {label:<58} {value:>12,.1f} {unit}")


def cpu_seconds(pid: int | None = None) -> float:
    """User plus system CPU time a process has used so far (this one by default), from /proc."""
    with open(f"/proc/{pid or os.getpid()}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
