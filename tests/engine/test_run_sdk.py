"""The run-side SDK: a run reads and writes its session, attributed to it, idempotent across retries."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.testing import WorkflowEnvironment

from orchestrator.activities.session import SessionCall
from orchestrator.platform import Platform
from tests.engine.harness import Engine, eventually, new_session, running_engine

pytestmark = pytest.mark.both_servers

with workflow.unsafe.imports_passed_through():
    from orchestrator.sdk import RunInput, RunSession, SessionError


@workflow.defn(name="sdk_writer")
class SdkWriter:
    """Reads what woke it, writes a summary object and a thread item, and checks if_rev refusals."""

    @workflow.run
    async def run(self, run: RunInput) -> dict[str, Any]:
        session = RunSession(run)
        seen = [await session.read_object(m["alias"]) for m in await session.batch_messages()]
        missing = await session.read_object("nothing/here")
        written = await session.write_object("out/summary", {"type": "summary", "count": len(seen)})
        posted = await session.post_thread_item("out/thread", {"type": "text", "role": "assistant", "message": "hi"})
        try:
            await session.write_object("out/summary", {"type": "summary"}, if_rev=99)
            conflict = None
        except SessionError as err:
            conflict = err.code
        try:
            await session.write_object("out/summary", {"type": "summary"}, if_rev=2**31)
            past_any_rev = None
        except SessionError as err:
            past_any_rev = [err.code, err.message]
        page = await session.list_session_events(after=run.batch.first_id - 1, before=run.batch.last_id + 1)
        whole = await session.batch_events()
        await workflow.execute_activity(
            "test.note",
            [
                written,
                posted,
                conflict,
                past_any_rev,
                missing,
                [[e["id"] for e in page["events"]], page["last_id"]],
                [e["id"] for e in whole],
                run.batch.carried_events,
            ],
            start_to_close_timeout=timedelta(seconds=10),
        )
        return {"written": written, "posted": posted}


@workflow.defn(name="pointer_reader")
class PointerReader:
    """Notes the pointers it came with and those it reads, then reads `batch.messages` as given (which fails the
    run when its template did not name them)."""

    @workflow.run
    async def run(self, run: RunInput) -> int:
        read = await RunSession(run).batch_messages()
        batch = run.batch
        await workflow.execute_activity(
            "test.note",
            [run.listener, batch.carried_messages, read, batch.event_ids, run.input],
            start_to_close_timeout=timedelta(seconds=10),
        )
        return len(batch.messages)


@workflow.defn(name="envelope_reader")
class EnvelopeReader:
    """Notes the envelopes it came with and those it reads, then reads `batch.events` as given (which fails the
    run when its template did not name them)."""

    @workflow.run
    async def run(self, run: RunInput) -> list[int]:
        read = await RunSession(run).batch_events()
        batch = run.batch
        await workflow.execute_activity(
            "test.note", [run.listener, batch.carried_events, read], start_to_close_timeout=timedelta(seconds=10)
        )
        return [int(e["id"]) for e in batch.events]


@workflow.defn(name="uncaught_refusal")
class UncaughtRefusal:
    """Writes with a revision the object does not have and lets the refusal escape."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        await RunSession(run).write_object("out/never", {"type": "never"}, if_rev=99)


class Notes:
    def __init__(self) -> None:
        self.notes: list[Any] = []

    @activity.defn(name="test.note")
    async def note(self, value: Any) -> None:
        self.notes.append(value)


class FailAfterCommit:
    """Stands in for the session activity: the write commits, then the reply is lost once per key."""

    def __init__(self, real: Callable[..., Any]) -> None:
        self.real = real
        self.failed: set[str] = set()

    @activity.defn(name="orchestrator.session")
    async def call(self, call: SessionCall) -> Any:
        result = await self.real(call)
        if call.idempotency_key is not None and call.idempotency_key not in self.failed:
            self.failed.add(call.idempotency_key)
            raise RuntimeError("the reply was lost after the write committed")
        return result


