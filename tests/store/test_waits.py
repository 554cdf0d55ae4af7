"""A run's waits in the store, one statement at a time: answered at once from the log, closed on the timeout unless
an answer came first, abandoned from the start for a run that has ended, and numbered per Temporal run (a run
continued as new numbers its waits again)."""

from __future__ import annotations

import asyncio
from typing import Any

from orchestrator.core.waits import parse_wait
from orchestrator.platform import Platform
from orchestrator.store.waits import compiled_conditions


def wait(session_id: str, execution_id: str, seq: int = 1, run_id: str = "r1", after: int = 0) -> dict[str, Any]:
    spec = parse_wait(
        {"conditions": [{"types": ["object.written"], "aliases": ["replies/*"]}], "timeout_seconds": 60.0}
    )
    return {
        "session_id": session_id,
        "execution_id": execution_id,
        "run_id": run_id,
        "seq": seq,
        "kind": "wait",
        "listener": None,
        "after": after,
        "max_events": 5,
        "timeout_seconds": spec.timeout_seconds,
        "conditions": [c.model_dump(mode="json") for c in spec.conditions],
        "compiled": compiled_conditions(spec.conditions),
    }


async def write(platform: Platform, sid: str, alias: str) -> int:
    reply = await platform.command(
        {"command": "write_object", "session_id": sid, "alias": alias, "value": {"type": "t"}}
    )
    return int(reply["event_id"])


async def routed(platform: Platform, sid: str) -> None:
    await platform.store.pool.execute(
        "UPDATE orchestrator.routing_cursors SET routed_event_id = (SELECT last_event_id FROM orchestrator.sessions"
        " WHERE id = $1) WHERE session_id = $1",
        sid,
    )


async def record_run(platform: Platform, sid: str, execution_id: str, status: str = "running") -> None:
    await platform.store.pool.execute(
        "INSERT INTO orchestrator.executions (id, session_id, workflow, status) VALUES ($1, $2, 'w', $3)",
        execution_id,
        sid,
        status,
    )


async def test_a_wait_is_answered_at_once_from_what_the_log_holds_after_its_position(platform: Platform) -> None:
    sid = (await platform.command({"command": "open_session"}))["session"]["id"]
    before = await write(platform, sid, "replies/1")
    after = [await write(platform, sid, f"replies/{n}") for n in (2, 3)]
    await routed(platform, sid)
    opened = await platform.store.open_wait(wait(sid, "exe:a", after=before))
    assert (opened["state"], opened["matched"], opened["event_ids"]) == ("answered", 0, after)
    again = await platform.store.open_wait(wait(sid, "exe:a", after=0))
    assert again == opened, "the same run and number find the same wait"
    closed = await platform.store.close_wait("exe:a", "r1", 1)
    assert closed is not None and closed["state"] == "answered", "a close after the answer takes the answer"


async def test_a_wait_with_nothing_after_its_position_is_open_then_timed_out(platform: Platform) -> None:
    sid = (await platform.command({"command": "open_session"}))["session"]["id"]
    last = await write(platform, sid, "replies/1")
    await routed(platform, sid)
    opened = await platform.store.open_wait(wait(sid, "exe:b", after=last))
    assert opened["state"] == "open"
    closed = await platform.store.close_wait("exe:b", "r1", 1)
    assert closed is not None and closed["state"] == "timed_out"
    probes = await platform.store.pool.fetchval("SELECT count(*) FROM orchestrator.wait_probes")
    assert probes == 0, "a closed wait leaves nothing for the rounds to meet"


async def test_a_wait_of_a_run_that_has_ended_is_abandoned_and_takes_nothing(platform: Platform) -> None:
    """Its call came after the run's end was recorded (an activity still running when the run was cancelled)."""
    sid = (await platform.command({"command": "open_session"}))["session"]["id"]
    await record_run(platform, sid, "exe:c", "cancelled")
    await write(platform, sid, "replies/1")
    await routed(platform, sid)
    opened = await platform.store.open_wait(wait(sid, "exe:c"))
    assert (opened["state"], opened["event_ids"]) == ("abandoned", [])


async def test_a_run_continued_as_new_numbers_its_waits_again(platform: Platform) -> None:
    sid = (await platform.command({"command": "open_session"}))["session"]["id"]
    first = await write(platform, sid, "replies/1")
    await routed(platform, sid)
    old = await platform.store.open_wait(wait(sid, "exe:d", run_id="run-1"))
    assert old["event_ids"] == [first]
    new = await platform.store.open_wait(wait(sid, "exe:d", run_id="run-2", after=first))
    assert new["state"] == "open", "the new run's wait 1 is its own, not the old run's answered one"


