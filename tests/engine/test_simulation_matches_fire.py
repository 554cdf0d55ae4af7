"""`simulate_listener` against the real fire on the same stream: serial, keyed and debounced bodies cut the same
batches in the simulation as the engine cut on the dev server (write actions, whose slot frees at once)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from orchestrator.platform import Platform
from tests.engine.harness import Engine, eventually, lane_outcomes, new_session, running_engine

BODIES: dict[str, dict[str, Any]] = {
    "serial": {"batch": {"window_seconds": 0.5}},
    "keyed": {"concurrency": {"mode": "keyed", "key": "alias"}, "batch": {"window_seconds": 0.5}},
    "debounced": {"batch": {"window_seconds": 0, "debounce_seconds": 0.4, "max_wait_seconds": 2}},
}


def listener(name: str, more: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "filter": {"types": ["object.written"], "aliases": ["m/**"]},
        "action": {"type": "object", "alias": f"views/{name}", "value": {"type": "view", "n": "{{ batch.count }}"}},
        **more,
    }


@pytest.fixture
async def engine(platform: Platform, dev_env: WorkflowEnvironment) -> AsyncIterator[Engine]:
    async with running_engine(platform, dev_env.client) as running:
        yield running


async def test_a_simulation_cuts_the_batches_the_engine_cut(engine: Engine) -> None:
    for name, more in BODIES.items():
        await engine.command("save_listener", listener=listener(name, more))
    sid = await new_session(engine)
    # Groups of writes far apart next to the windows, so what each batch holds depends on the rules, not on luck.
    groups = [["m/a", "m/b", "m/a"], ["m/b", "m/c"], ["m/a"], ["m/c", "m/c", "m/b", "m/a"]]
    written = []
    for group in groups:
        for alias in group:
            reply = await engine.command("write_object", session_id=sid, alias=alias, value={"type": "m"})
            written.append(reply["event_id"])
        await asyncio.sleep(1.6)

    async def fired(name: str) -> list[list[int]]:
        outcomes = await lane_outcomes(engine, sid, name)
        return sorted(sorted(o["event_ids"]) for o in outcomes if o["status"] == "success")

    async def all_fired() -> bool:
        for name in BODIES:
            if sorted(i for ids in await fired(name) for i in ids) != written:
                return False
        return True

    await eventually(all_fired, within=30, what="every listener to fire every write")
    for name in BODIES:
        simulated = await engine.command("simulate_listener", session_id=sid, listener=listener(name, BODIES[name]))
        assert sorted(sorted(b["event_ids"]) for b in simulated["batches"]) == await fired(name), name
        assert all(b["status"] == "success" for b in simulated["batches"])
    keyed = await engine.command("simulate_listener", session_id=sid, listener=listener("keyed", BODIES["keyed"]))
    assert {b["lane"] for b in keyed["batches"]} == {"m/a", "m/b", "m/c"}


async def test_a_simulation_cuts_one_batch_of_what_one_transaction_wrote_as_the_engine_does(engine: Engine) -> None:
    """The events of one commit reach the router together: a listener with no window takes them as one batch, and
    so does its simulation (it cut a batch of each, microseconds apart)."""
    now = listener("now", {"batch": {"window_seconds": 0}})
    await engine.command("save_listener", listener=now)
    sid = await new_session(engine)
    written = []
    for aliases in (["m/a", "m/b", "m/c"], ["m/a", "m/b"]):
        objects = [{"alias": alias, "value": {"type": "m"}} for alias in aliases]
        written.append((await engine.command("write_objects", session_id=sid, objects=objects))["event_ids"])
        await asyncio.sleep(1.0)

    async def fired() -> list[list[int]]:
        outcomes = await lane_outcomes(engine, sid, "now")
        return sorted(sorted(o["event_ids"]) for o in outcomes if o["status"] == "success")

    async def all_fired() -> bool:
        return sorted(i for ids in await fired() for i in ids) == sorted(i for ids in written for i in ids)

    await eventually(all_fired, within=30, what="the listener to fire every write")
    assert await fired() == written, "one batch a transaction"
    simulated = await engine.command("simulate_listener", session_id=sid, listener=now)
    assert [b["event_ids"] for b in simulated["batches"]] == written
