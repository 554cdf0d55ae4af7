"""Idle timers: `lane.idle` after N seconds of silence, restarted by each event, once per silence."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from orchestrator.platform import Platform
from tests.engine.harness import Engine, eventually, new_session, recorder_listener, running_engine, write_many

pytestmark = pytest.mark.asyncio


# The recorder's action with a template that names the batch's events: its runs get them whole.
WHOLE = {"type": "workflow", "workflow": "recorder", "input": {"events": "{{ batch.events }}"}}


def idle_runs(engine: Engine) -> list[dict[str, object]]:
    return [e for r in engine.log.runs for e in r.input["batch"]["events"] if e["type"] == "lane.idle"]


async def test_silence_is_announced_once_after_n_seconds(engine: Engine, temporal_env: WorkflowEnvironment) -> None:
    if not temporal_env.supports_time_skipping:
        pytest.skip("needs the time-skipping server to wait minutes in seconds")
    listener = recorder_listener(batch={"window_seconds": 0.2}, idle={"after_seconds": 60}, action=WHOLE)
    await engine.command("save_listener", listener=listener)
    sid = await new_session(engine)
    [first] = await write_many(engine, sid, ["missions/a"])

    async def runs(n: int) -> bool:
        return len(engine.log.runs) >= n

    await eventually(lambda: runs(1), what="the first run")
    await temporal_env.sleep(30)
    [second] = await write_many(engine, sid, ["missions/b"])
    await eventually(lambda: runs(2), what="the second run")
    await temporal_env.sleep(45)  # 45 s after the second event: the first event's 60 s passed, not this one's
    assert idle_runs(engine) == [], "each event restarts the timer"
    await temporal_env.sleep(20)
    await eventually(lambda: runs(3), what="the idle run")
    [idle] = idle_runs(engine)
    assert idle["data"] == {"listener": "orchestrate", "lane": "_", "last_event_id": second, "after_seconds": 60.0}
    assert idle["source"] == {"listener": "orchestrate"}
    assert idle["actor"] == {"listener": "orchestrate"}, "a lane's silence is its listener's doing"
    await temporal_env.sleep(300)
    await write_many(engine, sid, ["elsewhere/x"])  # an event for nobody: a chance for a stray wake-up to show
    assert len(idle_runs(engine)) == 1, "one silence, one announcement"
    assert first < second < int(str(idle["id"]))


async def test_an_announced_silence_is_in_the_stream_for_other_listeners(
    engine: Engine, temporal_env: WorkflowEnvironment
) -> None:
    if not temporal_env.supports_time_skipping:
        pytest.skip("needs the time-skipping server to wait minutes in seconds")
    await engine.command(
        "save_listener",
        listener=recorder_listener(batch={"window_seconds": 0.2}, idle={"after_seconds": 30}, action=WHOLE),
    )
    watcher = recorder_listener("watcher", filter={"types": ["lane.idle"]}, batch={"window_seconds": 0.2}, action=WHOLE)
    await engine.command("save_listener", listener=watcher)
    sid = await new_session(engine)
    await write_many(engine, sid, ["missions/a"])

    async def watched() -> bool:
        return any(r.input["listener"] == "watcher" for r in engine.log.runs)

    await eventually(lambda: _ran(engine, "orchestrate"), what="the first run")
    await temporal_env.sleep(40)
    await eventually(watched, what="the watcher's run on lane.idle")
    stream = (await engine.command("list_session_events", session_id=sid, types=["lane.idle"]))["events"]
    assert len(stream) == 1


async def _ran(engine: Engine, listener: str) -> bool:
    return any(r.input["listener"] == listener for r in engine.log.runs)


@pytest.fixture
async def short_history_engine(platform: Platform, temporal_env: WorkflowEnvironment) -> AsyncIterator[Engine]:
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping, "lane_history_limit": 30}
    )
    async with running_engine(platform, temporal_env.client) as engine:
        yield engine


async def test_the_idle_timer_survives_continue_as_new(
    short_history_engine: Engine, temporal_env: WorkflowEnvironment
) -> None:
    if not temporal_env.supports_time_skipping:
        pytest.skip("needs the time-skipping server to wait minutes in seconds")
    engine = short_history_engine
    await engine.command(
        "save_listener",
        listener=recorder_listener(batch={"window_seconds": 0.1}, idle={"after_seconds": 60}, action=WHOLE),
    )
    sid = await new_session(engine)
    ids: list[int] = []
    for n in range(12):
        [written] = await write_many(engine, sid, [f"missions/{n}"])
        ids.append(written)
        await eventually(lambda written=written: _has(engine, written), what=f"event {n} in a run")  # type: ignore[misc]
    handle = engine.client.get_workflow_handle(f"lane:{sid}:orchestrate:_")
    history = await handle.fetch_history()
    assert history.events[0].workflow_execution_started_event_attributes.continued_execution_run_id, (
        "the lane continued as new at least once"
    )
    await temporal_env.sleep(70)
    await eventually(lambda: _idle_seen(engine), what="the idle run after continue-as-new")
    [idle] = idle_runs(engine)
    assert idle["data"]["last_event_id"] == ids[-1]  # type: ignore[index]


async def _has(engine: Engine, event_id: int) -> bool:
    return event_id in engine.log.event_ids()


async def _idle_seen(engine: Engine) -> bool:
    return bool(idle_runs(engine))


async def test_a_lane_whose_events_wait_counts_its_silence_from_the_newest(
    engine: Engine, temporal_env: WorkflowEnvironment
) -> None:
    """A lane is nudged when it turns pending, not for each event after: one whose events wait (here paused) hears
    of the later ones when its silence comes due, and counts again from the newest rather than announce it."""
    if not temporal_env.supports_time_skipping:
        pytest.skip("needs the time-skipping server to wait minutes in seconds")
    await engine.command(
        "save_listener",
        listener=recorder_listener(batch={"window_seconds": 0.2}, idle={"after_seconds": 60}, action=WHOLE),
    )
    sid = await new_session(engine)
    await engine.command("pause_listener", name="orchestrate", session_id=sid)

    async def announced() -> list[dict[str, Any]]:
        found = await engine.command("list_session_events", session_id=sid, types=["lane.idle"])
        return list(found["events"])

    async def any_announced() -> bool:
        return bool(await announced())

    await write_many(engine, sid, ["missions/a"])
    await temporal_env.sleep(40)
    [second] = await write_many(engine, sid, ["missions/b"])
    await temporal_env.sleep(40)  # 80 s after the first event, 40 after the second
    assert await announced() == [], "the second event restarted the silence"
    await temporal_env.sleep(40)
    await eventually(any_announced, what="the silence after the second event")
    [idle] = await announced()
    assert idle["data"]["last_event_id"] == second
