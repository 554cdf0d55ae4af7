"""`orchestrator new NAME`: a starter app in a folder of its own, whose test passes as written.

Owns the starter's files: `app.py` (the `--app` module: one listener, the workflow and activity lists),
`workflows.py` (one workflow), `activities.py` (the one activity it calls), `test_app.py` (a test on the
`harness` fixture) and a README that says how to run, test and try it. The samples' own module names: the
platform installs its workflows and activities under `orchestrator.`, so an app's `workflows` and `activities` are
its own.
"""

from __future__ import annotations

import json
from pathlib import Path

APP = '''"""The app: the listeners it declares and the workflows its runs start (`orchestrator dev --app app.py`)."""

from activities import compose_reply
from workflows import Greeter

# Who owns what this app declares on the platform: the plan of another app never takes it, and another folder's
# `app.py` is another app.
app_name = __NAME__

workflows = [Greeter]
activities = [compose_reply]

listeners = [
    {
        "name": "greet",
        "description": "Answer each message a user posts on a chat thread.",
        "filter": {
            "types": ["thread.item_posted"],
            "aliases": ["chats/**"],
            "where": [{"path": "item.role", "op": "eq", "value": "user"}],
        },
        # One run at a time per thread; messages posted within a second are one batch.
        "concurrency": {"mode": "keyed", "key": "alias"},
        "batch": {"window_seconds": 1},
        "action": {"type": "workflow", "workflow": "greeter", "input": {}},
    }
]
'''

WORKFLOWS = '''"""The app's workflows. A run is woken by a batch that says where to look; it reads the current state and
writes what follows, through `RunSession` (its writes never wake its own listener)."""

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities import compose_reply
    from orchestrator.sdk import RunInput, RunSession


@workflow.defn(name="greeter")
class Greeter:
    @workflow.run
    async def run(self, run: RunInput) -> None:
        session = RunSession(run)
        for message in await session.batch_messages():
            thread = message["alias"]
            items = {item["id"]: item for item in await session.list_thread_items(thread)}
            said = items[message["item_id"]]["message"]
            text = await workflow.execute_activity(compose_reply, said, start_to_close_timeout=timedelta(seconds=30))
            # The reply's id names the message it answers: a retried run posts it once.
            reply = {"id": f"reply-{message['item_id']}", "type": "text", "role": "assistant"}
            await session.post_thread_item(thread, {**reply, "message": text})
'''

ACTIVITIES = '''"""The app's activities: where a run does its own I/O (a model, an API, a mail)."""

from temporalio import activity


@activity.defn
async def compose_reply(said: str) -> str:
    return f"Hello! You said: {said}"
'''

TEST = '''"""The app on the testing kit: `pytest` in this folder (the `harness` fixture runs `app`)."""


async def test_a_message_is_answered(harness) -> None:
    sid = (await harness.client.open_session())["session"]["id"]
    await harness.client.post_thread_item(sid, "chats/1", {"type": "text", "role": "user", "message": "hi"})
    await harness.settle()  # routed, batched, run and ended; the batch window skipped on Temporal's clock
    items = (await harness.client.list_thread_items(sid, "chats/1"))["items"]
    assert [(item["role"], item["message"]) for item in items] == [
        ("user", "hi"),
        ("assistant", "Hello! You said: hi"),
    ]
'''

README = """# {name}
Run it: `orchestrator dev --app app.py`. The listener `greet` (app.py) starts `greeter` (workflows.py, activities.py).
Test it with `pytest`: the `harness` fixture runs the app on Temporal's time-skipping server (test_app.py).
Both come with the `orchestrator` package (`pip install 'orchestrator[testing]'` for the kit), in one environment.

Try it while `orchestrator dev` runs, from another shell (`ses_...`: the id the first command answers):

```bash
orchestrator call '{{"command": "open_session", "alias": "demo"}}'
orchestrator call '{{"command": "post_thread_item", "session_id": "ses_...", "alias": "chats/1",
  "item": {{"type": "text", "role": "user", "message": "hi"}}}}'
orchestrator call '{{"command": "list_thread_items", "session_id": "ses_...", "alias": "chats/1"}}'
```

The last one answers your message and, a second later (the batch's window), the greeter's reply.
"""


class StarterExists(Exception):
    """The folder is there and not empty, or cannot be made: nothing is written (over it)."""


def write_starter(folder: Path) -> list[Path]:
    """Write the starter app into `folder` (made if missing); answers the files written."""
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise StarterExists(f"{folder} already exists and is not an empty folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:  # a parent that is a file, a place not writable: said in a line, nothing written
        raise StarterExists(f"{folder} cannot be made: {err.strerror or err}") from None
    files = {
        # A Python string literal whatever the folder's name holds (a quote, a backslash).
        "app.py": APP.replace("__NAME__", json.dumps(folder.resolve().name)),
        "workflows.py": WORKFLOWS,
        "activities.py": ACTIVITIES,
        "test_app.py": TEST,
        "README.md": README.format(name=folder.resolve().name),
        # What `orchestrator dev` keeps (its embedded servers' data) and Python's own leftovers stay out of git.
        ".gitignore": ".orchestrator/\n__pycache__/\n.pytest_cache/\n",
    }
    written = []
    for name, text in files.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