async def test_a_run_whose_end_is_recorded_while_its_wait_is_put_in_place_leaves_no_wait_open(
    platform: Platform,
) -> None:
    """A wait left open for an ended run would take every event it matches from the run's listener for ever: the
    wait's opening and the run's end take turns, whichever comes first."""
    sid = (await platform.command({"command": "open_session"}))["session"]["id"]
    await record_run(platform, sid, "exe:e")
    await routed(platform, sid)
    ending = {"execution_id": "exe:e", "session_id": sid, "listener": None, "status": "completed"}
    async with platform.store.pool.acquire() as conn, conn.transaction():
        opened = await conn.fetchval("SELECT orchestrator.orchestrator_wait_open($1)", wait(sid, "exe:e"))
        assert opened["state"] == "open"
        # The run ends from elsewhere while the wait is not yet committed.
        end = asyncio.create_task(platform.store.pool.fetchval("SELECT orchestrator.orchestrator_run_end($1)", ending))
        await asyncio.sleep(0.5)
    ended = await end
    assert ended["recorded"]
    state = await platform.store.pool.fetchval("SELECT state FROM orchestrator.run_waits WHERE execution_id = 'exe:e'")
    assert state == "abandoned"


async def test_a_wait_given_up_as_its_answer_came_leaves_the_answer_to_the_runs_next_wait(platform: Platform) -> None:
    """Its caller gave up on it (its task cancelled) as the answer came: the caller never saw the events, which the
    routing round had left out of the listener's lanes as the run's, so the run's next wait finds them."""
    sid = (await platform.command({"command": "open_session"}))["session"]["id"]
    reply = await write(platform, sid, "replies/1")
    await routed(platform, sid)
    assert (await platform.store.open_wait(wait(sid, "exe:f")))["state"] == "answered"
    given_up = await platform.store.close_wait("exe:f", "r1", 1, given_up=True)
    assert given_up is not None and (given_up["state"], given_up["event_ids"]) == ("abandoned", [])
    again = await platform.store.open_wait(wait(sid, "exe:f", seq=2))
    assert (again["state"], again["event_ids"]) == ("answered", [reply])
    # A wait the caller had its answer from is closed as before: what it took stays taken.
    assert (await platform.store.close_wait("exe:f", "r1", 2))["state"] == "answered"
    third = await platform.store.open_wait(wait(sid, "exe:f", seq=3))
    assert third["state"] == "open"


def two_conditions(session_id: str, execution_id: str, **more: Any) -> dict[str, Any]:
    """A wait for `first/*` (declared first) or `second/*`, from the session's start."""
    spec = parse_wait(
        {
            "conditions": [
                {"types": ["object.written"], "aliases": ["first/*"]},
                {"types": ["object.written"], "aliases": ["second/*"]},
            ],
            "timeout_seconds": 60.0,
        }
    )
    return {
        **wait(session_id, execution_id, after=0),
        "conditions": [c.model_dump(mode="json") for c in spec.conditions],
        "compiled": compiled_conditions(spec.conditions),
        **more,
    }


async def test_a_later_condition_routed_does_not_win_over_an_earlier_one_committed_and_not_routed_yet(
    platform: Platform,
) -> None:
    """Router lag: the second condition's event is routed, the first's committed after it and not routed yet. Both
    are ready together, so the first declared must win: the wait answers `behind` and is not put in place (its
    caller asks again), until routing has caught up, or until the caller settles for what is routed."""
    sid = (await platform.command({"command": "open_session"}))["session"]["id"]
    second = await write(platform, sid, "second/1")
    await routed(platform, sid)
    first = await write(platform, sid, "first/1")  # committed, not routed

    # A caller of the release before never asks again: it is answered from what is routed, as it always was.
    older = await platform.store.open_wait(two_conditions(sid, "exe:older"))
    assert (older["matched"], older["event_ids"]) == (1, [second])
    assert (await platform.store.open_wait(two_conditions(sid, "exe:lag", settled=False)))["state"] == "behind"
    left = await platform.store.pool.fetchval(
        "SELECT count(*) FROM orchestrator.run_waits WHERE session_id = $1 AND execution_id = 'exe:lag'", sid
    )
    assert left == 0, "a wait that answered behind is not in place"
    settled = await platform.store.open_wait(two_conditions(sid, "exe:settled", settled=True))
    assert (settled["matched"], settled["event_ids"]) == (1, [second]), "settled: the answer stands on what is routed"

    await routed(platform, sid)
    caught_up = await platform.store.open_wait(two_conditions(sid, "exe:lag", settled=False))
    assert (caught_up["state"], caught_up["matched"], caught_up["event_ids"]) == ("answered", 0, [first])
    # The first condition's event routed first: no reason to wait, whatever follows.
    other = (await platform.command({"command": "open_session"}))["session"]["id"]
    early = await write(platform, other, "first/2")
    await routed(platform, other)
    await write(platform, other, "first/3")
    answered = await platform.store.open_wait(two_conditions(other, "exe:early", settled=False))
    assert (answered["matched"], answered["event_ids"]) == (0, [early])


