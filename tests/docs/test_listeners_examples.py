"""docs/listeners.md's examples, run through the HTTP door as the page says (`tests/docs/doc_examples.py`).

Each listener body is saved (`save_listener`) and tried (`simulate_listener`) on a session holding a few events
it is about, its scene below, and must take at least one of them into a batch; a body whose action writes (a
thread item, an object) also runs on the engine, where its templates must render into writes that succeed. Each
command answers what the reply block after it shows, exactly, or success when none follows. A body with no
scene fails: give it one.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from orchestrator.client import Client
from orchestrator.platform import Platform
from orchestrator.testing import busy
from tests.docs.doc_examples import Example, examples_of, page_workflows, read_page
from tests.engine.harness import eventually, running_engine

PAGE = "listeners.md"


def write(alias: str, client: str | None = None) -> dict[str, Any]:
    step: dict[str, Any] = {"command": "write_object", "alias": alias, "value": {"type": "example"}}
    return step if client is None else {**step, "client": client}


def delete(alias: str) -> dict[str, Any]:
    return {"command": "delete_object", "alias": alias}


def post(alias: str, role: str, message: str) -> dict[str, Any]:
    return {"command": "post_thread_item", "alias": alias, "item": {"type": "text", "role": role, "message": message}}


def platform_event(type_: str, **fields: Any) -> dict[str, Any]:
    """An event only the platform writes (a run's end, a listener giving up): appended to the stream as the
    engine appends it, since no command writes one."""
    return {"platform_event": type_, **fields}


FAILED_RUN = {"id": "exe:ses:respond:chats/7:2.3", "workflow": "responder", "status": "failed",
              "error": {"type": "ApplicationError", "message": "no answer"}}  # fmt: skip
GAVE_UP = {"listener": "respond", "lane": "chats/7", "first_id": 2, "last_id": 3, "event_ids": [2, 3], "retry": 3,
           "execution_id": FAILED_RUN["id"], "error": FAILED_RUN["error"]}  # fmt: skip

# The events each listener body of the page is about, by the body's name.
SCENES: dict[str, list[dict[str, Any]]] = {
    "respond": [post("chats/7", "request", "Is it open?"), post("chats/7", "request", "Hello?")],
    "ticket_changes": [write("tickets/42/meta", client="web"), delete("tickets/42/meta")],
    "refund_requests": [
        post("chats/7", "user", "I would like a refund, please."),
        post("chats/7", "user", "/refund 42"),
        post("chats/8", "user", "Thanks!"),
    ],
    "mission_runner": [write("missions/7/meta"), write("missions/7/cells/3/meta"), write("missions/8/meta")],
    "thumbnails": [write("uploads/cat.png"), write("uploads/dog.png")],
    "cell_digest": [
        write("missions/7/cells/3/meta"),
        write("missions/7/cells/4/meta"),
        write("missions/7/cells/3/meta"),
    ],
    "inbox": [platform_event("execution.ended", execution=FAILED_RUN, source={"listener": "respond"}, depth=1)],
    "mission_views": [write("missions/7/cells/3/meta"), write("missions/8/cells/1/meta")],
    "inbound": [post("channels/email/7", "user", "Thanks, that works.")],
    "respond_failures": [platform_event("listener.failed", data=GAVE_UP, source={"listener": "respond"}, depth=1)],
    "ticket_status": [write("tickets/42/meta"), write("tickets/43/meta"), delete("tickets/42/meta")],
    "render": [write("docs/1"), delete("docs/1")],
    "summarize": [post("chats/7", "user", "Hi"), post("chats/7", "user", "Anyone?"), post("chats/8", "user", "Hey")],
}


async def play(door: Client, platform: Platform, session_id: str, scene: list[dict[str, Any]]) -> None:
    for step in scene:
        if "platform_event" in step:
            fields = {k: v for k, v in step.items() if k != "platform_event"}
            await platform.store.append_event(session_id, step["platform_event"], **fields)
            continue
        reply = await door.command({**step, "session_id": session_id})
        assert reply["status"] == "success", (step, reply)


def test_every_block_of_the_page_is_an_example_run_here_or_a_marked_fragment() -> None:
    examples, problems = read_page(PAGE)
    assert not problems, "\n".join(problems)
    kinds = Counter(example.kind for example in examples)
    assert set(kinds) <= {"listener", "command", "python"} and kinds["python"] == 1, kinds
    assert kinds["listener"] >= 10 and kinds["command"] >= 4, f"the page lost examples: {kinds}"


@pytest.mark.parametrize("example", examples_of(PAGE, "listener"), ids=lambda e: e.id)
async def test_a_listener_body_saves_and_takes_the_events_it_is_about(
    door: Client, platform: Platform, session_id: str, example: Example
) -> None:
    assert example.name in SCENES, f"{example.block.where}: {example.name!r} has no scene of events to try it on"
    body = example.block.value(session_id)
    await play(door, platform, session_id, SCENES[example.name])
    saved = await door.command({"command": "save_listener", "listener": body})
    assert saved["status"] == "success", f"docs/{PAGE}: save_listener answered {saved}"
    assert saved["listener"]["name"] == example.name
    tried = await door.command({"command": "simulate_listener", "session_id": session_id, "listener": body})
    assert tried["status"] == "success", f"{example.block.where}: simulate_listener answered {tried}"
    assert tried["matched"] > 0 and tried["batches"], f"{example.block.where}: took none of its scene's events: {tried}"


@pytest.mark.parametrize("example", examples_of(PAGE, "command"), ids=lambda e: e.id)
async def test_a_command_answers_what_the_page_shows(door: Client, session_id: str, example: Example) -> None:
    reply = await door.command(example.block.value(session_id))
    if example.reply is None:
        assert reply["status"] == "success", f"{example.block.where}: answered {reply}"
    else:
        assert reply == example.reply.value(session_id), f"{example.block.where}: answered {reply}"


@pytest.mark.timeout(60)
async def test_the_programming_models_workflow_runs_with_its_listener(
    door: Client,
    platform: Platform,
    session_id: str,
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The page's workflow, as a module of its own, on a worker with the platform's parts: its listener (the
    body of its name) is saved through the door, and tickets' writes become their views."""
    workflows, body = page_workflows(PAGE, tmp_path, monkeypatch.syspath_prepend)
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping}
    )
    async with running_engine(platform, temporal_env.client, workflows=workflows):
        saved = await door.command({"command": "save_listener", "listener": body})
        assert saved["status"] == "success", f"docs/{PAGE}: save_listener answered {saved}"
        await door.write_object(session_id, "tickets/42/meta", {"type": "ticket", "state": "open"})
        await door.write_object(session_id, "tickets/43/meta", {"type": "ticket"})

        async def viewed() -> bool:
            views = (await door.list_objects(session_id, prefix="views/tickets/"))["objects"]
            return len(views) == 2

        await eventually(viewed, what=f"docs/{PAGE}: the views its workflow writes")
    views = {o["alias"]: o["value"] for o in (await door.list_objects(session_id, prefix="views/tickets/"))["objects"]}
    assert views == {
        "views/tickets/42": {"type": "ticket_status", "state": "open"},
        "views/tickets/43": {"type": "ticket_status", "state": "new"},
    }


