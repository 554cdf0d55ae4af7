"""A listener's own throttle through the engine: a burst at its limit runs `runs` per `per_seconds`, every event
reaches a run, and a lane held by it says so, and until when, while it waits (docs/listeners.md, Throttle)."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from orchestrator.core.limits import Limits
from orchestrator.platform import Platform
from tests.engine.harness import Engine, eventually, new_session, recorder_listener, running_engine, write_many

pytestmark = pytest.mark.both_servers


def most_in_a_window(starts: list[float], seconds: float) -> int:
    """The most of `starts` inside any window of `seconds` (a start exactly `seconds` after another is outside)."""
    ordered = sorted(starts)
    return max((sum(1 for t in ordered[n:] if t < at + seconds - 1e-6) for n, at in enumerate(ordered)), default=0)


async def counted_starts(engine: Engine, session_id: str, listener: str) -> list[tuple[float, list[str], str]]:
    """Each counted batch of the listener, oldest first: when it was taken (the database's clock), the keys it
    counted under, and its lane."""
    async with engine.platform.store.transaction() as conn:
        rows = await conn.fetch(
            "SELECT extract(epoch FROM b.created_at)::float8 AS at, b.throttle_keys, l.lane FROM orchestrator.batches b"
            " JOIN orchestrator.lanes l ON l.id = b.lane_id"
            " WHERE b.session_id = $1 AND b.listener = $2 AND b.counted ORDER BY b.created_at",
            session_id,
            listener,
        )
    return [(float(r["at"]), list(r["throttle_keys"]), str(r["lane"])) for r in rows]


async def throttle_record(engine: Engine, session_id: str, listener: str) -> tuple[set[float], set[tuple[str, float]]]:
    """What the listener's throttle keeps, read in one statement: the starts it counts (each key's newest `runs`, on
    its own clock: a lane's time where that leads the database's), and each lane it holds with the time its step
    said it waits until (`throttled_until`)."""
    async with engine.platform.store.transaction() as conn:
        row = await conn.fetchrow(
            "SELECT ARRAY(SELECT extract(epoch FROM s)::float8 FROM orchestrator.throttle_keys k, unnest(k.starts) s"
            "  WHERE k.session_id = $1 AND k.listener = $2) AS starts,"
            " ARRAY(SELECT l.lane || ' ' || extract(epoch FROM l.throttled_until)::float8 FROM orchestrator.lanes l"
            "  WHERE l.session_id = $1 AND l.listener = $2 AND l.throttled_until IS NOT NULL) AS holds",
            session_id,
            listener,
        )
    assert row is not None
    holds = {(lane, float(until)) for lane, until in (text.rsplit(" ", 1) for text in row["holds"])}
    return {float(at) for at in row["starts"]}, holds


async def held_lanes(engine: Engine, session_id: str, listener: str) -> dict[str, dict[str, Any]]:
    """The listener's lanes that say its throttle holds them, by lane."""
    reply = await engine.command("list_session_listeners", session_id=session_id)
    (found,) = [item for item in reply["listeners"] if item["name"] == listener]
    return {
        lane["lane"]: lane["waiting"]
        for lane in found["lanes"]
        if lane["waiting"] is not None and lane["waiting"].get("limit") == "throttle"
    }


