"""docs/waits.md's examples, run: its waiting workflow on a worker with its listener saved through the HTTP door
(a reply is heard, a closing is heard), and every listener body saved through the door and tried on events it is
about. Every block of the page is one of these or a marked fragment."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from orchestrator.client import Client
from orchestrator.platform import Platform
from tests.docs.doc_examples import Example, examples_of, page_workflows, read_page
from tests.engine.harness import eventually, running_engine

PAGE = "waits.md"


def test_every_block_of_the_page_is_an_example_run_here() -> None:
    examples, problems = read_page(PAGE)
    assert not problems, "\n".join(problems)
    assert Counter(e.kind for e in examples) == {"listener": 2, "python": 1}


@pytest.mark.parametrize("example", examples_of(PAGE, "listener"), ids=lambda e: e.id)
async def test_a_listener_body_saves_and_takes_its_events(door: Client, session_id: str, example: Example) -> None:
    body = example.block.value()
    saved = await door.command({"command": "save_listener", "listener": body})
    assert saved["status"] == "success", saved
    if body["name"] == "render":
        await door.write_object(session_id, "docs/1", {"type": "doc"})
    else:
        await door.post_thread_item(session_id, "chats/1", {"type": "text", "role": "request", "message": "hi"})
    tried = await door.command({"command": "simulate_listener", "session_id": session_id, "listener": body})
    assert tried["status"] == "success" and tried["batches"], tried


@pytest.mark.timeout(90)
async def test_the_waiting_workflow_hears_a_reply_and_a_closing(
    door: Client,
    platform: Platform,
    session_id: str,
    temporal_env: WorkflowEnvironment,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    workflows, body = page_workflows(PAGE, tmp_path, monkeypatch.syspath_prepend)
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping}
    )
    async with running_engine(platform, temporal_env.client, workflows=workflows):
        saved = await door.command({"command": "save_listener", "listener": body})
        assert saved["status"] == "success", saved
        for chat in ("chats/1", "chats/2"):
            await door.post_thread_item(session_id, chat, {"type": "text", "role": "request", "message": "help"})
        await door.post_thread_item(session_id, "chats/1", {"type": "text", "role": "user", "message": "it broke"})
        await door.write_object(session_id, "chats/2/closed", {"type": "closed"})

        async def said(chat: str) -> list[str]:
            items = (await door.list_thread_items(session_id, chat))["items"]
            return [i["message"] for i in items if i["role"] == "assistant"]

        async def both() -> bool:
            return bool(await said("chats/1")) and bool(await said("chats/2"))

        await eventually(both, within=60, what="both chats' runs to say what they heard")
    assert await said("chats/1") == ["heard 1 replies"]
    assert await said("chats/2") == ["the chat was closed"]
