"""The HTTP door under a keep-alive client, against a client that opens a new connection per request.

Measures, side by side in one run against the real API server (uvicorn on a socket the runtime binds) and an
embedded PostgreSQL, from a process of its own as a user's client is:
- p50/p99 of sequential `write_object` over one keep-alive connection, and over a new connection each;
- writes/s with 1, 8 and 32 concurrent keep-alive clients.

A keep-alive p50 far above the new-connection p50 is the sign of Nagle's algorithm meeting delayed ACKs
(about 40 ms a request): the accepted sockets must have TCP_NODELAY set.

With `--key` the API needs a key (a bootstrap token is set) and the clients write with a created key: what a
key costs a request (its lookup, its rate and its session's, the decision), against the open API without it.

Run: .venv/bin/python -m bench.http_door [--writes 200] [--seconds 5] [--key]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import multiprocessing
import secrets
import time

import httpx
from pydantic import SecretStr

from bench.common import percentile, row, scratch_database
from orchestrator.config import Settings
from orchestrator.core.limits import Limits
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform


def _headers(secret: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"} if secret else {}


def _sequential(url: str, session: str, writes: int, keep_alive: bool, secret: str | None = None) -> list[float]:
    """Seconds per write, one after the other, over one connection or a new connection each."""
    limits = httpx.Limits(max_keepalive_connections=1 if keep_alive else 0)
    took: list[float] = []
    with httpx.Client(base_url=url, limits=limits, headers=_headers(secret)) as http:
        for n in range(writes):
            body = {
                "command": "write_object",
                "session_id": session,
                "alias": f"bench/{n % 50}",
                "value": {"type": "bench", "n": n},
            }
            began = time.perf_counter()
            reply = http.post("/v1/commands", json=body).json()
            took.append(time.perf_counter() - began)
            assert reply["status"] == "success", reply
    return took


def _concurrent(url: str, session: str, clients: int, seconds: float, secret: str | None = None) -> float:
    """Writes/s with `clients` keep-alive clients writing for `seconds`."""

    async def run() -> float:
        done = 0
        deadline = time.perf_counter() + seconds

        async def client(n: int) -> None:
            nonlocal done
            limits = httpx.Limits(max_keepalive_connections=1)
            async with httpx.AsyncClient(base_url=url, limits=limits, headers=_headers(secret)) as http:
                while time.perf_counter() < deadline:
                    body = {
                        "command": "write_object",
                        "session_id": session,
                        "alias": f"bench/{n}",
                        "value": {"type": "bench"},
                    }
                    reply = (await http.post("/v1/commands", json=body)).json()
                    assert reply["status"] == "success", reply
                    done += 1

        began = time.perf_counter()
        await asyncio.gather(*(client(n) for n in range(clients)))
        return done / (time.perf_counter() - began)

    return asyncio.run(run())


async def main(writes: int, seconds: float, keyed: bool) -> None:
    settings = Settings(database_url=None, temporal_address=None, limits=Limits(activation_delay_seconds=0))
    if keyed:
        settings = settings.model_copy(update={"api_token": SecretStr(secrets.token_urlsafe(16))})
    async with scratch_database() as database_url:
        platform = await Platform.connect(settings, database_url)
        try:
            session = (await platform.command({"command": "open_session", "alias": "bench/door"}))["session"]["id"]
            secret = None
            if keyed:
                # A busy key's rate, high enough that it never refuses here: what is measured is its cost.
                body = {"command": "create_api_key", "name": "bench", "scopes": ["write:bench/**"]}
                made = await platform.command({**body, "requests_per_second": 1_000_000})
                secret = str(made["key"]["secret"])
            async with serve_api(create_app(platform, settings), "127.0.0.1", 0) as url:
                spawn = multiprocessing.get_context("spawn")
                with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool:
                    loop = asyncio.get_running_loop()

                    async def off(fn: object, *args: object) -> object:
                        return await loop.run_in_executor(pool, fn, *args)  # type: ignore[arg-type]

                    await off(_sequential, url, session, 20, True, secret)  # warm up both sides
                    kept = await off(_sequential, url, session, writes, True, secret)
                    fresh = await off(_sequential, url, session, writes, False, secret)
                    door = "with a key" if keyed else "open"
                    print(f"write_object through the HTTP door ({door}), {writes} sequential writes each")
                    for label, took in (("keep-alive connection", kept), ("a new connection per request", fresh)):
                        assert isinstance(took, list)
                        row(f"{label}: p50", percentile(took, 50) * 1000, "ms")
                        row(f"{label}: p99", percentile(took, 99) * 1000, "ms")
                    assert isinstance(kept, list) and isinstance(fresh, list)
                    ratio = percentile(kept, 50) / percentile(fresh, 50)
                    row("keep-alive p50 / new-connection p50", ratio, "x")
                    print(f"concurrent keep-alive clients, {seconds:g} s each")
                    for clients in (1, 8, 32):
                        rate = await off(_concurrent, url, session, clients, seconds, secret)
                        assert isinstance(rate, float)
                        row(f"{clients} clients", rate, "writes/s")
        finally:
            await platform.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--key", action="store_true", help="write with a created key instead of an open API")
    args = parser.parse_args()
    asyncio.run(main(args.writes, args.seconds, args.key))
