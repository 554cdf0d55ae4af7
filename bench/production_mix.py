"""The production mix: many sessions, every mode at once, a captured table, steady load with bursts, for minutes,
optionally under random faults and through a rolling upgrade from an earlier release.

The platform runs as it would in production, on a PostgreSQL and a Temporal dev server of the bench's own:
`--apis` `orchestrator api` processes and `--workers` `orchestrator worker --app bench.mix_app` processes, each
started again whenever it exits. The app (`bench/mix_app.py`) gives every session a serial listener, one keyed by
a field (20 keys a session) and a parallel one, and a captured table; its run records its start and end through
two activities. `--sessions` sessions are opened, then `--writers` processes send a Poisson mix (`bench/mix_load.py`:
single writes and bulk emits through the doors, rows inserted into the captured table in the app's own
transactions) at `--rate` events/s for `--minutes`, `--burst-factor` times that for `--burst-seconds` every
`--burst-every` seconds. Then the bench waits until every matching event has reached a run (`--settle` at most).

`--faults`: the random faults of `bench.fault_soak` (PostgreSQL, an API, a worker, the workers, Temporal or
everything SIGKILLed, down 0.5 to 8 s) every `--fault-gap` seconds during the load.
`--upgrade-from COMMIT`: the APIs and workers start from COMMIT's checkout (a `git worktree` in the bench's
temporary folder) and are replaced one at a time by this checkout's at `--upgrade-at` of the load; at the end
the lanes open during the upgrade and the runs around it are replayed on this code, and the lanes' queues must
be empty. `--record-fixtures` writes histories of the earlier release's into tests/replay/histories.

Prints, per mode and kind of write: events, those that reached a run, commit-to-run-start p50/p99/p99.9; runs and
events per second; CPU per event per part and the machine's; memory of each process and the database's size over
time with their slopes; where it saturated; and the accounting (`bench/mix_verdict.py`). Exits non-zero when an
acknowledged write was lost or a lane broke its promise.

Run: .venv/bin/python -m bench.production_mix [--sessions 1000] [--rate 1000] [--minutes 10] [--faults]
     [--upgrade-from 1e0cb32] [--record-fixtures]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import asyncpg
import httpx

from bench.burst import process_pool, shut_writers
from bench.common import LOAD_PIDS
from bench.mix_load import Acks, Plan, write_mix
from bench.mix_meter import Meter
from bench.mix_report import logs_report, report, upgrade_report
from bench.mix_upgrade import commit_of, keep_fixtures, previous_checkout, remove_checkout, replay
from bench.mix_verdict import caught_up, judge
from bench.mix_world import REPO, Part, World, make_parts, part_env
from orchestrator.dev.embedded import free_port
from orchestrator.engine.worker import connect_temporal
from tests.crash.conftest import DevServer, RestartablePostgres, start_dev_server


async def open_sessions(url: str, count: int) -> list[str]:
    gate = asyncio.Semaphore(16)
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:

        async def one(n: int) -> str:
            async with gate:
                body = {"command": "open_session", "alias": f"tenant-{n}"}
                reply = (await http.post("/v1/commands", json=body)).json()
                assert reply["status"] == "success", reply
                return str(reply["session"]["id"])

        return await asyncio.gather(*(one(n) for n in range(count)))


def _pids_of(part: Part) -> Callable[[], list[int]]:
    return lambda: part.pids


def postmaster_pid(folder: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int((folder / "postmaster.pid").read_text().split()[0])
    return None


async def settle(database_url: str, within: float) -> float:
    """Wait until every matching event has reached a run and every run has ended; answers when (or gives up)."""
    deadline = time.time() + within
    while time.time() < deadline:
        # A database still starting after the last fault answers an error: asked again 5 s later.
        with contextlib.suppress(OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
            if await caught_up(database_url):
                break
        await asyncio.sleep(5)
    return time.time()


async def mix(args: argparse.Namespace) -> bool:
    rng = random.Random(args.seed)
    seconds = args.minutes * 60
    with tempfile.TemporaryDirectory(prefix="production-mix-") as tmp:
        folder = Path(tmp)
        previous = previous_checkout(args.upgrade_from, folder) if args.upgrade_from else None
        postgres = RestartablePostgres(folder / "postgres")
        await postgres.server.start()
        temporal = DevServer(await start_dev_server(folder / "temporal"))
        ports = [free_port() for _ in range(args.apis)]
        env = part_env(postgres.url, temporal.address, "mix")
        apis, workers = make_parts(folder, env, previous or REPO, args.apis, args.workers, ports)
        world = World(postgres, temporal, apis, workers)
        keepers: list[asyncio.Task[None]] = []
        try:
            # One worker first: it migrates and applies the app's plan; the rest then find it done.
            keepers.append(asyncio.create_task(workers[0].keep()))
            await workers[0].wait_ready()
            keepers += [asyncio.create_task(p.keep()) for p in world.parts[: args.apis] + workers[1:]]
            await asyncio.gather(*(p.wait_ready() for p in world.parts))
            urls = [f"http://127.0.0.1:{port}" for port in ports]
            sessions = await open_sessions(urls[0], args.sessions)
            meter = Meter(
                parts={
                    **{p.name: _pids_of(p) for p in world.parts},
                    "Temporal server": lambda: [pid] if (pid := temporal.server.pid) else [],
                    "writers": lambda: sorted(LOAD_PIDS),
                    "bench": lambda: [os.getpid()],
                },
                postgres_pid=lambda: postmaster_pid(postgres.data_dir),
                database_url=postgres.url,
                temporal_file=temporal.server.db_file,
                interval=args.sample_seconds,
            )
            async with process_pool(args.writers) as pool:
                began = time.time() + 1
                plans = [
                    Plan(
                        n,
                        urls,
                        postgres.url,
                        sessions,
                        args.rate / args.writers,
                        began,
                        seconds,
                        args.burst_every,
                        args.burst_seconds,
                        args.burst_factor,
                        args.seed * 100 + n,
                    )
                    for n in range(args.writers)
                ]
                await meter.sample()
                metering = asyncio.create_task(meter.run())
                futures = [asyncio.wrap_future(pool.submit(write_mix, plan)) for plan in plans]
                side = []
                if args.faults:
                    gap = tuple(float(x) for x in args.fault_gap.split("-"))
                    side.append(asyncio.create_task(world.random_faults(rng, (gap[0], gap[-1]), began + seconds)))
                upgrade_span = (0.0, 0.0)
                if previous is not None:

                    async def upgrade() -> tuple[float, float]:
                        await asyncio.sleep(max(began + seconds * args.upgrade_at - time.time(), 0))
                        start = time.time()
                        await world.upgrade(REPO)
                        return start, time.time()

                    upgrading = asyncio.create_task(upgrade())
                acks: list[Acks] = await asyncio.gather(*futures)
                load_end = time.time()
                await asyncio.gather(*side)
                if previous is not None:
                    upgrade_span = await upgrading
            await shut_writers()
            settled = await settle(postgres.url, args.settle)
            await meter.sample()
            metering.cancel()
            acked_events = [i for a in acks for kind in a.events.values() for i in kind]
            acked_rows = [i for a in acks for i in a.rows]
            verdict = await judge(postgres.url, acked_events, acked_rows)
            sound = report(
                args=args,
                argv=sys.argv[1:],
                world=world,
                meter=meter,
                acks=acks,
                verdict=verdict,
                began=began,
                load_end=load_end,
                settled=settled,
                upgrade_span=upgrade_span,
                upgrade_from=commit_of(args.upgrade_from) if args.upgrade_from else None,
            )
            logs_report(folder)
            if previous is not None:
                client = await connect_temporal(temporal.address, temporal.server.namespace)
                replayed = await replay(client, *upgrade_span, limit=args.replay_max)
                fixtures = await keep_fixtures(client, upgrade_span[0]) if args.record_fixtures else None
                sound = upgrade_report(commit_of(args.upgrade_from), replayed, fixtures) and sound
            return sound
        finally:
            for keeper in keepers:
                keeper.cancel()
            for part in world.parts:
                part.held = True
                part.kill()
            await temporal.stop()
            await postgres.stop()
            if previous is not None:
                remove_checkout(previous)


def main() -> None:
    # Each line as it is printed, also into a file: an hour's run that dies before its end keeps what it said.
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=1000.0, help="events per second, outside the bursts")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--writers", type=int, default=3, help="writer processes")
    parser.add_argument("--apis", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--burst-every", type=float, default=180.0, help="seconds; 0 for none")
    parser.add_argument("--burst-seconds", type=float, default=10.0)
    parser.add_argument("--burst-factor", type=float, default=10.0)
    parser.add_argument("--faults", action="store_true", help="random faults during the load")
    parser.add_argument("--fault-gap", default="20-60", help="seconds between faults, drawn uniformly")
    parser.add_argument("--upgrade-from", metavar="COMMIT", help="start from this commit, upgrade to this checkout")
    parser.add_argument("--upgrade-at", type=float, default=0.4, help="when the upgrade begins, a share of the load")
    parser.add_argument("--replay-max", type=int, default=300, help="lane and run histories replayed, each")
    parser.add_argument("--record-fixtures", action="store_true", help="keep the earlier release's histories")
    parser.add_argument("--settle", type=float, default=900.0, help="seconds to wait for every event to be run")
    parser.add_argument("--sample-seconds", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.record_fixtures and not args.upgrade_from:
        parser.error("--record-fixtures needs --upgrade-from")
    if not asyncio.run(mix(args)):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
