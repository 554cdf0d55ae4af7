"""Retention's rounds: a closed session past its retention goes entirely, its runs too; an open session's old
events go, with the records behind them, but never one a lane still waits on; reads past retention say so."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import httpx
import pytest
from temporalio.client import WorkflowExecutionStatus

from orchestrator.client import Client
from orchestrator.dev.inspect import tail_events
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from tests.engine.harness import Engine, eventually, recorder_listener, routed, write_many
from tests.retention.conftest import reply, retention_round, rows_of_session, session_ids, workflow_status

pytestmark = pytest.mark.devserver

SLEEPER = recorder_listener("sleeper", action={"type": "workflow", "workflow": "recorder", "input": {"sleep": 600}})
# A second after its commit an event is past a session's retention of one.
PAST_SECONDS = 1.3


async def open_session(engine: Engine, **retention: float) -> str:
    return str((await engine.command("open_session", retention=retention))["session"]["id"])


async def runs_ended(engine: Engine, session_id: str, event_ids: list[int]) -> None:
    async def ended() -> bool:
        runs = [r for r in engine.log.runs if r.input["session_id"] == session_id]
        covered = {i for r in runs for i in r.input["batch"]["event_ids"]}
        executions = (await engine.command("list_executions", session_id=session_id))["executions"]
        return set(event_ids) <= covered and all(x["status"] != "running" for x in executions)

    await eventually(ended, what=f"runs of events {event_ids}")


async def event_ids(engine: Engine, session_id: str, **more: Any) -> tuple[list[int], dict[str, Any]]:
    page = await engine.command("list_session_events", session_id=session_id, limit=1000, **more)
    return [e["id"] for e in page["events"]], page


async def test_a_closed_session_past_its_retention_goes_with_every_row_and_its_runs(engine: Engine) -> None:
    pool = engine.platform.store.pool
    await engine.command("save_listener", listener=SLEEPER)
    sid = await open_session(engine, closed_session_seconds=1)
    kept = await open_session(engine)  # closed too, under the deployment's 30 days
    for session in (sid, kept):
        await write_many(engine, session, ["missions/1"])

    async def sleeping() -> bool:
        return len(engine.log.runs) >= 2

    await eventually(sleeping, what="a sleeping run in each session")
    [run] = [r.input["execution_id"] for r in engine.log.runs if r.input["session_id"] == sid]
    for session in (sid, kept):
        await engine.command("close_session", session_id=session)
    ids = await session_ids(pool, sid)
    assert {"events", "executions", "batches", "lanes"} <= set(await rows_of_session(pool, sid, ids))
    await retention_round(engine)
    assert "sessions" in await rows_of_session(pool, sid, ids), "not before its retention has passed"

    await asyncio.sleep(PAST_SECONDS)
    assert await retention_round(engine) > 0
    assert await rows_of_session(pool, sid, ids) == {}
    assert await workflow_status(engine, run) == WorkflowExecutionStatus.TERMINATED
    assert (await reply(engine, "list_session_events", session_id=sid))["error"] == "not_found"
    assert (await engine.command("list_session_events", session_id=kept))["events"]


async def paused_past_retention(engine: Engine) -> tuple[str, list[int], int, list[int]]:
    """A session whose paused listener `held` waits on one event (`held`) between others that ran (`old`, then
    `later`), all past the session's retention and one retention round run: `(session, old, held, later)`."""
    pool = engine.platform.store.pool
    await engine.command("save_listener", listener=recorder_listener())
    held_filter = {"types": ["object.**"], "aliases": ["held/**"]}
    await engine.command("save_listener", listener=recorder_listener("held", filter=held_filter))
    sid = await open_session(engine, event_seconds=1)
    await engine.command("pause_listener", name="held", session_id=sid)
    old = await write_many(engine, sid, ["missions/1", "missions/2"])
    [held] = await write_many(engine, sid, ["held/1"])
    later = await write_many(engine, sid, ["missions/3"])
    await runs_ended(engine, sid, old + later)
    queued = await pool.fetch(
        "SELECT q.event_id FROM orchestrator.lane_events q JOIN orchestrator.lanes l ON l.id = q.lane_id WHERE"
        " l.session_id = $1",
        sid,
    )
    assert [r["event_id"] for r in queued] == [held], "the queue holds what waits, no more"
    await asyncio.sleep(PAST_SECONDS)
    assert await retention_round(engine) > 0
    return sid, old, held, later


async def test_an_open_sessions_old_events_go_but_never_one_a_paused_lane_waits_on(engine: Engine) -> None:
    pool = engine.platform.store.pool
    sid, old, held, later = await paused_past_retention(engine)
    kept, _ = await event_ids(engine, sid)
    assert held in kept and not set(old + later) & set(kept)
    assert "events" in await rows_of_session(pool, sid, {"lane_id": [], "batch_id": [], "event_id": [held]})

    # Resumed, the lane takes it; then it goes as the others did.
    await engine.command("resume_listener", name="held", session_id=sid)
    await runs_ended(engine, sid, [held])
    await asyncio.sleep(PAST_SECONDS)
    retention = engine.platform.settings.retention
    await engine.platform.store.trim_session(sid, 100, retention.event_seconds, retention.closed_session_seconds)
    kept, _ = await event_ids(engine, sid)
    assert held not in kept


