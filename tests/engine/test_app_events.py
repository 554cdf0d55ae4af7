"""The application's own events through the engine: keyed by `data`, emitted once from a retried run, causes
followed both ways through two listeners, and `graph.changed` waking a listener with the nodes it changed."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import pytest
from temporalio import workflow
from temporalio.testing import WorkflowEnvironment

from orchestrator.platform import Platform
from orchestrator.transactional import emit
from tests.engine.harness import Engine, eventually, new_session, recorder_listener, routed, running_engine
from tests.engine.test_run_sdk import FailAfterCommit

pytestmark = pytest.mark.both_servers

with workflow.unsafe.imports_passed_through():
    from orchestrator.sdk import RunInput, RunSession

TICKET = {
    "name": "ticket.opened",
    "schema": {
        "type": "object",
        "properties": {"x": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["x"],
        "additionalProperties": False,
    },
}


@workflow.defn(name="opener")
class Opener:
    """Emits one `ticket.opened` per object its batch points at, its `x` the alias's last part."""

    @workflow.run
    async def run(self, run: RunInput) -> list[int]:
        session = RunSession(run)
        pointers = await session.batch_messages()
        return [await session.emit("ticket.opened", {"x": m["alias"].rsplit("/", 1)[-1]}) for m in pointers]


@pytest.fixture
async def events_engine(platform: Platform, temporal_env: WorkflowEnvironment) -> AsyncIterator[Engine]:
    def wrap(activities: list[Callable[..., Any]]) -> list[Callable[..., Any]]:
        def named(fn: Callable[..., Any]) -> str:
            return str(getattr(fn, "__temporal_activity_definition").name)

        return [FailAfterCommit(fn).call if named(fn) == "orchestrator.session" else fn for fn in activities]

    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping}
    )
    async with running_engine(platform, temporal_env.client, workflows=[Opener], wrap=wrap) as engine:
        await engine.command("save_event_type", **TICKET)
        yield engine


def triage(**overrides: Any) -> dict[str, Any]:
    """A listener on the declared tickets, one lane per `data.x`, whose action is the recorder."""
    return recorder_listener(
        "triage",
        filter={"types": ["ticket.*"]},
        concurrency={"mode": "keyed", "key": "data.x"},
        batch={"window_seconds": 0.3, "max_events": 100},
        **overrides,
    )


async def test_a_listener_keyed_by_data_batches_each_key_apart(events_engine: Engine) -> None:
    engine = events_engine
    await engine.command("save_listener", listener=triage())
    sid = await new_session(engine)
    events = [{"type": "ticket.opened", "data": {"x": x, "n": n}} for n, x in enumerate("abab")]
    ids = (await engine.command("emit_events", session_id=sid, events=events))["event_ids"]
    await routed(engine, sid, ids[-1])

    async def both() -> bool:
        return len(engine.log.event_ids()) == 4 and all(r.ended is not None for r in engine.log.runs)

    await eventually(both, what="both keys' batches")
    by_lane = {r.input["batch"]["lane"]: r.input["batch"]["event_ids"] for r in engine.log.runs}
    assert by_lane == {"a": [ids[0], ids[2]], "b": [ids[1], ids[3]]}


async def test_a_retried_emit_writes_once_and_causes_are_followed_both_ways(events_engine: Engine) -> None:
    engine = events_engine
    opener = recorder_listener(
        "opener",
        filter={"types": ["object.written"], "aliases": ["tickets/**"]},
        batch={"window_seconds": 0.2, "max_events": 100},
        action={"type": "workflow", "workflow": "opener"},
    )
    await engine.command("save_listener", listener=opener)
    await engine.command("save_listener", listener=triage())
    sid = await new_session(engine)
    write = await engine.command("write_object", session_id=sid, alias="tickets/a", value={"type": "t"}, client="desk")

    async def triaged() -> bool:
        return any(r.ended is not None for r in engine.log.runs)

    await eventually(triaged, what="the triage run the emitted ticket started")
    events = (await engine.command("list_session_events", session_id=sid, types=["ticket.opened"]))["events"]
    assert len(events) == 1, "the session call failed after its commit and was retried: one event all the same"
    [ticket] = events
    assert ticket["data"] == {"x": "a"}
    assert ticket["source"]["listener"] == "opener"
    assert ticket["cause"]["batch"]["first_id"] == write["event_id"]

    back = (await engine.command("explain_event", session_id=sid, event_id=ticket["id"]))["caused_by"]
    kinds = [next(iter(step)) for step in back]
    assert kinds == ["run", "batch", "event", "request"], back
    assert back[2]["event"]["id"] == write["event_id"]
    assert back[3]["request"]["client"] == "desk"

    forward = (await engine.command("explain_event", session_id=sid, event_id=write["event_id"]))["caused"]
    [opened] = forward
    assert opened["batch"]["listener"] == "opener"
    [wrote] = [w for w in opened["wrote"] if w["event"]["type"] == "ticket.opened"]
    assert wrote["event"]["id"] == ticket["id"]
    [triaged_batch] = wrote["caused"]
    assert triaged_batch["batch"]["listener"] == "triage"
    assert triaged_batch["batch"]["lane"] == "a"
    assert triaged_batch["runs"] == [engine.log.runs[0].input["execution_id"]]


