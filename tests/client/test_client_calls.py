"""Every public method of `Client`, called against a running platform through both doors, its effect asserted.

Each test runs once through `Client.local` and once through `Client.http` (the `client` fixture) and names
the methods it covers; the last test checks that together they cover every public method.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import asyncpg
import pytest
from temporalio.service import RPCError

from orchestrator.client import Client
from orchestrator.commands import COMMANDS
from orchestrator.core.errors import CommandError
from tests.client.conftest import DOORS, NotingClient, Running, covers
from tests.engine.harness import eventually, recorder_listener

pytestmark = pytest.mark.devserver

TICKET_ESCALATED = {
    "type": "object",
    "properties": {"priority": {"type": "integer"}},
    "required": ["priority"],
    "additionalProperties": False,
}


async def opened(client: Client) -> str:
    return str((await client.open_session())["session"]["id"])


def runs_of(running: Running, listener: str) -> list[dict[str, Any]]:
    """What the recorder workflow saw of each run of the listener: its batch and execution id."""
    return [r.input for r in running.engine.log.runs if r.input["listener"] == listener]


async def ran(running: Running, listener: str, count: int) -> None:
    async def done() -> bool:
        finished = [r for r in running.engine.log.runs if r.input["listener"] == listener and r.ended is not None]
        return len(finished) >= count

    await eventually(done, within=30, what=f"{count} runs of {listener}")


@covers("open_session", "list_sessions", "get_session", "close_session", "reopen_session", "delete_session")
async def test_a_session_is_opened_closed_reopened_and_deleted(client: NotingClient) -> None:
    session = (await client.open_session(alias="desk"))["session"]
    assert (session["alias"], session["status"]) == ("desk", "open")
    assert (await client.open_session(alias="desk"))["session"]["id"] == session["id"], "its alias answers it again"
    sid = session["id"]

    assert (await client.close_session(sid))["session"]["status"] == "closed"
    with pytest.raises(CommandError) as refused:
        await client.write_object(sid, "notes/1", {"type": "note"})
    assert refused.value.code == "session_not_open"
    [listed] = (await client.list_sessions(status="closed"))["sessions"]
    assert listed["id"] == sid
    assert (await client.list_sessions(status="open"))["sessions"] == []
    assert (await client.get_session(sid))["session"] == listed, "one session told as the list tells each"

    assert (await client.reopen_session(sid))["session"]["status"] == "open"
    await client.write_object(sid, "notes/1", {"type": "note"})
    assert [s["id"] for s in (await client.list_sessions(status="open", limit=10))["sessions"]] == [sid]

    assert (await client.delete_session(sid))["session"] == {"id": sid, "status": "deleted"}
    with pytest.raises(CommandError) as gone:
        await client.read_object(sid, "notes/1")
    assert gone.value.code == "not_found"
    with pytest.raises(CommandError) as gone:
        await client.get_session(sid)
    assert gone.value.code == "not_found"
    assert (await client.list_sessions())["sessions"] == []


@covers(
    "write_object",
    "read_object",
    "list_objects",
    "delete_object",
    "write_objects",
    "post_thread_item",
    "post_thread_items",
    "list_thread_items",
    "update_graph",
    "read_graph",
    "list_session_events",
)
async def test_objects_threads_and_the_graph_keep_what_was_written(client: NotingClient) -> None:
    sid = await opened(client)
    first = await client.write_object(sid, "tickets/1", {"type": "ticket", "title": "printer"}, client="desk")
    assert first["object"]["rev"] == 1
    await client.write_object(sid, "tickets/1", {"type": "ticket", "title": "printer on fire"}, if_rev=1)
    with pytest.raises(CommandError) as stale:
        await client.write_object(sid, "tickets/1", {"type": "ticket", "title": "lost"}, if_rev=1)
    assert stale.value.code == "rev_conflict"
    ticket = (await client.read_object(sid, "tickets/1"))["object"]
    assert (ticket["rev"], ticket["value"]["title"]) == (2, "printer on fire")

    both = [{"alias": "tickets/2", "value": {"type": "ticket"}}, {"alias": "notes/1", "value": {"type": "note"}}]
    assert len((await client.write_objects(sid, both, idempotency_key="import-1"))["event_ids"]) == 2
    tickets = (await client.list_objects(sid, prefix="tickets/"))["objects"]
    assert sorted(o["alias"] for o in tickets) == ["tickets/1", "tickets/2"]
    await client.delete_object(sid, "tickets/2")
    with pytest.raises(CommandError) as deleted:
        await client.read_object(sid, "tickets/2")
    assert deleted.value.code == "not_found"

    await client.post_thread_item(sid, "chats/1", {"type": "text", "role": "user", "message": "hi"})
    answers = [
        {"type": "text", "role": "assistant", "message": "on it"},
        {"type": "text", "role": "assistant", "message": "done"},
    ]
    assert len((await client.post_thread_items(sid, "chats/1", answers))["event_ids"]) == 2
    items = (await client.list_thread_items(sid, "chats/1"))["items"]
    assert [i["message"] for i in items] == ["hi", "on it", "done"]
    page = (await client.list_thread_items(sid, "chats/1", after=items[0]["id"], limit=1))["items"]
    assert [i["message"] for i in page] == ["on it"]

    patch = {"nodes": {"tickets/1": {"type": "ticket"}, "teams/red": {"type": "team"}}}
    assert (await client.update_graph(sid, patch, if_rev=0))["graph"]["rev"] == 1
    graph = (await client.read_graph(sid, nodes=["tickets/1"]))["graph"]
    assert graph["rev"] == 1 and set(graph["nodes"]) == {"tickets/1"}

    events = (await client.list_session_events(sid, types=["object.*"]))["events"]
    assert [(e["type"], e["alias"]) for e in events] == [
        ("object.written", "tickets/1"),
        ("object.written", "tickets/1"),
        ("object.written", "tickets/2"),
        ("object.written", "notes/1"),
        ("object.deleted", "tickets/2"),
    ]
    assert events[0]["source"]["client"] == "desk"
    later = (await client.list_session_events(sid, after=events[0]["id"], limit=1))["events"]
    assert [e["id"] for e in later] == [events[1]["id"]]


@covers(
    "save_listener",
    "get_listener",
    "list_listeners",
    "list_session_listeners",
    "list_executions",
    "explain_event",
    "delete_listener",
)
async def test_a_saved_listener_fires_and_its_event_is_explained(client: NotingClient, running: Running) -> None:
    saved = (await client.save_listener(recorder_listener(batch={"window_seconds": 0.2})))["listener"]
    assert (saved["name"], saved["version"]) == ("orchestrate", 1)
    got = (await client.get_listener("orchestrate"))["listener"]
    assert got["body"]["batch"]["window_seconds"] == 0.2
    assert set(got["body"]) <= set(got), "the body's fields beside the version's too"
    assert got["batch"]["window_seconds"] == 0.2 and got["filter"]["aliases"] == got["body"]["filter"]["aliases"]
    # ... with the defaults the body left out (SPEC 3), which its `body` keeps as saved.
    assert (got["batch"]["max_events"], got["concurrency"]["mode"], got["concurrency"]["max_parallel"]) == (
        100,
        "serial",
        4,
    )
    assert "concurrency" not in got["body"]
    [listed] = (await client.list_listeners())["listeners"]
    assert listed["name"] == "orchestrate" and (listed["batch"], listed["concurrency"]) == (
        got["batch"],
        got["concurrency"],
    )

    sid = await opened(client)
    written = await client.write_object(sid, "missions/1", {"type": "mission"})
    await ran(running, "orchestrate", 1)
    [run] = runs_of(running, "orchestrate")
    assert run["batch"]["event_ids"] == [written["event_id"]]

    async def completed() -> bool:
        executions = (await client.list_executions(sid, listener="orchestrate", status="completed"))["executions"]
        return [e["id"] for e in executions] == [run["execution_id"]]

    await eventually(completed, what="the run's end recorded")

    async def explained() -> dict[str, Any]:
        reply = await client.explain_event(sid, written["event_id"])
        return next(item for item in reply["listeners"] if item["listener"] == "orchestrate")

    async def outcome_known() -> bool:
        batches = (await explained()).get("batches") or []
        return bool(batches) and batches[0].get("outcome") is not None

    await eventually(outcome_known, what="the batch's outcome in explain_event")
    fate = await explained()
    assert fate["matched"] is True
    assert fate["batches"][0]["outcome"]["execution_id"] == run["execution_id"]
    [listener] = (await client.list_session_listeners(sid))["listeners"]
    assert listener["name"] == "orchestrate" and listener["recent_outcomes"][0]["status"] == "success"
    outcome = listener["recent_outcomes"][0]
    assert outcome["listener"] == "orchestrate" and outcome["at"] == outcome["created_at"], outcome

    await client.delete_listener("orchestrate")
    assert (await client.list_listeners())["listeners"] == []
    with pytest.raises(CommandError) as gone:
        await client.get_listener("orchestrate")
    assert gone.value.code == "not_found"


@covers("replay_batch", "redeliver")
async def test_a_batch_is_replayed_and_a_range_redelivered(client: NotingClient, running: Running) -> None:
    await client.save_listener(recorder_listener(batch={"window_seconds": 0.3, "max_events": 2}))
    sid = await opened(client)
    ids = [(await client.write_object(sid, f"missions/{n}", {"type": "mission"}))["event_id"] for n in range(3)]

    async def delivered() -> bool:
        return sorted(i for r in runs_of(running, "orchestrate") for i in r["batch"]["event_ids"]) == ids

    await eventually(delivered, what="the first delivery")
    await ran(running, "orchestrate", 2)
    first = runs_of(running, "orchestrate")[0]["batch"]

    replay = await client.replay_batch(sid, "orchestrate", batch=first["event_ids"][0])
    assert replay["replay"]["replay_of"] == first["event_ids"][0]
    await ran(running, "orchestrate", 3)
    again = runs_of(running, "orchestrate")[2]["batch"]
    assert (again["event_ids"], again["replay_of"]) == (first["event_ids"], first["event_ids"][0])

    redelivered = await client.redeliver(sid, "orchestrate", after=ids[0], through=ids[-1])
    assert redelivered["redelivered"] == {"listener": "orchestrate", "events": 2, "batches": 1}
    await ran(running, "orchestrate", 4)
    assert runs_of(running, "orchestrate")[3]["batch"]["event_ids"] == ids[1:]


@covers("pause_listener", "resume_listener", "switch_listener")
async def test_a_listener_paused_waits_switched_off_drops_and_resumed_fires(
    client: NotingClient, running: Running
) -> None:
    await client.save_listener(recorder_listener(batch={"window_seconds": 0.2}))
    sid = await opened(client)

    assert (await client.pause_listener("orchestrate", session_id=sid))["listener"]["paused"] is True
    kept = await client.write_object(sid, "missions/kept", {"type": "mission"})

    async def lane() -> dict[str, Any]:
        [listener] = (await client.list_session_listeners(sid))["listeners"]
        return dict(listener["lanes"][0]) if listener["lanes"] else {"pending": 0, "routed_through": 0, "batches": 0}

    async def waiting(event_id: int) -> bool:
        now = await lane()
        return bool(now["routed_through"] == event_id and now["pending"] == 1)

    await eventually(lambda: waiting(kept["event_id"]), what="the event to wait in the paused lane")
    await asyncio.sleep(1.0)
    assert runs_of(running, "orchestrate") == [], "nothing fires while paused"
    assert (await client.resume_listener("orchestrate", session_id=sid))["listener"]["paused"] is False
    await ran(running, "orchestrate", 1)
    assert runs_of(running, "orchestrate")[0]["batch"]["event_ids"] == [kept["event_id"]]

    assert (await client.switch_listener(sid, "orchestrate", enabled=False))["enabled"] is False
    dropped = await client.write_object(sid, "missions/dropped", {"type": "mission"})

    async def consumed() -> bool:
        now = await lane()
        return bool(now["routed_through"] == dropped["event_id"] and now["pending"] == 0 and now["batches"] == 2)

    await eventually(consumed, what="the switched-off listener's batch consumed with no run")
    assert (await client.switch_listener(sid, "orchestrate", enabled=True))["enabled"] is True
    taken = await client.write_object(sid, "missions/taken", {"type": "mission"})
    await ran(running, "orchestrate", 2)
    runs = runs_of(running, "orchestrate")
    assert [r["batch"]["event_ids"] for r in runs] == [[kept["event_id"]], [taken["event_id"]]], "none while off"

    # Everywhere: the session's lanes wait again, as in any other session.
    await client.pause_listener("orchestrate")
    later = await client.write_object(sid, "missions/later", {"type": "mission"})
    await eventually(lambda: waiting(later["event_id"]), what="the event to wait behind the pause everywhere")
    await client.resume_listener("orchestrate")
    await ran(running, "orchestrate", 3)


@covers("simulate_listener")
async def test_a_simulated_listener_answers_the_batches_it_would_cut_and_is_not_saved(client: NotingClient) -> None:
    sid = await opened(client)
    ids = [(await client.write_object(sid, f"missions/{n}", {"type": "mission"}))["event_id"] for n in range(5)]
    await client.write_object(sid, "elsewhere/1", {"type": "note"})
    body = recorder_listener(batch={"window_seconds": 1, "max_events": 2})

    simulated = await client.simulate_listener(sid, body, after=ids[0], run_seconds=0.5)
    assert [b["event_ids"] for b in simulated["batches"]] == [ids[1:3], ids[3:5]]
    assert (await client.list_listeners())["listeners"] == [], "a simulation saves nothing"


@covers("start_execution", "stop_execution")
async def test_a_run_started_by_hand_is_stopped(client: NotingClient, running: Running) -> None:
    sid = await opened(client)
    started = (await client.start_execution(sid, "recorder", input={"sleep": 600}))["execution"]

    async def recorded() -> bool:
        return any(r.input["execution_id"] == started["id"] for r in running.engine.log.runs)

    await eventually(recorded, what="the run to start")
    stopped = await client.stop_execution(sid, started["id"], mode="terminate", reason="not needed")
    assert stopped["execution"] == {"id": started["id"], "status": "stopped"}
    [execution] = (await client.list_executions(sid))["executions"]
    assert (execution["id"], execution["status"]) == (started["id"], "stopped")


@covers(
    "save_event_type",
    "get_event_type",
    "list_event_types",
    "emit_event",
    "emit_events",
    "delete_event_type",
    "capture_table",
    "list_captures",
    "uncapture_table",
)
async def test_the_applications_own_events_are_declared_emitted_and_captured(
    client: NotingClient, running: Running
) -> None:
    saved = await client.save_event_type("ticket.escalated", TICKET_ESCALATED, description="a ticket went up")
    assert saved["event_type"]["name"] == "ticket.escalated"
    assert (await client.get_event_type("ticket.escalated"))["event_type"]["description"] == "a ticket went up"
    assert [t["name"] for t in (await client.list_event_types())["event_types"]] == ["ticket.escalated"]

    sid = await opened(client)
    one = await client.emit_event(sid, "ticket.escalated", {"priority": 1}, idempotency_key="esc-1")
    assert (await client.emit_event(sid, "ticket.escalated", {"priority": 1}, idempotency_key="esc-1")) == one
    two = [{"type": "ticket.escalated", "data": {"priority": p}} for p in (2, 3)]
    assert len((await client.emit_events(sid, two))["event_ids"]) == 2
    with pytest.raises(CommandError) as unfit:
        await client.emit_event(sid, "ticket.escalated", {"priority": "high"})
    assert unfit.value.code == "invalid_request"

    app = await asyncpg.connect(running.database_url)
    try:
        await app.execute("CREATE TABLE tickets (id text PRIMARY KEY, title text, secret text)")
        captured = await client.capture_table("tickets", type_prefix="desk", session_id=sid, exclude=["secret"])
        assert captured["capture"]["type_prefix"] == "desk"
        assert [c["table"] for c in (await client.list_captures())["captures"]] == ["public.tickets"]
        await app.execute("INSERT INTO tickets VALUES ('a', 'printer', 'hush')")
        await client.uncapture_table("tickets")
        assert (await client.list_captures())["captures"] == []
        await app.execute("INSERT INTO tickets VALUES ('b', 'after', 'hush')")
    finally:
        await app.close()

    await client.delete_event_type("ticket.escalated")
    with pytest.raises(CommandError) as undeclared:
        await client.emit_event(sid, "ticket.escalated", {"priority": 4})
    assert undeclared.value.code in ("not_found", "invalid_request")

    events = (await client.list_session_events(sid))["events"]
    assert [(e["type"], e["data"].get("priority"), e["data"].get("_id")) for e in events] == [
        ("ticket.escalated", 1, None),
        ("ticket.escalated", 2, None),
        ("ticket.escalated", 3, None),
        ("desk.created", None, "a"),
    ]
    assert "secret" not in str(events[-1]["data"])


@covers("create_api_key", "list_api_keys", "revoke_api_key", "whoami")
async def test_a_key_is_made_works_is_listed_and_revoked(client: NotingClient, running: Running) -> None:
    me = await client.whoami()
    # The in-process door is the platform's own caller; over HTTP, the bootstrap token.
    assert me["key"]["name"] == ("local" if "local" in client.called else "bootstrap")
    assert (me["key"]["scopes"], sorted(me["commands"])) == (["admin"], sorted(COMMANDS))
    created = (await client.create_api_key("reader", ["read:**"], requests_per_second=50))["key"]
    assert created["secret"].startswith("ork_") and created["state"] == "active"
    async with Client.http(running.url, token=created["secret"]) as reader:
        assert (await reader.list_listeners())["status"] == "success"
        who = await reader.whoami()
        assert who["key"] == {"name": "reader", "scopes": ["read:**"], "requests_per_second": 50}
        assert {"read_object", "explain_event", "whoami"} <= set(who["commands"])
        assert not {"write_object", "save_listener", "create_api_key"} & set(who["commands"])
        with pytest.raises(CommandError) as denied:
            await reader.open_session(alias="not-mine")
        assert denied.value.code == "access_denied"
    [listed] = (await client.list_api_keys())["keys"]
    assert (listed["name"], listed["scopes"], listed["state"]) == ("reader", ["read:**"], "active")

    assert (await client.revoke_api_key("reader"))["key"]["state"] == "revoked"

    async def refused() -> bool:
        async with Client.http(running.url, token=created["secret"]) as reader:
            reply = await reader.command({"command": "list_listeners"})
        return reply.get("error") == "unauthorized"

    await eventually(refused, within=10, what="the revoked key refused")
    assert [k["state"] for k in (await client.list_api_keys())["keys"]] == ["revoked"]


@covers("create_schedule", "get_schedule", "list_schedules", "update_schedule", "list_schedule_runs", "delete_schedule")
async def test_a_schedule_is_made_fires_is_changed_and_deleted(client: NotingClient, running: Running) -> None:
    temporal = running.platform.temporal
    assert temporal is not None
    sid = await opened(client)
    created = await client.create_schedule(
        sid,
        "clock",
        repeat={"type": "interval", "every_seconds": 1},
        invocation_target_type="object",
        target={"alias": "ops/clock", "value": {"type": "tick"}},
    )
    schedule_id = created["schedule"]["schedule_id"]
    assert schedule_id == f"schedule:{sid}:clock"

    async def fired() -> bool:
        return len((await client.list_schedule_runs(sid, "clock", limit=10))["runs"]) >= 1

    await eventually(fired, within=15, what="a firing")
    assert (await client.read_object(sid, "ops/clock"))["object"]["value"] == {"type": "tick"}
    assert [s["alias"] for s in (await client.list_schedules(sid))["schedules"]] == ["clock"]

    updated = await client.update_schedule(sid, "clock", repeat={"type": "interval", "every_seconds": 3600})
    assert updated["schedule"]["repeat"] == {"type": "interval", "every_seconds": 3600}
    assert (await client.get_schedule(sid, "clock"))["schedule"]["repeat"]["every_seconds"] == 3600
    described = await temporal.get_schedule_handle(schedule_id).describe()
    assert [spec.every.total_seconds() for spec in described.schedule.spec.intervals] == [3600]

    await client.update_schedule(sid, "clock", enabled=False)
    assert (await temporal.get_schedule_handle(schedule_id).describe()).schedule.state.paused is True

    await client.delete_schedule(sid, "clock")
    assert (await client.list_schedules(sid))["schedules"] == []
    with pytest.raises(RPCError):
        await temporal.get_schedule_handle(schedule_id).describe()


@covers("command", "stream", "aclose")
async def test_the_doors_own_methods_send_a_raw_command_follow_the_stream_and_close(
    client: NotingClient,
) -> None:
    refused = await client.command({"command": "write_object", "session_id": "ses_none", "alias": "a"})
    assert (refused["status"], refused["error"]) == ("error", "invalid_request"), "an error reply, not raised"
    sid = await opened(client)
    body = {"command": "write_object", "session_id": sid, "alias": "a/1", "value": {"type": "a"}}
    written = await client.command(body)
    assert written["status"] == "success", written

    if "local" in client.called:
        with pytest.raises(NotImplementedError):
            async for _ in client.stream(sid):
                pass
    else:
        async with asyncio.timeout(30):
            async for batch in client.stream(sid, after=0, filter={"types": ["object.*"]}):
                assert [e["id"] for e in batch["events"]] == [written["event_id"]]
                break

    await client.aclose()
    if "http" in client.called:
        with pytest.raises(RuntimeError):  # httpx's: the client has been closed
            await client.list_listeners()
    else:  # the platform is the caller's: closing the client leaves it running
        assert (await client.list_listeners())["status"] == "success"


def test_the_tests_here_cover_every_public_method_through_both_doors() -> None:
    tests = [test for name, test in sorted(globals().items()) if name.startswith("test_") and hasattr(test, "covers")]
    assert all("client" in inspect.signature(test).parameters for test in tests), "each runs through both doors"
    covered = set().union(*(test.covers for test in tests))
    public = {name for name in dir(Client) if not name.startswith("_") and callable(getattr(Client, name))}
    assert set(DOORS) == {"local", "http"} and all(isinstance(vars(Client)[door], classmethod) for door in DOORS)
    assert sorted(public - covered - set(DOORS)) == [], "public methods no test here calls"
    assert sorted(covered - public) == [], "covered names that are no method"
