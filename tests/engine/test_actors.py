"""Every event records who did it (`actor`): the key of an outside request (a created key, the bootstrap token,
an open API's caller, the platform's own door), the listener and run of a run's writes and of the engine's
writes for a listener (its action, receipt, run start and end); listings and `explain_event` show it, and a
listener's `where` may test it. The schedule of a firing, a lane's idle timer and a failed run's
`listener.failed` are checked where those are made (tests/schedules/test_run_timers.py,
tests/engine/test_idle_timers.py, tests/engine/test_retries.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from temporalio import workflow
from temporalio.testing import WorkflowEnvironment

from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform
from tests.engine.harness import Engine, eventually, recorder_listener, running_engine

with workflow.unsafe.imports_passed_through():
    from orchestrator.sdk import RunInput, RunSession

TOKEN = "bootstrap-of-the-actors"


@workflow.defn(name="actor_writer")
class ActorWriter:
    """Writes one object for the batch that woke it."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        await RunSession(run).write_object("out/by-run", {"type": "summary", "count": run.batch.count})


@pytest.fixture
async def engine(platform: Platform, temporal_env: WorkflowEnvironment) -> AsyncIterator[Engine]:
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping}
    )
    async with running_engine(platform, temporal_env.client, workflows=[ActorWriter]) as running:
        yield running


async def events(engine: Engine, sid: str) -> list[dict[str, Any]]:
    return list((await engine.command("list_session_events", session_id=sid, limit=1000))["events"])


async def test_each_kind_of_event_records_its_actor(engine: Engine) -> None:
    runner = recorder_listener(
        "runner",
        filter={"types": ["object.written"], "aliases": ["missions/**"]},
        batch={"window_seconds": 0.2},
        action={"type": "workflow", "workflow": "actor_writer"},
        receipt={"alias": "ops/receipts"},
    )
    copier = recorder_listener(
        "copier",
        filter={"types": ["object.written"], "aliases": ["missions/**"]},
        batch={"window_seconds": 0.2},
        action={"type": "object", "alias": "views/copy", "value": {"type": "copy"}},
    )
    await engine.command("save_listener", listener=runner)
    await engine.command("save_listener", listener=copier)
    guarded = engine.platform.settings.model_copy(update={"api_token": SecretStr(TOKEN)})
    async with serve_api(create_app(engine.platform, guarded), "127.0.0.1", 0) as url:
        secret = (await engine.command("create_api_key", name="mission-control", scopes=["write:**", "read:**"]))[
            "key"
        ]["secret"]
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {secret}"}) as http:
            sid = (await http.post("/v1/commands", json={"command": "open_session", "alias": "m"})).json()["session"][
                "id"
            ]
            by_key = (
                await http.post(
                    "/v1/commands",
                    json={"command": "write_object", "session_id": sid, "alias": "missions/1", "value": {"type": "m"}},
                )
            ).json()["event_id"]
            started = (
                await http.post(
                    "/v1/commands", json={"command": "start_execution", "session_id": sid, "workflow": "recorder"}
                )
            ).json()["execution"]["id"]
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=url, headers=headers) as http:
            body = {"command": "write_object", "session_id": sid, "alias": "notes/boot", "value": {"type": "n"}}
            by_bootstrap = (await http.post("/v1/commands", json=body)).json()["event_id"]
    by_local = (await engine.command("write_object", session_id=sid, alias="notes/local", value={"type": "n"}))[
        "event_id"
    ]

    async def settled() -> bool:
        found = await events(engine, sid)
        ended = [e for e in found if e["type"] == "execution.ended"]
        return (
            any(e.get("alias") == "out/by-run" for e in found)
            and len(ended) >= 2
            and any(e.get("alias") == "views/copy" for e in found)
        )

    await eventually(settled, what="the run's write, the action's write and both runs' ends")
    found = {e["id"]: e for e in await events(engine, sid)}
    assert found[by_key]["actor"] == {"key": "mission-control"}
    assert found[by_bootstrap]["actor"] == {"key": "bootstrap"}
    assert found[by_local]["actor"] == {"key": "local"}
    [run_write] = [e for e in found.values() if e.get("alias") == "out/by-run"]
    execution = run_write["source"]["execution"]
    assert run_write["actor"] == {"listener": "runner", "execution": execution}
    [action_write] = [e for e in found.values() if e.get("alias") == "views/copy"]
    assert action_write["actor"] == {"listener": "copier"}
    receipts = [e for e in found.values() if e.get("alias") == "ops/receipts"]
    assert receipts and all(e["actor"] == {"listener": "runner"} for e in receipts)
    for kind in ("execution.started", "execution.ended"):
        by_run = [e for e in found.values() if e["type"] == kind and e["execution"]["id"] == execution]
        assert [e["actor"] for e in by_run] == [{"listener": "runner", "execution": execution}], kind
    [outside_start] = [
        e for e in found.values() if e["type"] == "execution.started" and e["execution"]["id"] == started
    ]
    assert outside_start["actor"] == {"key": "mission-control"}, "a run started from outside: the key started it"

    # explain_event shows it, for the event and along its causes.
    explained = await engine.command("explain_event", session_id=sid, event_id=run_write["id"])
    assert explained["event"]["actor"] == run_write["actor"]
    assert {
        "event": {"id": by_key, "type": "object.written", "alias": "missions/1", "actor": {"key": "mission-control"}}
    } in explained["caused_by"]
    runs = (await engine.command("list_executions", session_id=sid, listener="runner"))["executions"]
    assert runs[0]["actor"] == {"listener": "runner", "execution": execution}


async def test_a_listener_may_select_events_by_their_actor(engine: Engine) -> None:
    only_the_widget = recorder_listener(
        "widget_only",
        filter={
            "types": ["object.written"],
            "where": [{"path": "actor.key", "op": "eq", "value": "widget"}],
        },
        batch={"window_seconds": 0.2},
    )
    await engine.command("save_listener", listener=only_the_widget)
    async with serve_api(create_app(engine.platform, engine.platform.settings), "127.0.0.1", 0) as url:
        widget = (await engine.command("create_api_key", name="widget", scopes=["write:**"]))["key"]["secret"]
        other = (await engine.command("create_api_key", name="backoffice", scopes=["write:**"]))["key"]["secret"]
        sid = (await engine.command("open_session", alias="w"))["session"]["id"]
        ids = {}
        for name, secret in (("backoffice", other), ("widget", widget)):
            async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {secret}"}) as http:
                body = {"command": "write_object", "session_id": sid, "alias": f"w/{name}", "value": {"type": "t"}}
                ids[name] = (await http.post("/v1/commands", json=body)).json()["event_id"]

    async def ran() -> bool:
        return bool(engine.log.event_ids("widget_only"))

    await eventually(ran, what="the widget's write reaching its listener")
    assert engine.log.event_ids("widget_only") == [ids["widget"]]
    explained = await engine.command("explain_event", session_id=sid, event_id=ids["backoffice"])
    [decision] = [d for d in explained["listeners"] if d["listener"] == "widget_only"]
    assert decision["matched"] is False and decision["reason"] == "filter"
    refused = await engine.platform.command(
        {
            "command": "save_listener",
            "listener": {**only_the_widget, "filter": {"where": [{"path": "actor.nickname", "op": "exists"}]}},
        }
    )
    assert refused["error"] == "invalid_request" and "actor" in refused["message"], refused
