"""`cancel_on`: an event after a run's batch cancels the listener's running runs in its session whose lane key is the
event's value at `key`; the run cleans up, ends `cancelled` with the event as its cause and is not repeated, and a
run of another key goes on. A run that ignores its cancellation is terminated once its grace has passed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import WorkflowEnvironment

from orchestrator.activities.session import SessionCall
from orchestrator.platform import Platform
from tests.engine.harness import Engine, eventually, lane_state, new_session, replacing, running_engine

pytestmark = pytest.mark.both_servers

with workflow.unsafe.imports_passed_through():
    from orchestrator.sdk import RunInput, RunSession


@workflow.defn(name="render")
class Render:
    """Renders until cancelled; then writes `cleaned/{document}` first (or, told to be stubborn, ignores it), and
    lets the cancellation through (or, told `then`, returns or fails instead)."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        session = RunSession(run)
        options: dict[str, Any] = run.input if isinstance(run.input, dict) else {}
        if options.get("fail_as"):
            raise ApplicationError("é" * 5000, type=options["fail_as"], non_retryable=True)
        try:
            if options.get("in_activity"):
                await workflow.execute_activity("test.render", start_to_close_timeout=timedelta(seconds=30))
            else:
                # Until cancelled: a timer of an hour is skipped past on the time-skipping server whenever its
                # time skipping unlocks, and the run would end before it is asked to.
                await workflow.wait_condition(lambda: False)
        except (asyncio.CancelledError, ActivityError):
            if options.get("stubborn"):
                await workflow.sleep(timedelta(hours=1))
            await session.write_object(f"cleaned/{run.batch.lane}", {"type": "cleaned"})
            if options.get("then") == "return":
                return
            if options.get("then") == "fail":
                raise ApplicationError("the clean-up went wrong", type="CleanupFailed") from None
            raise


@workflow.defn(name="cleans_up")
class CleansUp:
    """Cancelled while a call to its session runs, it cleans up as docs/waits.md shows: on `asyncio.CancelledError`."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        session = RunSession(run)
        try:
            await session.read_object(SLOW_READ)
        except asyncio.CancelledError:
            await session.write_object(f"cleaned/{run.batch.lane}", {"type": "cleaned"})
            raise


SLOW_READ = "slow/read"


def slow_reads(real: Callable[..., Any]) -> Callable[..., Any]:
    """The session's activity, whose read of `SLOW_READ` takes long enough for the run to be cancelled in it."""

    @activity.defn(name="orchestrator.session")
    async def session_call(call: SessionCall) -> Any:
        if call.op == "read_object" and call.args.get("alias") == SLOW_READ:
            await asyncio.sleep(4)
        return await real(call)

    return session_call


@activity.defn(name="test.render")
async def slow_render() -> None:
    """A render in an activity, until it is cancelled (heartbeats carry the cancellation to it, and a worker's
    shutdown cancels it): a fixed 4 s ended before a loaded machine delivered the cancellation, and the run
    completed."""
    for _ in range(60):
        activity.heartbeat()
        await asyncio.sleep(0.5)


def render(**overrides: Any) -> dict[str, Any]:
    return {
        "name": "render",
        "filter": {"types": ["object.written"], "aliases": ["docs/*"]},
        "concurrency": {"mode": "keyed", "key": "alias", "max_parallel": 4},
        "batch": {"max_events": 1},
        "action": {"type": "workflow", "workflow": "render", "input": overrides.pop("input", {})},
        "retry": {"attempts": 2, "delay_seconds": 0.1},
        "cancel_on": [
            {
                "types": ["object.deleted"],
                "aliases": ["docs/*"],
                "key": "alias",
                "grace_seconds": overrides.pop("grace", 1),
            }
        ],
        **overrides,
    }


@pytest.fixture
async def render_engine(platform: Platform, temporal_env: WorkflowEnvironment) -> AsyncIterator[Engine]:
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping}
    )

    def wrap(activities: list[Callable[..., Any]]) -> list[Callable[..., Any]]:
        return [slow_render, *replacing("orchestrator.session", slow_reads)(activities)]

    async with running_engine(platform, temporal_env.client, workflows=[Render, CleansUp], wrap=wrap) as engine:
        yield engine


async def executions(engine: Engine, sid: str) -> dict[str, dict[str, Any]]:
    return {e["lane"]: e for e in (await engine.command("list_executions", session_id=sid))["executions"]}


