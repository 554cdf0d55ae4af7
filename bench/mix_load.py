"""The production mix's writers: one process each, sending a Poisson mix of writes at a share of the rate.

Each arrival is one of three kinds, drawn by its share of the events (not of the requests): a single
`write_object` through the HTTP door, a bulk `emit_events` of `BULK` facts through the door, or one row
inserted into the captured table `mix_rows` in a transaction of the application's own (asyncpg, straight to
PostgreSQL). Arrivals come at `rate` events/s, `burst_factor` times that for `burst_seconds` every
`burst_every` seconds (the first halfway through the first period). A write is retried until it is
acknowledged: through the other API when one does not answer, and a captured row by its own id, so a retry
after a lost commit inserts it at most once. What is not sent by the deadline (plus a short grace) is dropped
and counted. Answers every acknowledged event id and captured row id.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass, field

import asyncpg

from bench.keep_alive import KeepAlive
from bench.mix_app import KEYS

BULK = 50
SHARES = {"single": 0.2, "bulk": 0.5, "captured": 0.3}
SIZES = {"single": 1, "bulk": BULK, "captured": 1}
IN_FLIGHT = 24
CONNECTIONS = 4
GRACE_SECONDS = 5.0
GIVE_UP_SECONDS = 180.0


@dataclass(frozen=True)
class Plan:
    index: int
    apis: list[str]
    database_url: str
    sessions: list[str]
    rate: float
    began: float
    seconds: float
    burst_every: float
    burst_seconds: float
    burst_factor: float
    seed: int


@dataclass
class Acks:
    events: dict[str, list[int]] = field(default_factory=lambda: {"single": [], "bulk": []})
    rows: list[int] = field(default_factory=list)
    offered: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SHARES, 0))
    dropped: int = 0
    retries: int = 0


def in_burst(plan: Plan, t: float) -> bool:
    if plan.burst_every <= 0:
        return False
    phase = (t - plan.burst_every / 2) % plan.burst_every
    return t >= plan.burst_every / 2 and phase < plan.burst_seconds


def write_mix(plan: Plan) -> Acks:
    return asyncio.run(_write_mix(plan))


async def _write_mix(plan: Plan) -> Acks:
    rng = random.Random(plan.seed)
    acks = Acks()
    arrivals: asyncio.Queue[tuple[str, int] | None] = asyncio.Queue()
    ids = iter(range(plan.index, 1 << 62, 1 << 8))  # a writer's own row ids and aliases, by its index
    deadline = plan.began + plan.seconds
    kinds = list(SHARES)
    weights = [SHARES[k] / SIZES[k] for k in kinds]
    per_request = sum(SHARES[k] for k in kinds) / sum(weights)  # events an average arrival carries

    async def schedule() -> None:
        t = max(time.time(), plan.began)
        while True:
            rate = plan.rate * (plan.burst_factor if in_burst(plan, t - plan.began) else 1.0)
            t += rng.expovariate(rate / per_request)
            if t >= deadline:
                break
            await asyncio.sleep(max(t - time.time(), 0))
            kind = rng.choices(kinds, weights)[0]
            acks.offered[kind] += SIZES[kind]
            arrivals.put_nowait((kind, next(ids)))
        for _ in range(IN_FLIGHT):
            arrivals.put_nowait(None)

    # The captured rows' connections: a few a process, as an application's pool would hold.
    app = await asyncpg.create_pool(plan.database_url, min_size=0, max_size=CONNECTIONS)

    async def slot(k: int) -> None:
        doors = [KeepAlive(url) for url in plan.apis]
        turn = k
        try:
            while (arrival := await arrivals.get()) is not None:
                if time.time() > deadline + GRACE_SECONDS:
                    acks.dropped += SIZES[arrival[0]]
                    continue
                kind, n = arrival
                session = rng.choice(plan.sessions)
                key = f"k{rng.randrange(KEYS)}"
                give_up = time.time() + GIVE_UP_SECONDS
                while time.time() < give_up:
                    try:
                        if kind == "captured":
                            async with app.acquire(timeout=10) as conn, conn.transaction():
                                await conn.execute(
                                    "INSERT INTO public.mix_rows (id, session_id, key, n) VALUES ($1, $2, $3, $1)"
                                    " ON CONFLICT (id) DO NOTHING",
                                    n,
                                    session,
                                    key,
                                )
                            acks.rows.append(n)
                        else:
                            turn += 1
                            reply = await doors[turn % len(doors)].post("/v1/commands", _body(kind, session, key, n))
                            if reply.get("status") != "success":
                                raise ConnectionError(str(reply.get("error")))
                            acks.events[kind].extend(
                                [int(reply["event_id"])] if kind == "single" else [int(i) for i in reply["event_ids"]]
                            )
                        break
                    except (
                        OSError,
                        ConnectionError,
                        TimeoutError,
                        ValueError,
                        asyncpg.PostgresError,
                        asyncpg.InterfaceError,
                    ):
                        acks.retries += 1
                        for door in doors:
                            await door.aclose()
                        await asyncio.sleep(0.2)
        finally:
            for door in doors:
                await door.aclose()

    try:
        await asyncio.gather(schedule(), *(slot(k) for k in range(IN_FLIGHT)))
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(app.close(), 10)
    return acks


def _body(kind: str, session: str, key: str, n: int) -> dict[str, object]:
    if kind == "single":
        return {
            "command": "write_object",
            "session_id": session,
            "alias": f"mix/{key}/{n}",
            "value": {"type": "mix", "n": n},
        }
    facts = [{"type": "mix.fact", "data": {"doc": {"key": key, "n": n * BULK + i}}} for i in range(BULK)]
    return {"command": "emit_events", "session_id": session, "events": facts}
