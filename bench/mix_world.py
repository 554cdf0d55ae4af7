"""The production mix's platform: PostgreSQL and Temporal of its own, APIs and workers kept running, the faults
of `bench.fault_soak`, and a rolling upgrade from an earlier release.

Each API and worker is a `Part`: a process of the `orchestrator` command started from a checkout (this one, or
the earlier release's worktree: the same interpreter, the checkout first on `PYTHONPATH` and as the working
folder) and started again whenever it exits, unless a fault holds it down. An upgrade points a part at this
checkout and stops it (SIGTERM, an orderly stop); its keeper starts it again from here, and the next part is
replaced only once this one says `Ready.`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.fault_soak import KINDS, Supervised, strike
from tests.crash.conftest import DevServer, RestartablePostgres

REPO = Path(__file__).resolve().parents[1]
CLI = str(Path(sys.executable).parent / "orchestrator")
READY_SECONDS = 120.0
STOP_SECONDS = 30.0


@dataclass
class Part(Supervised):
    """An API or a worker, kept running from the checkout it is pointed at."""

    checkout: Path = REPO
    pids: list[int] = field(default_factory=list)
    _log_from: int = 0

    def start(self) -> None:
        self._log_from = self.log_path.stat().st_size if self.log_path.exists() else 0
        env = {**self.env, "PYTHONPATH": str(self.checkout)}
        with self.log_path.open("ab") as out:
            self.process = subprocess.Popen(
                self.argv,
                cwd=self.checkout,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1
        self.pids.append(self.process.pid)

    def ready(self) -> bool:
        if not self.alive():
            return False
        with self.log_path.open("rb") as log:
            log.seek(self._log_from)
            return b"Ready." in log.read()

    async def stop(self) -> None:
        """An orderly stop (SIGTERM), SIGKILL past `STOP_SECONDS`."""
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.to_thread(self.process.wait), STOP_SECONDS)
        except TimeoutError:
            self.kill()

    async def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_SECONDS
        while not self.ready():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not say Ready. within {READY_SECONDS:.0f} s ({self.log_path})")
            await asyncio.sleep(0.2)


@dataclass
class World:
    postgres: RestartablePostgres
    temporal: DevServer
    apis: list[Part]
    workers: list[Part]
    faults: list[str] = field(default_factory=list)
    upgraded: list[tuple[str, float]] = field(default_factory=list)

    @property
    def parts(self) -> list[Part]:
        return [*self.apis, *self.workers]

    async def fault(self, rng: random.Random, kind: str, down: float) -> None:
        """One fault of `bench.fault_soak`'s kinds: what it names killed (SIGKILL), down for `down` seconds."""
        parts = {
            "api": [rng.choice(self.apis)],
            "worker": [rng.choice(self.workers)],
            "workers": self.workers,
            "everything": self.parts,
        }.get(kind, [])
        await strike(kind, down, parts, self.postgres, self.temporal)

    async def random_faults(self, rng: random.Random, gap: tuple[float, float], until: float) -> None:
        """Faults at random gaps until the wall-clock time `until`, each down 0.5 to 8 s (the soak's)."""
        while True:
            await asyncio.sleep(rng.uniform(*gap))
            if time.time() >= until:
                return
            kind, down = rng.choice(KINDS), rng.uniform(0.5, 8)
            self.faults.append(f"{kind} {down:.1f}s")
            await self.fault(rng, kind, down)

    async def upgrade(self, checkout: Path) -> None:
        """Replace the parts one at a time by this checkout's, an API and a worker in turn, each ready before
        the next goes."""
        order = [p for pair in zip(self.apis, self.workers, strict=False) for p in pair]
        order += [p for p in self.parts if p not in order]
        for part in order:
            part.checkout = checkout
            starts = part.starts
            await part.stop()
            # The keeper starts it again (once a fault holding it lets go), now from this checkout.
            while part.starts == starts:  # noqa: ASYNC110 - the keeper's loop starts it, polled as it is
                await asyncio.sleep(0.1)
            await part.wait_ready()
            self.upgraded.append((part.name, time.time()))


def part_env(database_url: str, temporal_address: str, task_queue: str) -> dict[str, str]:
    return {
        **os.environ,
        "ORCHESTRATOR_DATABASE_URL": database_url,
        "ORCHESTRATOR_TEMPORAL_ADDRESS": temporal_address,
        "ORCHESTRATOR_TASK_QUEUE": task_queue,
        "ORCHESTRATOR_LIMITS__ACTIVATION_DELAY_SECONDS": "0",
        # Every lane fires about once a second under this load: the storm guard is not what is measured.
        "ORCHESTRATOR_LIMITS__LISTENER_FIRES_PER_MINUTE": "100000",
        "PYTHONUNBUFFERED": "1",
    }


def make_parts(
    folder: Path, env: dict[str, str], checkout: Path, apis: int, workers: int, ports: list[int]
) -> tuple[list[Part], list[Part]]:
    api_parts = [
        Part(
            f"api-{n + 1}",
            [CLI, "api"],
            {**env, "ORCHESTRATOR_HTTP_PORT": str(ports[n])},
            folder / f"api-{n + 1}.log",
            checkout=checkout,
        )
        for n in range(apis)
    ]
    worker_parts = [
        Part(
            f"worker-{n + 1}",
            [CLI, "worker", "--app", "bench.mix_app"],
            env,
            folder / f"worker-{n + 1}.log",
            checkout=checkout,
        )
        for n in range(workers)
    ]
    return api_parts, worker_parts