async def test_an_event_cancels_the_run_of_its_key_which_cleans_up_and_ends_cancelled(render_engine: Engine) -> None:
    engine = render_engine
    await engine.command("save_listener", listener=render())
    sid = await new_session(engine)
    for doc in ("docs/a", "docs/b"):
        await engine.command("write_object", session_id=sid, alias=doc, value={"type": "doc"})

    async def both_running() -> bool:
        runs = await executions(engine, sid)
        return len(runs) == 2 and all(r["status"] == "running" for r in runs.values())

    await eventually(both_running, what="both renders")
    deleted = (await engine.command("delete_object", session_id=sid, alias="docs/a"))["event_id"]

    async def cancelled() -> bool:
        return (await executions(engine, sid))["docs/a"]["status"] != "running"

    await eventually(cancelled, what="docs/a's render to end")
    runs = await executions(engine, sid)
    assert runs["docs/a"]["status"] == "cancelled" and runs["docs/a"]["error"] == f"cancelled by event {deleted}"
    assert runs["docs/a"]["cause"] == {"event": deleted}, "its run's row names the event that cancelled it"
    assert runs["docs/b"]["status"] == "running", "a run of another key goes on"
    assert "cause" not in runs["docs/b"]
    cleaned = await engine.command("read_object", session_id=sid, alias="cleaned/docs/a")
    assert cleaned["object"]["value"] == {"type": "cleaned"}, "its cleanup ran"
    ended = [
        e
        for e in (await engine.command("list_session_events", session_id=sid, types=["execution.ended"]))["events"]
        if e["execution"]["id"] == runs["docs/a"]["id"]
    ]
    assert [(e["execution"]["status"], e["cause"]["event"]) for e in ended] == [("cancelled", deleted)]
    explained = await engine.command("explain_event", session_id=sid, event_id=deleted)
    assert explained["waits"] == [{"execution_id": runs["docs/a"]["id"], "wait": 0, "kind": "cancel", "condition": 0}]
    # What it caused: the run it cancelled, and that run's end.
    [(end,)] = [(e["id"],) for e in ended]
    assert [c for c in explained["caused"] if "cancelled" in c] == [
        {
            "cancelled": {"execution_id": runs["docs/a"]["id"]},
            "wrote": [{"event": {"id": end, "type": "execution.ended", "actor": ended[0]["actor"]}}],
        }
    ]
    await asyncio.sleep(1.0)
    assert len(await executions(engine, sid)) == 2, "a cancelled run is not repeated, whatever its retry says"


async def test_a_run_that_ignores_its_cancellation_is_terminated_after_its_grace(render_engine: Engine) -> None:
    engine = render_engine
    await engine.command("save_listener", listener=render(input={"stubborn": True}, grace=4))
    sid = await new_session(engine)
    await engine.command("write_object", session_id=sid, alias="docs/c", value={"type": "doc"})

    async def running() -> bool:
        return (await executions(engine, sid)).get("docs/c", {}).get("status") == "running"

    await eventually(running, what="the render")
    await engine.command("delete_object", session_id=sid, alias="docs/c")
    await asyncio.sleep(2.5)
    assert await running(), "within its grace of 4 s it is left to clean up"

    async def ended() -> bool:
        return (await executions(engine, sid))["docs/c"]["status"] != "running"

    await eventually(ended, within=30, what="the stubborn run to be terminated after its grace")
    assert (await executions(engine, sid))["docs/c"]["status"] == "cancelled"


async def test_an_event_before_the_run_began_cancels_it_too(render_engine: Engine) -> None:
    """The watch counts from the run's batch, as a wait does: a deletion committed right after the write that
    starts the run cancels the run however soon it comes."""
    engine = render_engine
    await engine.command("save_listener", listener=render())
    sid = await new_session(engine)
    await engine.command("write_object", session_id=sid, alias="docs/d", value={"type": "doc"})
    await engine.command("delete_object", session_id=sid, alias="docs/d")

    async def ended() -> bool:
        runs = await executions(engine, sid)
        return "docs/d" in runs and runs["docs/d"]["status"] != "running"

    await eventually(ended, what="the render cancelled")
    assert (await executions(engine, sid))["docs/d"]["status"] == "cancelled"