async def test_graph_changed_wakes_a_listener_on_the_nodes_it_changed(events_engine: Engine) -> None:
    engine = events_engine
    # The seed orchestrator's filter: graph changes count where a changed node's id is under its aliases.
    seed = recorder_listener(
        filter={"types": ["object.**", "thread.item_posted", "graph.changed"], "aliases": ["missions/**"]},
        batch={"window_seconds": 0.2, "max_events": 100},
    )
    await engine.command("save_listener", listener=seed)
    sid = await new_session(engine)
    elsewhere = await engine.command("update_graph", session_id=sid, patch={"nodes": {"teams/red": {"type": "team"}}})
    patch = {
        "nodes": {"missions/1": {"type": "mission"}, "missions/1/cells/a": {"type": "cell"}},
        "edges": {"add": [{"from": "missions/1", "to": "missions/1/cells/a", "type": "holds"}]},
    }
    changed = await engine.command("update_graph", session_id=sid, patch=patch, if_rev=elsewhere["graph"]["rev"])
    await routed(engine, sid, changed["event_id"])

    async def woke() -> bool:
        return any(r.ended is not None for r in engine.log.runs)

    await eventually(woke, what="the run the graph change started")
    [run] = engine.log.runs
    assert run.input["batch"]["event_ids"] == [changed["event_id"]], "the change under teams/ is not its business"
    [message] = run.input["batch"]["messages"]
    assert message["type"] == "graph.changed"
    assert sorted(message["nodes"]) == ["missions/1", "missions/1/cells/a"]


async def _captured_tickets(engine: Engine, app: asyncpg.Connection) -> str:
    """The application's `tickets` table, captured as `desk.*` by its `session` column; answers a new session."""
    await app.execute("CREATE TABLE tickets (id text PRIMARY KEY, session text NOT NULL, title text)")
    sid = await new_session(engine)
    await engine.command("capture_table", table="tickets", type_prefix="desk", session_column="session")
    return sid


async def test_changes_committed_in_the_applications_transactions_reach_runs_and_a_rolled_back_one_never_does(
    events_engine: Engine, fresh_db: str
) -> None:
    """A row of a captured table and an emit beside a row of the application's own, each in the application's
    transaction: the committed ones reach the listener's runs; the rolled-back one no run sees."""
    engine = events_engine
    app = await asyncpg.connect(fresh_db)
    try:
        sid = await _captured_tickets(engine, app)
        await engine.command(
            "save_listener",
            listener=recorder_listener(
                "desk", filter={"types": ["desk.*", "ticket.opened"]}, batch={"window_seconds": 0.3, "max_events": 100}
            ),
        )
        async with app.transaction():
            await app.execute("INSERT INTO tickets VALUES ('a', $1, 'printer')", sid)
        with contextlib.suppress(LookupError):
            async with app.transaction():
                await app.execute("INSERT INTO tickets VALUES ('b', $1, 'never')", sid)
                raise LookupError("rolled back")
        async with app.transaction():
            await app.execute("UPDATE tickets SET title = 'printer on fire' WHERE id = 'a'")
            beside = await emit(app, sid, "ticket.opened", {"x": "a"})
    finally:
        await app.close()
    events = (await engine.command("list_session_events", session_id=sid))["events"]
    assert [(e["type"], e["data"].get("_id")) for e in events] == [
        ("desk.created", "a"),
        ("desk.updated", "a"),
        ("ticket.opened", None),
    ]
    await routed(engine, sid, beside)

    async def all_ran() -> bool:
        return len(engine.log.event_ids()) == 3 and all(r.ended is not None for r in engine.log.runs)

    await eventually(all_ran, what="the committed changes' runs")
    assert sorted(engine.log.event_ids()) == [e["id"] for e in events]


