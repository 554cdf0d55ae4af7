"""Record the histories the replay test replays: the example app on the dev server, under a workload that
takes the lane and the runs through what they do (bursts, a failing run and its repeats, continue-as-new,
keyed lanes waiting for a key slot, an idle lane ending and starting again, write actions).

Run it whenever a workflow's code changes in a way replay must survive (a `workflow.patched` branch), and
commit the new files: `python -m tests.replay.record` writes `tests/replay/histories/*.json`, one file per
workflow run, replacing the folder's own recordings; the histories of the earlier release that `python -m
bench.production_mix --upgrade-from COMMIT --record-fixtures` keeps there (`previous-*.json`) stay. See
docs/things-that-bite.md.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from bench.common import scratch_database
from examples.missions import app as missions
from orchestrator.app_loader import UserApp
from orchestrator.config import Settings
from orchestrator.core.limits import Limits
from orchestrator.engine.wiring import platform_components
from orchestrator.engine.worker import build_worker
from orchestrator.platform import Platform
from tests.timeouts import cancel_within

HERE = Path(__file__).resolve().parent / "histories"
# Which workflow types are kept, and how many runs of each at most (the lanes are what matters most).
KEEP = {"OrchestratorLane": 40, "orchestrator": 6, "responder": 6}


def fast(body: dict[str, Any]) -> dict[str, Any]:
    """The example's listener with short windows and delays, so the workload takes seconds."""
    body = json.loads(json.dumps(body))
    if "batch" in body and "window_seconds" in body["batch"]:
        # Over a second, so a lane sets a timer and its step waits out the last second itself.
        body["batch"]["window_seconds"] = min(body["batch"]["window_seconds"], 1.5)
    if "retry" in body:
        body["retry"]["delay_seconds"] = 1
    if body["name"] == "respond":
        body["concurrency"]["max_parallel"] = 2
    return body


async def workload(platform: Platform, temporal: Client) -> None:
    async def call(command: str, **args: Any) -> dict[str, Any]:
        reply = await platform.command({"command": command, **args})
        assert reply["status"] == "success", reply
        return reply

    sid = (await call("open_session", alias="replay"))["session"]["id"]
    for burst in range(8):
        for n in range(12):
            await call(
                "write_object", session_id=sid, alias=f"missions/m{n}/cells/c{burst}/meta", value={"type": "cell"}
            )
        await asyncio.sleep(0.3)
    for chat in range(6):
        item = {"type": "request", "role": "request", "message": f"hello {chat}"}
        await call("post_thread_item", session_id=sid, alias=f"chats/{chat}", item=item)
    await call("write_object", session_id=sid, alias="missions/bad/meta", value={"type": "mission", "fail": True})
    await asyncio.sleep(8)  # the failing run, its two repeats (1 s, then 2 s), the inbox
    await call("write_object", session_id=sid, alias="missions/bad/meta", value={"type": "mission"})
    await asyncio.sleep(4)  # lanes idle long enough to end
    await call("write_object", session_id=sid, alias="app/missions/sweep", value={"type": "sweep"})
    await asyncio.sleep(4)


async def record() -> None:
    settings = Settings(
        database_url=None,
        temporal_address=None,
        limits=Limits(activation_delay_seconds=0),
        lane_history_limit=12,
        lane_idle_exit_seconds=3,
        run_check_seconds=2,
    )
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(Path(sys.executable).parent / "temporal"),
        data_converter=pydantic_data_converter,
    )
    try:
        async with scratch_database() as url:
            settings = settings.model_copy(update={"search_attributes": False})
            platform = await Platform.connect(settings, url, temporal=env.client)
            app = UserApp(name="missions", workflows=missions.workflows, listeners=[])
            components = platform_components(platform, env.client, app)
            worker = build_worker(env.client, settings, app, components.workflows, components.activities)
            tasks = [
                asyncio.create_task(worker.run()),
                *(asyncio.create_task(t()) for t in components.background_tasks),
            ]
            try:
                for body in missions.listeners:
                    reply = await platform.command({"command": "save_listener", "listener": fast(body)})
                    assert reply["status"] == "success", reply
                await workload(platform, env.client)
            finally:
                await worker.shutdown()
                await cancel_within(tasks, "the recording's worker and router")
                await platform.close()
            await save(env.client)
    finally:
        await env.shutdown()


async def save(temporal: Client) -> None:
    # The earlier release's histories (`previous-*.json`, kept by `bench.production_mix --record-fixtures`) stay.
    HERE.mkdir(parents=True, exist_ok=True)
    for old in HERE.glob("*.json"):
        if not old.name.startswith("previous-"):
            old.unlink()
    kept: dict[str, int] = {}
    async for execution in temporal.list_workflows():
        kind = execution.workflow_type
        if kind not in KEEP or kept.get(kind, 0) >= KEEP[kind]:
            continue
        history = await temporal.get_workflow_handle(execution.id, run_id=execution.run_id).fetch_history()
        kept[kind] = kept.get(kind, 0) + 1
        name = f"{kind}-{kept[kind]:02d}.json"
        (HERE / name).write_text(history.to_json())
    print(f"recorded {kept} into {HERE}")  # noqa: T201 - the recorder's one line of output


if __name__ == "__main__":
    asyncio.run(record())
