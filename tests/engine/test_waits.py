"""Runs that hear events: `RunSession.wait_for_event` inside a run, on a real worker, router and store.

A conversation listener starts a run on a chat's first message; the run waits for replies (condition 0) or a
resolution (condition 1). The wait counts from its batch's last event, so a reply committed before the run began
is found; the first declared condition wins and only its events are taken; what a wait took never starts
another run of the conversation's listener, while other listeners still get it; a reply that comes while the
run is busy waits for its next wait; a timeout answers `None`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.testing import WorkflowEnvironment

from orchestrator.platform import Platform
from tests.engine.harness import Engine, eventually, lane_state, new_session, running_engine

pytestmark = pytest.mark.both_servers

with workflow.unsafe.imports_passed_through():
    from orchestrator.sdk import RunInput, RunSession, SessionError

REPLIES = {
    "types": ["thread.item_posted"],
    "aliases": ["chats/*"],
    "where": [{"path": "item.role", "op": "eq", "value": "user"}],
}
RESOLVED = {"types": ["object.written"], "aliases": ["chats/*/resolution"]}


@workflow.defn(name="conversation")
class Conversation:
    """Waits `input.waits` times for replies on its own chat or its resolution, noting each answer; sleeps
    `input.busy` seconds before its first wait (a reply may come meanwhile)."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        session = RunSession(run)
        options: dict[str, Any] = run.input if isinstance(run.input, dict) else {}
        chat = run.batch.lane
        replies = options.get("replies") or {**REPLIES, "aliases": [chat]}
        resolved = {**RESOLVED, "aliases": [f"{chat}/resolution"]}
        if options.get("busy"):
            await workflow.sleep(float(options["busy"]))
        answers: list[Any] = []
        if options.get("give_up_after"):
            # The caller stops waiting (its task cancelled by a timeout of its own): the wait is closed with it.
            try:
                await asyncio.wait_for(
                    session.wait_for_event([replies, resolved], timeout_seconds=600), float(options["give_up_after"])
                )
            except TimeoutError:
                answers.append(["gave up"])
        for _ in range(int(options.get("waits", 1))):
            try:
                answer = await session.wait_for_event(
                    options.get("raw_conditions", [replies, resolved]),
                    timeout_seconds=float(options.get("timeout", 60)),
                    after=options.get("after"),
                    max_events=int(options.get("max_events", 1)),
                )
            except SessionError as err:
                answers.append(["refused", err.code, err.message])
                break
            answers.append([answer["matched"], [e["id"] for e in answer["events"]]])
        await workflow.execute_activity("test.heard", [chat, answers], start_to_close_timeout=timedelta(seconds=10))


class Heard:
    def __init__(self) -> None:
        self.by_chat: dict[str, list[Any]] = {}

    @activity.defn(name="test.heard")
    async def heard(self, value: list[Any]) -> None:
        self.by_chat[value[0]] = value[1]


@pytest.fixture
async def heard_engine(platform: Platform, temporal_env: WorkflowEnvironment) -> AsyncIterator[tuple[Engine, Heard]]:
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping}
    )
    heard = Heard()

    def wrap(activities: list[Callable[..., Any]]) -> list[Callable[..., Any]]:
        return [heard.heard, *activities]

    async with running_engine(platform, temporal_env.client, workflows=[Conversation], wrap=wrap) as engine:
        yield engine, heard


def conversation(**options: Any) -> dict[str, Any]:
    return {
        "name": "conversation",
        "filter": {
            "types": ["thread.item_posted"],
            "aliases": ["chats/*"],
            "where": [{"path": "item.role", "op": "eq", "value": "user"}],
        },
        "concurrency": {"mode": "keyed", "key": "alias", "max_parallel": 8},
        "batch": {"window_seconds": 0, "max_events": 1},
        "action": {"type": "workflow", "workflow": "conversation", "input": options},
    }


async def post(engine: Engine, sid: str, chat: str, message: str, role: str = "user") -> int:
    reply = await engine.command(
        "post_thread_item", session_id=sid, alias=chat, item={"type": "text", "role": role, "message": message}
    )
    return int(reply["event_id"])


async def answers(heard: Heard, chat: str, engine: Engine | None = None) -> list[Any]:
    async def came() -> bool:
        return chat in heard.by_chat

    try:
        await eventually(came, within=60, what=f"the conversation on {chat} to end")
    except AssertionError:
        if engine is not None:
            async with engine.platform.store.transaction() as conn:
                rows = await conn.fetch("SELECT * FROM orchestrator.run_waits")
                events = await conn.fetch("SELECT id, type, alias, source FROM orchestrator.events ORDER BY id")
            raise AssertionError(f"{[dict(r) for r in rows]} {[dict(e) for e in events]}") from None
        raise
    return heard.by_chat[chat]