@pytest.fixture
async def sdk_engine(platform: Platform, temporal_env: WorkflowEnvironment) -> AsyncIterator[tuple[Engine, Notes]]:
    notes = Notes()
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping}
    )

    def wrap(activities: list[Callable[..., Any]]) -> list[Callable[..., Any]]:
        out: list[Callable[..., Any]] = [notes.note]
        for fn in activities:
            name = getattr(fn, "__temporal_activity_definition").name
            out.append(FailAfterCommit(fn).call if name == "orchestrator.session" else fn)
        return out

    async with running_engine(
        platform, temporal_env.client, workflows=[SdkWriter, PointerReader, EnvelopeReader, UncaughtRefusal], wrap=wrap
    ) as engine:
        yield engine, notes


async def test_a_run_reads_and_writes_its_session_once_despite_retries(sdk_engine: tuple[Engine, Notes]) -> None:
    engine, notes = sdk_engine
    listener = {
        "name": "writer",
        "filter": {"types": ["object.written"], "aliases": ["missions/**"]},
        "batch": {"window_seconds": 0.2},
        "action": {"type": "workflow", "workflow": "sdk_writer"},
    }
    await engine.command("save_listener", listener=listener)
    sid = await new_session(engine)
    first = await engine.command("write_object", session_id=sid, alias="missions/1", value={"type": "m"})

    async def noted() -> bool:
        return bool(notes.notes)

    await eventually(noted, what="the run's note")
    written, posted, conflict, past_any_rev, missing, seen_events, whole, carried = notes.notes[0]
    assert carried is None, "its template names no events: the run got ids, not envelopes"
    assert whole == [first["event_id"]], "and read its batch's events whole by their ids"
    assert written["rev"] == 1, "the retried write found its first write instead of writing again"
    assert conflict == "rev_conflict"
    code, message = past_any_rev
    assert code == "invalid_request" and message.startswith("if_rev:"), past_any_rev
    assert missing is None
    assert seen_events == [[first["event_id"]], first["event_id"]], "the stream around its batch, as the command pages"
    summary = await engine.command("read_object", session_id=sid, alias="out/summary")
    assert summary["object"]["rev"] == 1
    items = await engine.command("list_thread_items", session_id=sid, alias="out/thread")
    assert [i["id"] for i in items["items"]] == [posted["id"]]
    events = (await engine.command("list_session_events", session_id=sid, limit=1000))["events"]
    own = [e for e in events if e.get("alias") in ("out/summary", "out/thread")]
    assert [e["type"] for e in own] == ["object.written", "thread.item_posted"]
    for event in own:
        assert event["source"]["listener"] == "writer"
        assert event["source"]["execution"].startswith("exe:")
        assert event["depth"] == 1
    assert first["event_id"] < own[0]["id"]


async def test_a_run_carries_its_batchs_pointers_only_when_its_template_names_them(
    sdk_engine: tuple[Engine, Notes],
) -> None:
    engine, notes = sdk_engine

    def listener(name: str, template: Any) -> dict[str, Any]:
        return {
            "name": name,
            "filter": {"types": ["object.written"], "aliases": ["missions/**"]},
            "batch": {"window_seconds": 0.5, "distinct_by": "alias"},
            "action": {"type": "workflow", "workflow": "pointer_reader", "input": template},
        }

    await engine.command("save_listener", listener=listener("named", {"events": "{{ batch.messages }}"}))
    await engine.command("save_listener", listener=listener("plain", {"n": "{{ batch.count }}"}))
    sid = await new_session(engine)
    written = [
        await engine.command("write_objects", session_id=sid, objects=[{"alias": alias, "value": {"type": "m"}}])
        for alias in ("missions/a", "missions/b", "missions/a")
    ]
    ids = [w["event_ids"][0] for w in written]

    async def both_noted() -> bool:
        return {n[0] for n in notes.notes} == {"named", "plain"}

    await eventually(both_noted, what="both runs' notes")
    seen = {n[0]: n[1:] for n in notes.notes}
    carried, read, event_ids, rendered = seen["named"]
    assert [m["id"] for m in read] == [ids[1], ids[2]], "distinct_by kept the newest missions/a and missions/b"
    assert carried == read == rendered["events"], "named: the pointers came with the run, as the template saw them"
    assert event_ids == ids, "every event the batch consumed, the superseded one too"
    carried, read_plain, event_ids, rendered = seen["plain"]
    assert carried is None, "its template names no pointers: none crossed"
    assert read_plain == read, "read from the store by the entries' ids, the same pointers"
    assert event_ids == ids and rendered == {"n": 2}

    async def both_ended() -> bool:
        events = await engine.command("list_session_events", session_id=sid, types=["execution.ended"])
        return {e["source"]["listener"] for e in events["events"]} == {"named", "plain"}

    await eventually(both_ended, what="both runs' ends")
    ended = (await engine.command("list_session_events", session_id=sid, types=["execution.ended"]))["events"]
    by_listener = {e["source"]["listener"]: e["execution"] for e in ended}
    assert by_listener["named"]["status"] == "completed"
    failed = by_listener["plain"]
    assert failed["status"] == "failed", "reading pointers that never came fails the run, not a silent []"
    assert failed["error"]["type"] == "BatchMessagesNotCarried"
    assert failed["error"]["message"].startswith("batch.messages: not carried"), "the message, not its type again"