async def test_a_stream_that_keeps_an_event_a_lane_waits_on_starts_at_it_in_every_read(engine: Engine) -> None:
    """`first_id` is the oldest event the session holds: a reply never holds an event before its own `first_id`,
    and a refusal of deleted history says the stream starts where a read finds its first event (both named a
    start past the kept event, which is no event of the session when it keeps nothing later)."""
    sid, old, held, later = await paused_past_retention(engine)
    kept, page = await event_ids(engine, sid, after=0)
    assert kept[0] == held and page["first_id"] == held, page
    simulated = await engine.command("simulate_listener", session_id=sid, listener=recorder_listener(), after=0)
    assert simulated["first_id"] == held, simulated
    refused = await reply(engine, "explain_event", session_id=sid, event_id=old[0])
    assert refused["error"] == "past_retention", refused
    said = rf"event_id: retention deleted the events of session {re.escape(repr(sid))} up to (\d+) but those a lane"
    assert (found := re.fullmatch(said + f" still waits on; its stream now starts at {held}", refused["message"]))
    assert int(found[1]) >= later[-1]
    # `orchestrator events` says so on stderr, and prints what is kept: from before the kept event, and from it.
    gaps: list[str] = []
    emitted: list[dict[str, Any]] = []
    await tail_events(Client.local(engine.platform), sid, emitted.append, after=old[0], on_gap=gaps.append)
    await tail_events(Client.local(engine.platform), sid, emitted.append, after=held, on_gap=gaps.append)
    assert [e["id"] for e in emitted] == kept + kept[1:]
    assert gaps == [
        f"retention deleted the events after {old[0]} up to {held - 1}; the stream starts at {held}",
        f"retention deleted events after {held} but those a lane still waits on; the stream starts at {held}",
    ]


async def test_reads_past_retention_say_where_the_stream_starts_and_refuse_deleted_history(engine: Engine) -> None:
    await engine.command("save_listener", listener=recorder_listener())
    sid = await open_session(engine, event_seconds=1)
    old = await write_many(engine, sid, ["missions/1", "missions/2"])
    await runs_ended(engine, sid, old)
    await asyncio.sleep(PAST_SECONDS)
    await retention_round(engine)
    [new] = await write_many(engine, sid, ["missions/3"])

    kept, page = await event_ids(engine, sid, after=old[0])
    assert new in kept and not set(old) & set(kept)
    assert page["first_id"] == kept[0], "a read from before what is kept says where the stream now starts"
    _, current = await event_ids(engine, sid, after=new - 1)
    assert "first_id" not in current, "a read within what is kept says nothing more"
    # So does a simulation, which reads the stream too.
    simulated = await engine.command("simulate_listener", session_id=sid, listener=recorder_listener(), after=0)
    assert simulated["first_id"] == kept[0], simulated
    within = await engine.command("simulate_listener", session_id=sid, listener=recorder_listener(), after=new - 1)
    assert "first_id" not in within
    # A stream (re)connecting from before what is kept says so first, then goes on from what is.
    async with (
        serve_api(create_app(engine.platform, engine.platform.settings), "127.0.0.1", 0) as url,
        httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(10, read=None)) as http,
        http.stream("GET", f"/v1/sessions/{sid}/stream", params={"after": str(old[0])}) as response,
    ):
        lines = (line async for line in response.aiter_lines() if line)
        assert [await anext(lines) for _ in range(4)] == [
            ": stream open",
            f"id: {old[0]}",
            "event: trimmed",
            "data: " + json.dumps({"after": old[0], "first_id": page["first_id"]}),
        ]
        # The Python client tells it (`on_trimmed`), and so does `orchestrator events`: deleted history is not
        # history that never was (both said nothing).
        client = Client.http(url)
        told: list[dict[str, int]] = []
        async for batch in client.stream(sid, after=old[0], on_trimmed=told.append):
            assert batch["first_id"] == page["first_id"]
            break
        assert told == [{"after": old[0], "first_id": page["first_id"]}]
        gaps: list[str] = []
        emitted: list[dict[str, Any]] = []
        await tail_events(client, sid, emitted.append, after=old[0], on_gap=gaps.append)
        assert [e["id"] for e in emitted] == kept
        assert gaps == [
            f"retention deleted the events after {old[0]} up to {page['first_id'] - 1};"
            f" the stream starts at {page['first_id']}"
        ]
        await client.aclose()

    refusals = {
        "explain_event": {"event_id": old[0]},
        "replay_batch": {"listener": "orchestrate", "batch": old[0]},
        "redeliver": {"listener": "orchestrate", "after": 0, "through": new},
    }
    for command, args in refusals.items():
        answer = await reply(engine, command, session_id=sid, **args)
        assert answer["status"] == "error" and answer["error"] == "past_retention", (command, answer)
        assert str(page["first_id"]) in answer["message"], answer
    # Within what is kept they answer as ever; past the end of the stream, not_found.
    assert (await reply(engine, "explain_event", session_id=sid, event_id=new))["status"] == "success"
    redelivered = await reply(engine, "redeliver", session_id=sid, listener="orchestrate", after=new - 1, through=new)
    assert redelivered["status"] == "success", redelivered
    assert (await reply(engine, "explain_event", session_id=sid, event_id=new + 10**6))["error"] == "not_found"


async def test_a_trim_deletes_in_statements_of_a_bounded_number_of_rows(engine: Engine) -> None:
    sid = await open_session(engine, event_seconds=1)
    objects = [{"alias": f"bulk/{n}", "value": {"type": "b"}} for n in range(120)]
    ids = (await engine.command("write_objects", session_id=sid, objects=objects))["event_ids"]
    await routed(engine, sid, ids[-1])
    await asyncio.sleep(PAST_SECONDS)
    retention = engine.platform.settings.retention
    store = engine.platform.store
    first = await store.trim_session(sid, 50, retention.event_seconds, retention.closed_session_seconds)
    assert first is not None and first["deleted"]["events"] == 50 and first["more"] is True
    # More left: the session is due again at once, and a round takes the rest, 50 rows a statement.
    assert await retention_round(engine) == 70
    kept, _ = await event_ids(engine, sid)
    assert not set(ids) & set(kept)