async def test_a_reply_committed_before_the_run_began_is_the_one_its_wait_answers(
    heard_engine: tuple[Engine, Heard],
) -> None:
    """The race Inngest's waits lose: the reply is committed right after the message that starts the run, before
    the run (and its wait) begins. The wait counts from its batch's last event, so it finds the reply."""
    engine, heard = heard_engine
    await engine.command("save_listener", listener=conversation())
    sid = await new_session(engine)
    chats = [f"chats/{n}" for n in range(5)]
    expected = {}
    for chat in chats:
        await post(engine, sid, chat, "hello")
        expected[chat] = await post(engine, sid, chat, "right after")
    for chat in chats:
        assert await answers(heard, chat) == [[0, [expected[chat]]]], chat


async def test_the_first_declared_condition_wins_and_the_rest_stay_for_the_next_wait(
    heard_engine: tuple[Engine, Heard],
) -> None:
    """A reply and a resolution both ready: the reply wins; the resolution stays, and the next wait takes it. A
    wait takes up to `max_events` of its winner's events, in order."""
    engine, heard = heard_engine
    await engine.command("save_listener", listener=conversation(busy=2, waits=3, max_events=5, timeout=3))
    sid = await new_session(engine)
    chat = "chats/any-of"
    await post(engine, sid, chat, "start")
    resolution = (
        await engine.command("write_object", session_id=sid, alias=f"{chat}/resolution", value={"type": "resolution"})
    )["event_id"]
    first = await post(engine, sid, chat, "one")
    second = await post(engine, sid, chat, "two")
    got = await answers(heard, chat, engine)
    assert got[0] == [0, [first, second]], "the replies win, both taken"
    assert got[1] == [1, [resolution]], "the resolution stayed for the next wait"
    assert got[2] == [None, []]
    # The replies came while the run was busy: they were queued in its own lane, and its wait took them out of
    # the queue (no second run of the conversation), as explain_event says.
    assert (await lane_state(engine, sid, "conversation", chat))["pending"] == 0, "nothing left in its lane's queue"
    await asyncio.sleep(1.5)  # a second run would have started by now
    runs = (await engine.command("list_executions", session_id=sid, listener="conversation"))["executions"]
    assert len(runs) == 1, runs
    explained = await engine.command("explain_event", session_id=sid, event_id=first)
    assert explained["waits"] == [{"execution_id": runs[0]["id"], "wait": 1, "kind": "wait", "condition": 0}]
    [mine] = [x for x in explained["listeners"] if x["listener"] == "conversation"]
    assert mine["taken_by_wait"] == {"execution_id": runs[0]["id"], "wait": 1}


async def test_what_a_wait_takes_starts_no_other_run_of_its_listener_but_reaches_other_listeners(
    heard_engine: tuple[Engine, Heard],
) -> None:
    engine, heard = heard_engine
    await engine.command("save_listener", listener=conversation(waits=2, timeout=5))
    await engine.command(
        "save_listener",
        listener={
            "name": "audit",
            "filter": {"types": ["thread.item_posted"], "aliases": ["chats/*"]},
            "batch": {"max_events": 1},
            "action": {"type": "object", "alias": "audit/{{ event.id }}", "value": {"type": "seen"}},
        },
    )
    sid = await new_session(engine)
    chat = "chats/taken"
    start = await post(engine, sid, chat, "start")
    later = []
    # While the run waits (its first wait is open by now, or will find these looking back).
    for message in ("a", "b"):
        later.append(await post(engine, sid, chat, message))
    got = await answers(heard, chat)
    assert [ids for _, ids in got] == [[later[0]], [later[1]]], got
    runs = (await engine.command("list_executions", session_id=sid, listener="conversation"))["executions"]
    assert len(runs) == 1, f"the replies a wait took started no run of their own: {runs}"

    async def audited() -> bool:
        objects = (await engine.command("list_objects", session_id=sid, prefix="audit/"))["objects"]
        return len(objects) == 3

    await eventually(audited, what="the audit listener to see every message, those the waits took too")
    assert start < later[0]


async def test_a_wait_that_hears_nothing_answers_none_after_its_timeout(heard_engine: tuple[Engine, Heard]) -> None:
    engine, heard = heard_engine
    await engine.command("save_listener", listener=conversation(timeout=1.5))
    sid = await new_session(engine)
    await post(engine, sid, "chats/quiet", "anyone?")
    assert await answers(heard, "chats/quiet") == [[None, []]]
    [wait] = await waits_of(engine, sid)
    assert wait["state"] == "timed_out"