async def test_a_burst_at_the_limit_runs_as_often_as_the_throttle_lets_it_and_loses_nothing(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    """Twelve keys written at once, three runs a two-second window: never more than three start in two seconds, none
    before the throttle lets it, every event in one; each lane the throttle held was held until the moment the
    throttle's own record frees the next start, no later, and said so, with that time.

    How soon a lane wakes after that moment is the machine's (a Temporal timer, then a step): not asserted."""
    platform.settings = platform.settings.model_copy(
        update={
            "limits": Limits(activation_delay_seconds=0),
            "search_attributes": not temporal_env.supports_time_skipping,
        }
    )
    runs, per_seconds, keys = 3, 2.0, 12
    async with running_engine(platform, temporal_env.client) as engine:
        body = recorder_listener(
            "burst",
            concurrency={"mode": "keyed", "key": "alias", "max_parallel": 8},
            batch={"window_seconds": 0, "max_events": 1},
            throttle={"per_seconds": per_seconds, "runs": runs},
        )
        await engine.command("save_listener", listener=body)
        sid = await new_session(engine)
        ids = await write_many(engine, sid, [f"missions/{n}" for n in range(keys)])

        seen: dict[str, dict[str, Any]] = {}
        counted: set[float] = set()
        holds: set[tuple[str, float]] = set()

        async def read_the_throttle() -> None:
            while True:
                kept, held = await throttle_record(engine, sid, "burst")
                counted.update(kept)
                holds.update(held)
                await asyncio.sleep(0.02)

        async def all_ran() -> bool:
            seen.update(await held_lanes(engine, sid, "burst"))
            return len(engine.log.runs) >= keys

        reading = asyncio.ensure_future(read_the_throttle())
        try:
            await eventually(all_ran, within=60, what=f"{keys} runs")
        finally:
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reading
        await asyncio.sleep(0.5)
        assert sorted(engine.log.event_ids("burst")) == ids, "every event reached a run, once"

        starts = await counted_starts(engine, sid, "burst")
        assert len(starts) == keys and all(k == ["_"] for _, k, _ in starts)
        at = [t for t, _, _ in starts]
        assert most_in_a_window(at, per_seconds) == runs, "never more than the throttle lets go, and that many"
        # Each start after the first three waited for the start `runs` before it to leave the window.
        early = [at[n] - (at[n - runs] + per_seconds) for n in range(runs, keys)]
        assert min(early) >= -1e-3, early
        span = at[-1] - at[0]
        assert span >= (keys // runs - 1) * per_seconds - 1e-3
        # As often as it lets them: a lane the throttle held was told to wait, on the throttle's own clock, until the
        # oldest of the newest three starts leaves the window, and not a moment longer. The throttle's record says so
        # (the starts it counted, as its batches and its own row keep them, and the time each held lane was told),
        # whatever the machine's speed; how soon after that time a lane wakes is the machine's, and not asserted.
        assert holds, "the throttle held lanes"
        frees_at = [start + per_seconds for start in [*at, *counted]]
        off_schedule = sorted((lane, until) for lane, until in holds if min(abs(until - t) for t in frees_at) > 1e-3)
        assert not off_schedule, f"held until no start's window ends: {off_schedule}; the starts: {at}"
        assert seen, "a lane the throttle held said so"
        taken_at = {lane: t for t, _, lane in starts}
        for lane, waiting in seen.items():
            assert waiting["reason"] == "throttled" and waiting["throttle"] == {"per_seconds": 2.0, "runs": 3}
            assert "held by its throttle (3 per 2 s) until" in waiting["text"]
            # Its batch started no sooner than the time it said (a lane held again after losing the race to the
            # others said a later time then).
            assert taken_at[lane] >= datetime.fromisoformat(waiting["until"]).timestamp() - 1e-3


async def test_a_throttle_by_key_lets_each_key_go_its_own_pace(
    platform: Platform, temporal_env: WorkflowEnvironment
) -> None:
    """Per alias, two runs a two-second window: six writes to each of two threads run two at a time per thread,
    the two threads side by side; no event is lost, and none of a thread waits for the other's throttle."""
    platform.settings = platform.settings.model_copy(
        update={
            "limits": Limits(activation_delay_seconds=0),
            "search_attributes": not temporal_env.supports_time_skipping,
        }
    )
    async with running_engine(platform, temporal_env.client) as engine:
        body = recorder_listener(
            "threads",
            concurrency={"mode": "keyed", "key": "alias", "max_parallel": 4},
            batch={"window_seconds": 0, "max_events": 1},
            throttle={"per_seconds": 2, "runs": 2, "key": "alias"},
        )
        await engine.command("save_listener", listener=body)
        sid = await new_session(engine)
        ids = await write_many(engine, sid, ["missions/a", "missions/b"] * 6)

        async def all_ran() -> bool:
            return len(engine.log.runs) >= 12

        await eventually(all_ran, within=60, what="12 runs")
        assert sorted(engine.log.event_ids("threads")) == ids
        starts = await counted_starts(engine, sid, "threads")
        by_key: dict[str, list[float]] = {}
        for at, keys, _ in starts:
            assert len(keys) == 1
            by_key.setdefault(keys[0], []).append(at)
        assert sorted(by_key) == ["missions/a", "missions/b"]
        assert all(len(v) == 6 and most_in_a_window(v, 2.0) == 2 for v in by_key.values())
        # The two keys went side by side, each under a throttle of its own: some 2 s held both keys' two starts
        # (one throttle for both would have let two in any 2 s, as it lets each key).
        assert most_in_a_window([at for at, _, _ in starts], 2.0) == 4
        assert most_in_a_window([t for t, _, _ in starts], 2.0) == 4