async def test_waits_of_one_run_open_at_once_never_take_the_same_event(platform: Platform) -> None:
    """Two waits of a run in place together (`asyncio.gather`), one event for both: the wait put in place first takes
    it, the other the next one (docs/waits.md: a later wait never takes what an earlier one took). Another run's wait
    hears the same event as its own."""
    sid = (await platform.command({"command": "open_session"}))["session"]["id"]
    last = await write(platform, sid, "before/0")
    await routed(platform, sid)
    for seq in (1, 2):
        assert (await platform.store.open_wait(wait(sid, "exe:g", seq=seq, after=last)))["state"] == "open"
    assert (await platform.store.open_wait(wait(sid, "exe:h", after=last)))["state"] == "open"

    async def round_through(start: int, through: int) -> dict[tuple[str, int], list[int]]:
        answers = await platform.store.pool.fetchval(
            "SELECT orchestrator.orchestrator_answer_waits($1, $2, $3)", sid, start, through
        )
        return {(a["execution_id"], a["seq"]): a["event_ids"] for a in answers or []}

    first = await write(platform, sid, "replies/1")
    assert await round_through(last, first) == {("exe:g", 1): [first], ("exe:h", 1): [first]}
    second = await write(platform, sid, "replies/2")
    assert await round_through(first, second) == {("exe:g", 2): [second]}


async def test_a_wait_given_up_before_its_call_put_it_in_place_takes_nothing_when_the_call_comes(
    platform: Platform,
) -> None:
    """Its caller was cancelled while the call that puts it in place was still in flight (a timeout of its own): the
    give-up comes first and leaves the wait given up, so the late call finds it so and takes nothing for nobody."""
    sid = (await platform.command({"command": "open_session"}))["session"]["id"]
    await record_run(platform, sid, "exe:late")
    given_up = await platform.store.close_wait("exe:late", "r1", 1, given_up=True)
    assert given_up is not None and given_up["state"] == "abandoned"
    reply = await write(platform, sid, "replies/1")
    await routed(platform, sid)
    late = await platform.store.open_wait(wait(sid, "exe:late", seq=1))
    assert (late["state"], late["event_ids"]) == ("abandoned", []), late
    following = await platform.store.open_wait(wait(sid, "exe:late", seq=2))
    assert (following["state"], following["event_ids"]) == ("answered", [reply]), "the run's next wait has it"


async def test_a_wait_closed_while_a_round_answers_it_leaves_the_event_to_the_runs_next_wait(
    platform: Platform,
) -> None:
    """The round read the run's first wait open and took the event for it, while its timeout was closing it: the
    close wins, the first wait took nothing, so the run's second wait takes the event (it was kept from both)."""
    sid = (await platform.command({"command": "open_session"}))["session"]["id"]
    last = await write(platform, sid, "before/0")
    await routed(platform, sid)
    for seq in (1, 2):
        assert (await platform.store.open_wait(wait(sid, "exe:k", seq=seq, after=last)))["state"] == "open"
    reply = await write(platform, sid, "replies/1")
    pool = platform.store.pool
    async with pool.acquire() as closer, closer.transaction():
        closed = await closer.fetchval("SELECT orchestrator.orchestrator_wait_close('exe:k', 'r1', 1)")
        assert closed["state"] == "timed_out"
        answering = asyncio.create_task(
            pool.fetchval("SELECT orchestrator.orchestrator_answer_waits($1, $2, $3)", sid, last, reply)
        )
        await asyncio.sleep(0.5)  # the round reads the first wait open and waits for its row
        assert not answering.done()
    answers = await answering
    assert [(a["seq"], a["event_ids"]) for a in answers or []] == [(2, [reply])]