async def test_an_event_the_watch_finds_as_it_is_put_in_place_cancels_the_run_as_it_starts(
    render_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write and its deletion both wait while the listener is paused: resumed, the watch put in place before the
    start finds the deletion at once, with no run on Temporal to tell yet. The finish of the batch tells it as the
    run starts, not the router's poll of what was left untold (kept from telling it here)."""
    monkeypatch.setattr("orchestrator.engine.wait_answers.UNTOLD_SECONDS", 1e9)
    engine = render_engine
    await engine.command("save_listener", listener=render())
    sid = await new_session(engine)
    await engine.command("pause_listener", name="render", session_id=sid)
    await engine.command("write_object", session_id=sid, alias="docs/p", value={"type": "doc"})
    await engine.command("delete_object", session_id=sid, alias="docs/p")
    await engine.command("resume_listener", name="render", session_id=sid)

    async def ended() -> bool:
        runs = await executions(engine, sid)
        return "docs/p" in runs and runs["docs/p"]["status"] != "running"

    await eventually(ended, what="the render cancelled")
    assert (await executions(engine, sid))["docs/p"]["status"] == "cancelled"


async def test_a_run_whose_watch_heard_its_event_ends_cancelled_even_when_it_failed_before_it_was_told(
    render_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ask decides how a run ends (docs/waits.md), as a stop's does: a run whose cancel watch heard its event
    before the run's end was recorded ends `cancelled` by that event even when it failed before
    Temporal's cancellation reached it, and is not repeated: no repeat runs for a deleted document, and no
    `listener.failed`. (A repeat's watch finds an event that came during its backoff as it is put in place, and
    a run that fails at once fails before it is told; here it is never told, so the race always goes its way.)"""
    monkeypatch.setattr("orchestrator.engine.wait_answers.UNTOLD_SECONDS", 1e9)

    async def not_told(self: Any, execution_id: str) -> bool:
        return True

    monkeypatch.setattr("orchestrator.lanes.executions.TemporalRuns.cancel", not_told)
    engine = render_engine
    await engine.command("save_listener", listener=render(input={"fail_as": "Boom"}))
    sid = await new_session(engine)
    await engine.command("pause_listener", name="render", session_id=sid)
    await engine.command("write_object", session_id=sid, alias="docs/q", value={"type": "doc"})
    deleted = (await engine.command("delete_object", session_id=sid, alias="docs/q"))["event_id"]

    # Routed before the run's watch is put in place, which then finds it at once (a watch looks back through the
    # routed log): else a loaded router may reach it only after the run failed, and the repeat is the one cancelled.
    async def routed() -> bool:
        return bool((await engine.command("explain_event", session_id=sid, event_id=deleted))["routed"])

    await eventually(routed, what="the delete routed")
    await engine.command("resume_listener", name="render", session_id=sid)

    async def ended() -> bool:
        runs = await executions(engine, sid)
        return "docs/q" in runs and runs["docs/q"]["status"] != "running"

    await eventually(ended, what="the render to end")
    # Not repeated: its end freed the slot rather than held it for a repeat (decided in the end's own transaction).
    assert (await lane_state(engine, sid, "render", "docs/q"))["in_flight"] == []
    runs = (await engine.command("list_executions", session_id=sid))["executions"]
    assert [(r["lane"], r["status"], r["error"]) for r in runs] == [
        ("docs/q", "cancelled", f"cancelled by event {deleted}")
    ], "cancelled by the event, and not repeated"
    [end] = (await engine.command("list_session_events", session_id=sid, types=["execution.ended"]))["events"]
    assert (end["execution"]["status"], end["cause"].get("event")) == ("cancelled", deleted)
    assert not (await engine.command("list_session_events", session_id=sid, types=["listener.failed"]))["events"]


async def test_a_run_cancelled_in_an_activity_ends_cancelled_and_is_not_repeated(render_engine: Engine) -> None:
    """Most of a run's time is in its activities: cancelled there, the run fails on the activity's cancellation,
    which is its cancellation all the same (not a failure to repeat)."""
    engine = render_engine
    await engine.command("save_listener", listener=render(input={"in_activity": True}))
    sid = await new_session(engine)
    await engine.command("write_object", session_id=sid, alias="docs/e", value={"type": "doc"})

    async def running() -> bool:
        return (await executions(engine, sid)).get("docs/e", {}).get("status") == "running"

    await eventually(running, what="the render")
    await engine.command("delete_object", session_id=sid, alias="docs/e")

    async def ended() -> bool:
        return (await executions(engine, sid))["docs/e"]["status"] != "running"

    await eventually(ended, what="the render cancelled")
    await asyncio.sleep(1.0)
    runs = (await engine.command("list_executions", session_id=sid))["executions"]
    assert [(r["lane"], r["status"]) for r in runs] == [("docs/e", "cancelled")], "cancelled, and not repeated"
    assert not (await engine.command("list_session_events", session_id=sid, types=["listener.failed"]))["events"]


@pytest.mark.parametrize("then", ["return", "fail"])
async def test_a_run_that_ends_its_own_way_after_its_cancellation_still_ends_cancelled_and_is_not_repeated(
    render_engine: Engine, then: str
) -> None:
    """A run that catches its cancellation and returns, or whose clean-up fails, ended because it was asked to:
    `cancelled` by the event (not `completed`, not `failed`), not repeated whatever its retry says, no
    `listener.failed`. A graceful `stop_execution` of such a run ends `stopped` with its reason the same way."""
    engine = render_engine
    await engine.command("save_listener", listener=render(input={"then": then}))
    sid = await new_session(engine)
    for alias in ("docs/f", "docs/g"):
        await engine.command("write_object", session_id=sid, alias=alias, value={"type": "doc"})

    async def both_running() -> bool:
        found = await executions(engine, sid)
        return all(found.get(a, {}).get("status") == "running" for a in ("docs/f", "docs/g"))

    await eventually(both_running, what="the renders")
    deleted = await engine.command("delete_object", session_id=sid, alias="docs/f")
    stop = await engine.command(
        "stop_execution", session_id=sid, execution_id=(await executions(engine, sid))["docs/g"]["id"], reason="bye"
    )
    # `stopping`; or, when the run caught its cancellation and its end was recorded before the answer, `stopped`.
    assert stop["execution"]["status"] in ("stopping", "stopped"), stop

    async def ended() -> bool:
        found = await executions(engine, sid)
        return all(found[a]["status"] != "running" for a in ("docs/f", "docs/g"))

    await eventually(ended, what="both renders to end")
    await asyncio.sleep(1.0)
    runs = (await engine.command("list_executions", session_id=sid))["executions"]
    assert sorted((r["lane"], r["status"], r["error"]) for r in runs) == [
        ("docs/f", "cancelled", f"cancelled by event {deleted['event_id']}"),
        ("docs/g", "stopped", "bye"),
    ], "ended by the asks, and not repeated"
    assert not (await engine.command("list_session_events", session_id=sid, types=["listener.failed"]))["events"]
    cleaned = await engine.command("list_session_events", session_id=sid, types=["object.written"])
    assert {e["alias"] for e in cleaned["events"]} >= {"cleaned/docs/f", "cleaned/docs/g"}, "both cleaned up"


async def test_a_failed_runs_error_is_bounded_its_type_as_its_message(render_engine: Engine) -> None:
    """`execution.ended` of a failed run carries its error bounded (SPEC 15): the message cut, and a type as long
    as a message cut too."""
    engine = render_engine
    once = {k: v for k, v in render(input={"fail_as": "T" * 3000}).items() if k != "retry"}
    await engine.command("save_listener", listener=once)
    sid = await new_session(engine)
    await engine.command("write_object", session_id=sid, alias="docs/h", value={"type": "doc"})

    async def ended() -> list[dict[str, Any]]:
        found = await engine.command("list_session_events", session_id=sid, types=["execution.ended"])
        return list(found["events"])

    await eventually(ended, what="the failed run's end")
    [end] = await ended()
    error = end["execution"]["error"]
    assert end["execution"]["status"] == "failed" and error["type"] == "T" * 200, error["type"][:20]
    assert 0 < len(error["message"]) <= 2000


async def test_a_run_cancelled_while_its_session_call_runs_gets_asyncio_cancellation_and_cleans_up(
    render_engine: Engine,
) -> None:
    """docs/waits.md: the run gets `asyncio.CancelledError` and may clean up, wherever the cancellation finds it: in a
    call to its session too (Temporal says so there with an `ActivityError`, which a clean-up for the cancellation
    never caught). By `cancel_on` and by a graceful `stop_execution` alike."""
    engine = render_engine
    await engine.command("save_listener", listener=render(action={"type": "workflow", "workflow": "cleans_up"}))
    sid = await new_session(engine)
    for doc in ("docs/c", "docs/s"):
        await engine.command("write_object", session_id=sid, alias=doc, value={"type": "doc"})

    async def both_running() -> bool:
        runs = await executions(engine, sid)
        return len(runs) == 2 and all(r["status"] == "running" for r in runs.values())

    await eventually(both_running, what="both runs")
    await asyncio.sleep(1.0)  # each in its slow read
    await engine.command("delete_object", session_id=sid, alias="docs/c")
    runs = await executions(engine, sid)
    await engine.command("stop_execution", session_id=sid, execution_id=runs["docs/s"]["id"], reason="bye")

    async def both_ended() -> bool:
        return all(r["status"] != "running" for r in (await executions(engine, sid)).values())

    await eventually(both_ended, what="both runs to end")
    runs = await executions(engine, sid)
    assert (runs["docs/c"]["status"], runs["docs/s"]["status"]) == ("cancelled", "stopped")
    for doc in ("docs/c", "docs/s"):
        cleaned = await engine.command("read_object", session_id=sid, alias=f"cleaned/{doc}")
        assert cleaned["object"] is not None, f"{doc}'s clean-up ran"