async def waits_of(engine: Engine, sid: str) -> list[dict[str, Any]]:
    async with engine.platform.store.transaction() as conn:
        rows = await conn.fetch(
            "SELECT execution_id, seq, kind, state, matched, event_ids FROM orchestrator.run_waits"
            " WHERE session_id = $1 ORDER BY id",
            sid,
        )
    return [dict(r) for r in rows]


@pytest.mark.parametrize(
    ("conditions", "said"),
    [("thread.item_posted", "conditions: must be a list"), (None, "conditions: is required")],
)
async def test_conditions_that_are_no_list_are_refused_naming_the_field(
    heard_engine: tuple[Engine, Heard], conditions: Any, said: str
) -> None:
    """Not a list of conditions: refused as `invalid_request` naming `conditions` (a string was taken for the list of
    its characters, and None failed the run with a `TypeError`)."""
    engine, heard = heard_engine
    sid = await new_session(engine)
    await engine.command("save_listener", listener=conversation(raw_conditions=conditions))
    await post(engine, sid, "chats/raw", "x")
    [[refused, code, message]] = await answers(heard, "chats/raw")
    assert (refused, code) == ("refused", "invalid_request")
    assert message.startswith(said), message


@pytest.mark.parametrize(
    ("replies", "said"),
    [
        ({**REPLIES, "types": ["thread.item_postd"]}, "conditions.0.types.0: 'thread.item_postd'"),
        # An object's events carry its rev, not its value: a path into the value never resolves.
        (
            {**RESOLVED, "where": [{"path": "data.status", "op": "eq", "value": "done"}]},
            "conditions.0.where.0.path: path 'data.status' never resolves: the data of object.written holds data.rev",
        ),
    ],
)
async def test_a_wait_of_a_condition_that_can_never_hold_is_refused_naming_the_field(
    heard_engine: tuple[Engine, Heard], replies: dict[str, Any], said: str
) -> None:
    engine, heard = heard_engine
    sid = await new_session(engine)
    await engine.command("save_listener", listener=conversation(replies=replies))
    await post(engine, sid, "chats/typo", "x")
    got = await answers(heard, "chats/typo")
    [[refused, code, message]] = got
    assert (refused, code) == ("refused", "invalid_request")
    assert message.startswith(said), message


async def test_a_wait_from_a_position_retention_has_deleted_past_is_refused_saying_where_the_stream_starts(
    heard_engine: tuple[Engine, Heard],
) -> None:
    """A read past retention says where the stream starts (SPEC 14): a wait counting from before what is kept
    would answer from what is left as if nothing had been deleted."""
    engine, heard = heard_engine
    sid = (await engine.command("open_session", retention={"event_seconds": 1}))["session"]["id"]
    old = [await post(engine, sid, "notes/1", "before") for _ in range(2)]
    await asyncio.sleep(1.3)
    retention = engine.platform.settings.retention
    await engine.platform.store.trim_session(sid, 100, retention.event_seconds, retention.closed_session_seconds)
    assert (await engine.command("list_session_events", session_id=sid))["first_id"] > old[-1]
    await engine.command("save_listener", listener=conversation(after=old[0]))
    await post(engine, sid, "chats/late", "hello")
    [[refused, code, message]] = await answers(heard, "chats/late")
    assert (refused, code) == ("refused", "past_retention")
    assert message.startswith(f"after: retention deleted the events of session {sid!r} up to {old[-1]}"), message


async def test_a_wait_from_a_position_past_the_logs_end_is_refused(heard_engine: tuple[Engine, Heard]) -> None:
    """A position no event holds yet counts from nothing: refused naming `after`, not a wait that can only time out."""
    engine, heard = heard_engine
    sid = await new_session(engine)
    await engine.command("save_listener", listener=conversation(after=10**9))
    await post(engine, sid, "chats/ahead", "hello")
    [[refused, code, message]] = await answers(heard, "chats/ahead")
    assert (refused, code) == ("refused", "invalid_request")
    assert message.startswith("after: 1000000000 is past the session's last event ("), message


async def test_a_wait_whose_condition_needs_a_value_among_none_is_answered_by_its_other_condition(
    heard_engine: tuple[Engine, Heard],
) -> None:
    """A run makes its wait's values as it goes: an `in` of none is no mistake to refuse (a listener's save refuses
    it), only a condition that never answers; the other one does."""
    engine, heard = heard_engine
    sid = await new_session(engine)
    never = {**REPLIES, "where": [{"path": "alias", "op": "in", "value": []}]}
    await engine.command("save_listener", listener=conversation(replies=never))
    chat = "chats/none-open"
    await post(engine, sid, chat, "x")
    resolution = (
        await engine.command("write_object", session_id=sid, alias=f"{chat}/resolution", value={"type": "resolution"})
    )["event_id"]
    assert await answers(heard, chat) == [[1, [resolution]]]