async def chat_lane(platform: Platform, sid: str, through: int, *, fired: bool) -> int:
    """The lane `replies/y` of a listener `chat`, routed through `through` (and fired through it, `fired`)."""
    return int(
        await platform.store.pool.fetchval(
            "INSERT INTO orchestrator.lanes (session_id, listener, lane, workflow_id, routed_through, fired_through)"
            " VALUES ($1, 'chat', 'replies/y', 'w', $2, $3) RETURNING id",
            sid,
            through,
            through if fired else 0,
        )
    )


async def test_a_wait_leaves_what_a_lane_of_its_runs_listener_fired_while_no_wait_was_open(platform: Platform) -> None:
    """docs/waits.md: an event that comes while the run has no wait open goes to the lanes, and the run's next wait
    takes it unless the lane fired it first. Another key's lane of the run's listener fired it (its own run took
    it): the run's wait leaves it (it took it too, one event reaching two actions of one listener); a wait of a run
    of another listener still hears it."""
    sid = (await platform.command({"command": "open_session"}))["session"]["id"]
    fired, waiting = await write(platform, sid, "replies/y"), await write(platform, sid, "replies/z")
    await routed(platform, sid)
    lane = await chat_lane(platform, sid, fired, fired=True)
    for run_key, event_id in (("chat:y:run", fired), ("chat:x:run", waiting)):
        await platform.store.pool.execute(
            "INSERT INTO orchestrator.batches (lane_id, session_id, listener, first_id, last_id, event_ids, entry_ids,"
            " state, counted, run_key) VALUES ($1, $2, 'chat', $3, $3, ARRAY[$3::bigint], ARRAY[$3::bigint], 'done',"
            " true, $4)",
            lane,
            sid,
            event_id,
            run_key,
        )
    await platform.store.pool.execute(
        "INSERT INTO orchestrator.executions (id, session_id, workflow, status, run_key) VALUES ('exe:x', $1, 'w',"
        " 'running', 'chat:x:run')",
        sid,
    )
    own = await platform.store.open_wait({**wait(sid, "exe:x"), "listener": "chat", "lane": "replies/x"})
    assert (own["state"], own["event_ids"]) == ("answered", [waiting]), "its own batch's event it may hear again"
    other = await platform.store.open_wait({**wait(sid, "exe:o"), "listener": "other", "lane": "_"})
    assert (other["state"], other["event_ids"]) == ("answered", [fired, waiting]), other


async def test_a_lane_recording_its_batch_as_a_wait_looks_back_is_waited_for(platform: Platform) -> None:
    """A lane's record in flight (its lane row locked, its batch not committed) when a run's wait looks back: the
    look back waits for it and leaves the event its batch took (it read before the batch was there and took the
    event too, the lane's run taking it as well)."""
    sid = (await platform.command({"command": "open_session"}))["session"]["id"]
    event_id = await write(platform, sid, "replies/y")
    await routed(platform, sid)
    lane = await chat_lane(platform, sid, event_id, fired=False)
    await platform.store.pool.execute(
        "INSERT INTO orchestrator.lane_queue (lane_id, first_id, last_id) VALUES ($1, $2, $2)", lane, event_id
    )
    async with platform.store.pool.acquire() as recording, recording.transaction():
        await recording.execute(
            "UPDATE orchestrator.lanes SET seq = seq + 1, fired_through = $2 WHERE id = $1", lane, event_id
        )
        await recording.execute(
            "INSERT INTO orchestrator.batches (lane_id, session_id, listener, first_id, last_id, event_ids, entry_ids,"
            " counted, run_key) VALUES ($1, $2, 'chat', $3, $3, ARRAY[$3::bigint], ARRAY[$3::bigint], true, 'y-run')",
            lane,
            sid,
            event_id,
        )
        opening = asyncio.ensure_future(
            platform.store.open_wait({**wait(sid, "exe:x"), "listener": "chat", "lane": "replies/x"})
        )
        await asyncio.sleep(0.5)
        assert not opening.done(), "the look back waits for the record in flight"
    opened = await opening
    assert (opened["state"], opened["event_ids"]) == ("open", []), opened