async def test_a_run_that_reads_envelopes_its_template_did_not_name_fails_saying_how_to_read_them(
    sdk_engine: tuple[Engine, Notes],
) -> None:
    """`run.batch.events` is never an empty list standing for envelopes that did not come: the run fails, and its
    `execution.ended` says why and which call reads them."""
    engine, notes = sdk_engine

    def listener(name: str, template: Any) -> dict[str, Any]:
        return {
            "name": name,
            "filter": {"types": ["object.written"], "aliases": ["missions/**"]},
            "batch": {"window_seconds": 0.5},
            "action": {"type": "workflow", "workflow": "envelope_reader", "input": template},
        }

    await engine.command("save_listener", listener=listener("named", {"events": "{{ batch.events }}"}))
    await engine.command("save_listener", listener=listener("plain", {"n": "{{ batch.count }}"}))
    sid = await new_session(engine)
    written = await engine.command("write_object", session_id=sid, alias="missions/a", value={"type": "m"})

    async def both_ended() -> bool:
        events = await engine.command("list_session_events", session_id=sid, types=["execution.ended"])
        return {e["source"]["listener"] for e in events["events"]} == {"named", "plain"}

    await eventually(both_ended, what="both runs' ends")
    seen = {n[0]: n[1:] for n in notes.notes}
    carried, read = seen["named"]
    assert [e["id"] for e in carried] == [e["id"] for e in read] == [written["event_id"]]
    carried, read = seen["plain"]
    assert carried is None, "its template names no envelopes: none crossed"
    assert [e["id"] for e in read] == [written["event_id"]], "batch_events() read them by id"
    ended = (await engine.command("list_session_events", session_id=sid, types=["execution.ended"]))["events"]
    by_listener = {e["source"]["listener"]: e["execution"] for e in ended}
    assert by_listener["named"]["status"] == "completed"
    failed = by_listener["plain"]
    assert failed["status"] == "failed", "reading envelopes that never came fails the run, not a silent []"
    assert failed["error"]["type"] == "BatchEventsNotCarried"
    message = failed["error"]["message"]
    assert message.startswith("batch.events: not carried") and "RunSession(run).batch_events()" in message, message


async def test_a_refusal_the_run_lets_escape_fails_the_run_naming_its_code_and_the_lane_goes_on(
    sdk_engine: tuple[Engine, Notes],
) -> None:
    """An uncaught `SessionError` is a Temporal failure: the run fails (it does not fail its workflow task over and
    over while holding its lane), its `execution.ended` names the code, and the next batch runs."""
    engine, _ = sdk_engine
    listener = {
        "name": "refused",
        "filter": {"types": ["object.written"], "aliases": ["missions/**"]},
        "batch": {"window_seconds": 0},
        "action": {"type": "workflow", "workflow": "uncaught_refusal"},
    }
    await engine.command("save_listener", listener=listener)
    sid = await new_session(engine)

    async def ended() -> list[dict[str, Any]]:
        events = await engine.command("list_session_events", session_id=sid, types=["execution.ended"])
        return [e["execution"] for e in events["events"]]

    for n, alias in enumerate(("missions/a", "missions/b"), start=1):
        await engine.command("write_object", session_id=sid, alias=alias, value={"type": "m"})

        async def run_ended(n: int = n) -> bool:
            return len(await ended()) >= n

        await eventually(run_ended, what=f"run {n}'s end: a refusal did not hold the lane")
    for execution in await ended():
        assert execution["status"] == "failed"
        assert execution["error"]["type"] == "rev_conflict", execution
        assert "rev" in execution["error"]["message"] and not execution["error"]["message"].startswith("rev_conflict")