async def test_a_wait_its_caller_gives_up_on_is_closed_and_takes_nothing_later(
    heard_engine: tuple[Engine, Heard],
) -> None:
    engine, heard = heard_engine
    await engine.command("save_listener", listener=conversation(give_up_after=1, waits=0))
    sid = await new_session(engine)
    await post(engine, sid, "chats/given-up", "anyone?")
    assert await answers(heard, "chats/given-up") == [["gave up"]]
    [wait] = await waits_of(engine, sid)
    assert wait["state"] == "abandoned", "closed when its caller gave up, not left open to take what comes"


async def test_an_answer_too_heavy_for_one_payload_is_read_by_the_run_in_pages(
    heard_engine: tuple[Engine, Heard],
) -> None:
    """Five replies of 150 KB each weigh more than an answer carries whole: the run is told their ids and reads them."""
    engine, heard = heard_engine
    await engine.command("save_listener", listener=conversation(busy=1, max_events=5, timeout=10))
    sid = await new_session(engine)
    chat = "chats/heavy"
    await post(engine, sid, chat, "start")
    replies = [await post(engine, sid, chat, "x" * 150_000) for _ in range(5)]
    assert await answers(heard, chat) == [[0, replies]]


async def test_a_wait_hears_by_contains_and_prefix_reading_the_value_as_text(
    heard_engine: tuple[Engine, Heard],
) -> None:
    """A wait's conditions are a listener's filter, `prefix` and `contains` included, routed by the same SQL: `%`
    and `_` in a value are plain characters (as a LIKE pattern, `50%` would take `5000`). Its replies come while
    the run is busy, so its wait looks back over all three at once and takes the one its condition holds for."""
    engine, heard = heard_engine
    chat = "chats/offers"
    replies = {
        "types": ["thread.item_posted"],
        "aliases": [chat],
        "where": [
            {"path": "item.message", "op": "contains", "value": "50%"},
            {"not": {"path": "item.message", "op": "prefix", "value": "_"}},
        ],
    }
    await engine.command("save_listener", listener=conversation(replies=replies, busy=1, max_events=5))
    sid = await new_session(engine)
    await post(engine, sid, chat, "any offers?")
    # Not a user's: they never start a run of the conversation's listener, only its wait may hear them.
    await post(engine, sid, chat, "5000 off", role="agent")
    await post(engine, sid, chat, "_50% off_", role="agent")
    wanted = await post(engine, sid, chat, "take 50% off", role="agent")
    assert await answers(heard, chat, engine) == [[0, [wanted]]]


async def test_a_condition_of_no_types_hears_any_type_as_a_listeners_filter_does(
    heard_engine: tuple[Engine, Heard],
) -> None:
    """Conditions use the listener filter language, where `types` may be left out: a condition of places and
    `where` alone hears events of any type there, in the look back (a reply while the run is busy) and in a round
    (one after its wait began)."""
    engine, heard = heard_engine
    chat = "chats/untyped"
    replies = {"aliases": [chat], "where": [{"path": "item.role", "op": "eq", "value": "agent"}]}
    await engine.command("save_listener", listener=conversation(replies=replies, busy=1, waits=2, timeout=30))
    sid = await new_session(engine)
    await post(engine, sid, chat, "anyone?")
    first = await post(engine, sid, chat, "here", role="agent")

    async def waiting_again() -> bool:
        return any(w["state"] == "open" for w in await waits_of(engine, sid))

    await eventually(waiting_again, what="the run's second wait")
    second = await post(engine, sid, chat, "still here", role="agent")
    assert await answers(heard, chat, engine) == [[0, [first]], [0, [second]]]


async def test_the_receipt_of_the_runs_own_batch_never_answers_its_wait(heard_engine: tuple[Engine, Heard]) -> None:
    """A run's listener writes its batch's receipt (a thread item, `source.listener` the listener, no run): news of
    the run itself, so never an answer to the run's wait however wide its conditions; a reply posted after it is."""
    engine, heard = heard_engine
    anything = {"types": ["thread.item_posted"]}
    await engine.command(
        "save_listener", listener={**conversation(replies=anything, busy=1), "receipt": {"alias": "ops/receipts"}}
    )
    sid = await new_session(engine)
    await post(engine, sid, "chats/r", "hello")

    async def receipt_written() -> bool:
        found = await engine.command("list_thread_items", session_id=sid, alias="ops/receipts")
        return bool(found["items"])

    await eventually(receipt_written, what="the batch's receipt")
    reply = await post(engine, sid, "chats/other", "a reply", role="agent")
    assert await answers(heard, "chats/r", engine) == [[0, [reply]]]
