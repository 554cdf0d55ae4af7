"""`orchestrator dev` SIGKILLed mid-burst, the whole process tree at once, and started again at once on the same
data folder, `--rounds` times in a row: every acknowledged write must reach a run of each listener.

Each round opens a session and writes up to 1,500 objects through the HTTP door (8 keep-alive writers, aliases
over 20 keys) into a serial listener and a keyed one whose runs take 1 to 2 s (`bench/kill_tree_app.py`);
after a random number of acknowledged writes (200 to 1,400) it kills every process of the platform (the CLI,
its worker and API, the Temporal dev server, the embedded PostgreSQL), starts it again on the same folder, and
waits until every write acknowledged in the round is in the batch of a run that completed, for both listeners.
Prints per round: writes acknowledged, seconds to come up again, seconds until the last write reached a run,
and what is missing if anything; at the end, the rounds that lost nothing.

Run: .venv/bin/python -m bench.kill_tree [--rounds 20] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.kill_tree_app import KEYS, listeners
from orchestrator.dev.embedded import free_port
from tests.crash.dev_process import Dev

WRITERS = 8
BURST = 1_500
SETTLE_SECONDS = 300.0


async def command(http: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    reply: dict[str, Any] = (await http.post("/v1/commands", json=body)).json()
    return reply


async def burst(dev: Dev, kill_after: int) -> tuple[str, list[int]]:
    """Write until `kill_after` writes are acknowledged, then kill the tree; answer the session and the ids."""
    acknowledged: list[int] = []
    async with httpx.AsyncClient(base_url=dev.url, timeout=10) as http:
        session = (await command(http, {"command": "open_session"}))["session"]["id"]
        enough = asyncio.Event()
        counter = iter(range(BURST))

        async def writer() -> None:
            for i in counter:
                body = {
                    "command": "write_object",
                    "session_id": session,
                    "alias": f"burst/{i % KEYS}/{i}",
                    "value": {"type": "burst"},
                }
                try:
                    reply = await command(http, body)
                except (httpx.HTTPError, ValueError):
                    return  # the platform died under this request: not acknowledged
                if reply.get("status") == "success":
                    acknowledged.append(int(reply["event_id"]))
                    if len(acknowledged) >= kill_after:
                        enough.set()

        tasks = [asyncio.create_task(writer()) for _ in range(WRITERS)]
        done = asyncio.create_task(asyncio.wait(tasks))
        await asyncio.wait([asyncio.create_task(enough.wait()), done], return_when=asyncio.FIRST_COMPLETED)
        dev.kill()
        await asyncio.gather(*tasks)
    return session, acknowledged


async def missing_after(dev: Dev, session: str, acknowledged: list[int]) -> dict[str, set[int]]:
    """Until every acknowledged write is in a completed run's batch of each listener (or the time is up)."""
    names = [str(body["name"]) for body in listeners]
    missing = {name: set(acknowledged) for name in names}
    deadline = time.monotonic() + SETTLE_SECONDS
    async with httpx.AsyncClient(base_url=dev.url, timeout=10) as http:
        while any(missing.values()) and time.monotonic() < deadline:
            for name in names:
                reply = await command(http, {"command": "list_executions", "session_id": session, "listener": name})
                for execution in reply.get("executions", []):
                    if execution.get("status") == "completed":
                        missing[name].difference_update((execution.get("batch") or {}).get("event_ids", []))
            await asyncio.sleep(1.0)
    return {name: ids for name, ids in missing.items() if ids}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"seed {args.seed}, {args.rounds} rounds")
    with tempfile.TemporaryDirectory(prefix="kill-tree-") as folder:
        data_dir, port = Path(folder) / "data", free_port()
        dev = Dev(data_dir, port, Path(folder) / "dev-0.log", app="bench.kill_tree_app")
        await dev.ready()
        clean = 0
        try:
            for n in range(1, args.rounds + 1):
                session, acknowledged = await burst(dev, rng.randint(200, 1_400))
                began = time.monotonic()
                dev = Dev(data_dir, port, Path(folder) / f"dev-{n}.log", app="bench.kill_tree_app")
                await dev.ready()
                up = time.monotonic() - began
                missing = await missing_after(dev, session, acknowledged)
                caught_up = time.monotonic() - began
                clean += not missing
                lost = ", ".join(f"{k} {len(v)} missing (first {sorted(v)[:5]})" for k, v in missing.items())
                print(
                    f"round {n:2d}: {len(acknowledged):5d} acknowledged, up again in {up:5.1f} s,"
                    f" every write in a completed run {caught_up:6.1f} s after the kill  {lost or 'nothing lost'}",
                    flush=True,
                )
        finally:
            await dev.stop()
    print(f"{clean} of {args.rounds} rounds lost nothing")
    if clean < args.rounds:
        raise SystemExit(1)


if __name__ == "__main__":
    asyncio.run(main())
