"""A random-fault soak in the production shape: an external PostgreSQL and Temporal, an API process and two
workers kept running by a supervisor that starts again whatever exits, steady writes, and a seeded random
sequence of faults.

Per seed: a PostgreSQL cluster and a Temporal dev server of its own, `orchestrator api` and two `orchestrator
worker --app tests.crash.app` processes (a serial listener and a keyed one over 4 keys with 2 key slots, runs
that record their start and end in `crash_runs`), writers at `--rate` writes/s through the HTTP door, each write
retried until it is acknowledged. Then `--faults` faults, each one of: PostgreSQL SIGKILLed with all its
backends, the API, one worker, both workers, Temporal, or everything at once; each after a random gap (3 to 15 s)
and down for a random time (0.5 to 8 s) before the supervisor (or the bench, for the servers) starts it again.
After the last fault the writes stop and the soak waits for the platform to catch up.

Prints per seed: writes acknowledged, the faults, whether every committed write reached a run of each listener
(`missing`), runs that overlapped in a lane (never, for serial and keyed), moments the keyed listener ran more
keys than its slots, events that reached two runs (allowed: at least once), and how long after the last fault
everything had reached a run. Exits non-zero when a seed lost anything or broke a lane's promise.

Run: .venv/bin/python -m bench.fault_soak [--seeds 0-19] [--faults 12] [--rate 40]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from orchestrator.dev.embedded import free_port
from tests.crash.conftest import (
    KEYS,
    DevServer,
    RestartablePostgres,
    judge,
    keyed_listener,
    prepare_database,
    serial_listener,
    start_dev_server,
)

REPO = Path(__file__).resolve().parents[1]
CLI = str(Path(sys.executable).parent / "orchestrator")
KINDS = ("postgres", "api", "worker", "workers", "temporal", "everything")
WRITERS = 4
SETTLE_SECONDS = 300.0
READY_SECONDS = 60.0


@dataclass
class Supervised:
    """A platform process kept running: started again whenever it has exited, unless a fault holds it down."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    held: bool = False
    starts: int = 0

    def start(self) -> None:
        with self.log_path.open("ab") as out:
            self.process = subprocess.Popen(
                self.argv,
                cwd=REPO,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    async def keep(self) -> None:
        while True:
            if not self.held and not self.alive():
                self.start()
            await asyncio.sleep(0.2)


async def strike(
    kind: str, down: float, parts: Sequence[Supervised], postgres: RestartablePostgres, temporal: DevServer
) -> None:
    """One fault of `kind`: the processes `parts` killed (SIGKILL) and held down, PostgreSQL and Temporal crashed
    when `kind` names them (or `everything`), all of it started again `down` seconds later."""
    for part in parts:
        part.held = True
        part.kill()
    if kind in ("postgres", "everything"):
        postgres.crash()
    if kind in ("temporal", "everything"):
        await temporal.kill()
    await asyncio.sleep(down)
    if kind in ("postgres", "everything"):
        await postgres.start_again()
    if kind in ("temporal", "everything"):
        await temporal.start_again()
    for part in parts:
        part.held = False


@dataclass
class World:
    folder: Path
    postgres: RestartablePostgres
    temporal: DevServer
    api: Supervised
    workers: list[Supervised]
    api_url: str
    acknowledged: list[int] = field(default_factory=list)
    attempts: int = 0

    async def fault(self, kind: str, down: float) -> None:
        parts = {
            "api": [self.api],
            "worker": [self.workers[0]],
            "workers": self.workers,
            "everything": [self.api, *self.workers],
        }.get(kind, [])
        await strike(kind, down, parts, self.postgres, self.temporal)

    async def write(self, http: httpx.AsyncClient, session: str, n: int) -> None:
        """One write, retried (to the same alias) until it is acknowledged."""
        body = {
            "command": "write_object",
            "session_id": session,
            "alias": f"crash/k{n % KEYS}/{n}",
            "value": {"type": "crash", "n": n},
        }
        while True:
            self.attempts += 1
            with contextlib.suppress(httpx.HTTPError, ValueError):
                reply = (await http.post("/v1/commands", json=body)).json()
                if reply.get("status") == "success":
                    self.acknowledged.append(int(reply["event_id"]))
                    return
            await asyncio.sleep(0.2)


async def wait_ready(url: str) -> None:
    deadline = time.monotonic() + READY_SECONDS
    async with httpx.AsyncClient(base_url=url, timeout=5) as http:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if (await http.post("/v1/commands", json={"command": "list_listeners"})).status_code == 200:
                    return
            await asyncio.sleep(0.3)
    raise RuntimeError("the API did not come up")


async def one_seed(seed: int, faults: int, rate: float) -> bool:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix=f"fault-soak-{seed}-") as tmp:
        folder = Path(tmp)
        postgres = RestartablePostgres(folder / "postgres")
        await postgres.server.start()
        await prepare_database(postgres.url)
        temporal = DevServer(await start_dev_server(folder / "temporal"))
        port = free_port()
        env = {
            **os.environ,
            "ORCHESTRATOR_DATABASE_URL": postgres.url,
            "ORCHESTRATOR_TEMPORAL_ADDRESS": temporal.address,
            "ORCHESTRATOR_TASK_QUEUE": f"soak-{seed}",
            "ORCHESTRATOR_HTTP_PORT": str(port),
            "ORCHESTRATOR_LIMITS__ACTIVATION_DELAY_SECONDS": "0",
            "ORCHESTRATOR_LIMITS__LISTENER_FIRES_PER_MINUTE": "100000",
            "PYTHONUNBUFFERED": "1",
        }
        api = Supervised("api", [CLI, "api"], env, folder / "api.log")
        workers = [
            Supervised(f"worker-{n}", [CLI, "worker", "--app", "tests.crash.app"], env, folder / f"worker-{n}.log")
            for n in (1, 2)
        ]
        world = World(folder, postgres, temporal, api, workers, f"http://127.0.0.1:{port}")
        keepers = [asyncio.create_task(part.keep()) for part in (api, *workers)]
        done: list[str] = []
        try:
            await wait_ready(world.api_url)
            async with httpx.AsyncClient(base_url=world.api_url, timeout=10) as http:
                for body in (serial_listener(), keyed_listener()):
                    reply = (
                        await http.post("/v1/commands", json={"command": "save_listener", "listener": body})
                    ).json()
                    assert reply["status"] == "success", reply
                session = (await http.post("/v1/commands", json={"command": "open_session"})).json()["session"]["id"]
                stop = asyncio.Event()

                async def writer(first: int) -> None:
                    n = first
                    while not stop.is_set():
                        await world.write(http, session, n)
                        n += WRITERS
                        await asyncio.sleep(WRITERS / rate)

                writing = [asyncio.create_task(writer(k)) for k in range(WRITERS)]
                await asyncio.sleep(3)
                for _ in range(faults):
                    await asyncio.sleep(rng.uniform(3, 15))
                    kind, down = rng.choice(KINDS), rng.uniform(0.5, 8)
                    done.append(f"{kind} {down:.1f}s")
                    await world.fault(kind, down)
                await asyncio.sleep(3)
                stop.set()
                await asyncio.gather(*writing)
            after = time.monotonic()
            verdict = await judge(postgres.url)
            while (verdict.missing or verdict.open_runs) and time.monotonic() < after + SETTLE_SECONDS:
                await asyncio.sleep(1.0)
                verdict = await judge(postgres.url)
            caught_up = time.monotonic() - after
        finally:
            for keeper in keepers:
                keeper.cancel()
            for part in (api, *workers):
                part.held = True
                part.kill()
            await temporal.stop()
            await postgres.stop()
    sound = not (verdict.missing or verdict.open_runs or verdict.overlaps or verdict.over_cap)
    print(
        f"seed {seed:3d}: {len(world.acknowledged)} writes acknowledged ({world.attempts} attempts);"
        f" faults: {', '.join(done)}; restarts: api {api.starts - 1}, workers"
        f" {sum(w.starts for w in workers) - 2}",
        flush=True,
    )
    print(
        f"          {verdict.runs} runs, {len(verdict.missing)} missing, {len(verdict.overlaps)} overlaps,"
        f" {len(verdict.over_cap)} over the key cap, events in two runs {verdict.duplicates or 0};"
        f" caught up {caught_up:.1f} s after the last fault  {'OK' if sound else 'FAILED'}",
        flush=True,
    )
    if verdict.missing:
        print(f"          missing (listener, session, id), first 10: {verdict.missing[:10]}", flush=True)
    return sound


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0-19", help="first-last (inclusive)")
    parser.add_argument("--faults", type=int, default=12)
    parser.add_argument("--rate", type=float, default=40.0, help="writes per second")
    args = parser.parse_args()
    first, _, last = args.seeds.partition("-")
    seeds = range(int(first), int(last or first) + 1)
    sound = [await one_seed(seed, args.faults, args.rate) for seed in seeds]
    print(f"{sum(sound)} of {len(sound)} seeds lost nothing and kept every lane's promise")
    if not all(sound):
        raise SystemExit(1)


if __name__ == "__main__":
    asyncio.run(main())