async def test_captured_changes_nobody_reads_are_appended_and_routed_by_the_router(
    events_engine: Engine, fresh_db: str
) -> None:
    """A captured commit stages its event and notifies nobody (0033_captured_staged.sql): with no writer or reader
    of the session after it, the router finds it, appends it and routes it, in the order of the commits."""
    engine = events_engine
    app = await asyncpg.connect(fresh_db)
    try:
        sid = await _captured_tickets(engine, app)
        await engine.command(
            "save_listener",
            listener=recorder_listener("desk", filter={"types": ["desk.*"]}, batch={"window_seconds": 0.2}),
        )
        for n in range(5):
            await app.execute("INSERT INTO tickets VALUES ($1, $2, 't')", f"t{n}", sid)

        async def ran() -> bool:
            return len(engine.log.event_ids()) == 5

        await eventually(ran, what="the captured changes' runs, with no reader of the session")
        rows = await app.fetch(
            "SELECT id, data ->> '_id' AS row FROM orchestrator.events WHERE session_id = $1 AND type LIKE 'desk.%'",
            sid,
        )
        assert sorted(engine.log.event_ids()) == sorted(r["id"] for r in rows)
        assert [r["row"] for r in sorted(rows, key=lambda r: r["id"])] == [f"t{n}" for n in range(5)]
        assert await app.fetchval("SELECT count(*) FROM orchestrator.captured_staged") == 0
    finally:
        await app.close()


APP_THAT_DIES = """
import asyncio, os, signal, sys
import asyncpg
from orchestrator.transactional import emit

async def main() -> None:
    conn = await asyncpg.connect(sys.argv[1])
    async with conn.transaction():
        await conn.execute("INSERT INTO tickets VALUES ('k', $1, 'kill me')", sys.argv[2])
        await emit(conn, sys.argv[2], "ticket.opened", {"x": "k"})
    os.kill(os.getpid(), signal.SIGKILL)  # nothing after the commit runs: no close, no goodbye

asyncio.run(main())
"""


async def test_an_application_killed_just_after_its_commit_loses_none_of_its_events(
    events_engine: Engine, fresh_db: str
) -> None:
    engine = events_engine
    url = fresh_db
    app = await asyncpg.connect(url)
    try:
        await app.execute("CREATE TABLE tickets (id text PRIMARY KEY, session text NOT NULL, title text)")
    finally:
        await app.close()
    sid = await new_session(engine)
    await engine.command("capture_table", table="tickets", type_prefix="desk", session_column="session")
    await engine.command(
        "save_listener",
        listener=recorder_listener(
            "desk", filter={"types": ["desk.*", "ticket.opened"]}, batch={"window_seconds": 0.3}
        ),
    )
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", APP_THAT_DIES, url, sid)
    assert await process.wait() == -signal.SIGKILL
    events = (await engine.command("list_session_events", session_id=sid))["events"]
    assert [e["type"] for e in events] == ["desk.created", "ticket.opened"]

    async def ran() -> bool:
        return sorted(engine.log.event_ids()) == [e["id"] for e in events]

    await eventually(ran, what="the dead application's events in a run")


async def test_the_desk_example_keeps_its_board_as_its_own_table_says(
    platform: Platform, temporal_env: WorkflowEnvironment, fresh_db: str
) -> None:
    """examples/desk end to end: its table made, its declarations applied as `dev` applies them, its writes in
    its own transactions; the board ends as the table says, the escalation seen, the rolled-back title never."""
    from examples.desk import app as desk_app
    from examples.desk import tables
    from orchestrator.app_loader import load_app
    from orchestrator.dev.app_plan import apply

    url = fresh_db
    conn = await asyncpg.connect(url)
    try:
        await tables.create(conn)
        platform.settings = platform.settings.model_copy(
            update={"search_attributes": not temporal_env.supports_time_skipping}
        )
        async with running_engine(platform, temporal_env.client, workflows=desk_app.workflows) as engine:
            await apply(platform, load_app("examples.desk.app"), lambda _: None)
            sid = await new_session(engine)
            await tables.write(conn, sid)

            async def settled() -> bool:
                # The run writes the tickets first and the escalations last: wait for both, not the first.
                body = {"command": "read_object", "session_id": sid, "alias": "desk/tickets/2"}
                gone = await engine.platform.command(body)
                seen = await engine.platform.command({**body, "alias": "desk/escalations"})
                return bool((gone.get("object") or {}).get("value", {}).get("deleted")) and "object" in seen

            await eventually(settled, within=90, what="the board after the last change")
            first = (await engine.command("read_object", session_id=sid, alias="desk/tickets/1"))["object"]["value"]
            assert (first["title"], first["priority"]) == ("printer jammed", 1)
            assert "internal_notes" not in first, "a column left out never reaches a run"
            escalations = await engine.command("read_object", session_id=sid, alias="desk/escalations")
            assert escalations["object"]["value"]["tickets"] == ["1"]
            events = (await engine.command("list_session_events", session_id=sid))["events"]
            titles = [e["data"].get("doc", {}).get("title") for e in events if e["type"].startswith("ticket.")]
            assert "never mind" not in titles
    finally:
        await conn.close()