async def settle(platform: Platform, env: WorkflowEnvironment, within: float = 30.0) -> None:
    """Until every lane is quiet, moving Temporal's clock on while lanes wait on their windows."""
    pool = platform.store.pool
    deadline, quiet = time.monotonic() + within, 0
    while quiet < 3:
        going = await busy(pool)
        quiet = 0 if going else quiet + 1
        assert time.monotonic() < deadline, f"the lanes did not settle: {going}"
        if going.get("lanes_waiting"):
            await env.sleep(5)
        else:
            await asyncio.sleep(0.05)


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    "example",
    [e for e in examples_of(PAGE, "listener") if e.block.value()["action"]["type"] != "workflow"],
    ids=lambda e: e.id,
)
async def test_a_write_actions_templates_render_into_writes_that_succeed(
    door: Client, platform: Platform, session_id: str, time_skipping_env: WorkflowEnvironment, example: Example
) -> None:
    platform.settings = platform.settings.model_copy(update={"search_attributes": False})
    async with running_engine(platform, time_skipping_env.client):
        saved = await door.command({"command": "save_listener", "listener": example.block.value(session_id)})
        assert saved["status"] == "success", f"docs/{PAGE}: save_listener answered {saved}"
        await play(door, platform, session_id, SCENES[example.name])
        await settle(platform, time_skipping_env)
    (state,) = [s for s in (await door.list_session_listeners(session_id))["listeners"] if s["name"] == example.name]
    outcomes = [(o["status"], o.get("message")) for o in state["recent_outcomes"]]
    assert outcomes and all(status == "success" for status, _ in outcomes), f"{example.block.where}: {outcomes}"
