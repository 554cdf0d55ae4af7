"""docs/commands.md's examples, one under each command, sent through `POST /v1/commands` as the page says.

Each runs on a platform of its own, staged as the page's introduction describes (`stage`): a session whose
stream begins with the object `tickets/42/meta` written (event 1) and a request posted on `chats/7` (event 2),
`ticket.escalated` declared, the listener `respond` saved, the application's `tickets` table holding ticket
42. The commands that need Temporal run beside a worker whose `responder` holds `respond`'s run of event 2,
with the schedule `ops/clock` in place. The door is an operator's (the bootstrap token), so the key an example
creates does not close the API on the examples after it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from pydantic import SecretStr
from temporalio.testing import WorkflowEnvironment

from examples.desk.tables import TABLE
from orchestrator.client import Client
from orchestrator.commands import COMMANDS
from orchestrator.config import Settings
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform
from tests.docs.doc_examples import Example, examples_of, read_page
from tests.docs.responder import Responder
from tests.engine.harness import eventually, running_engine

PAGE = "commands.md"
TOKEN = "the-operators-token"
SESSION = "ses_..."
# The commands whose examples need Temporal: a worker, a run in flight, a schedule.
NEEDS_TEMPORAL = {"start_execution", "stop_execution", "replay_batch", "create_schedule", "update_schedule",
                  "get_schedule", "list_schedules", "delete_schedule", "list_schedule_runs"}  # fmt: skip
CAPTURE = {"command": "capture_table", "table": "tickets", "type_prefix": "ticket", "session_column": "session_id"}
# What another command makes first, for the examples that act on it.
FIRST: dict[str, list[dict[str, Any]]] = {
    "reopen_session": [{"command": "close_session", "session_id": SESSION}],
    "resume_listener": [{"command": "pause_listener", "name": "respond", "session_id": SESSION}],
    "uncapture_table": [CAPTURE],
    "revoke_api_key": [{"command": "create_api_key", "name": "ci", "scopes": ["read:**"]}],
}
ESCALATED = {"type": "object", "properties": {"priority": {"type": "integer"}}, "required": ["priority"]}
CLOCK = {"command": "create_schedule", "session_id": SESSION, "alias": "ops/clock",
         "repeat": {"type": "interval", "every_seconds": 900}, "invocation_target_type": "object",
         "target": {"alias": "ops/clock", "value": {"type": "tick"}}}  # fmt: skip


def _example(name: str) -> Example:
    (found,) = [example for example in examples_of(PAGE, "command") if example.name == name]
    return found


def _with_session(body: dict[str, Any], session_id: str) -> dict[str, Any]:
    return {key: session_id if value == SESSION else value for key, value in body.items()}


@pytest.fixture
async def operator(platform: Platform, settings: Settings) -> AsyncIterator[Client]:
    """A client of the HTTP door with the bootstrap token."""
    closed = settings.model_copy(update={"api_token": SecretStr(TOKEN)})
    async with serve_api(create_app(platform, closed), "127.0.0.1", 0) as url:
        client = Client.http(url, token=TOKEN)
        yield client
        await client.aclose()


async def stage(door: Client, app_conn: asyncpg.Connection) -> str:
    """The world the page's introduction describes; answers the session's id."""
    session_id = str((await door.open_session(alias="support"))["session"]["id"])
    await door.save_event_type("ticket.escalated", ESCALATED)
    respond = _example("simulate_listener").block.value()["listener"]
    await door.save_listener(respond)
    written = await door.write_object(session_id, "tickets/42/meta", {"type": "ticket", "state": "open"})
    posted = await door.post_thread_item(session_id, "chats/7", {"type": "text", "role": "request", "message": "Hi"})
    assert (written["event_id"], posted["event_id"]) == (1, 2), "the page says the stream begins with events 1, 2"
    await app_conn.execute(TABLE)
    await app_conn.execute("INSERT INTO tickets (id, session_id, title) VALUES (42, $1, 'printer jammed')", session_id)
    return session_id


@pytest.fixture
async def staged(operator: Client, app_conn: asyncpg.Connection) -> str:
    return await stage(operator, app_conn)


@pytest.fixture
async def staged_with_temporal(
    operator: Client, app_conn: asyncpg.Connection, platform: Platform, time_skipping_env: WorkflowEnvironment
) -> AsyncIterator[str]:
    platform.settings = platform.settings.model_copy(update={"search_attributes": False})
    async with running_engine(platform, time_skipping_env.client, workflows=[Responder]):
        session_id = await stage(operator, app_conn)
        run = f"exe:{session_id}:respond:chats/7:2.0"

        async def in_flight() -> bool:
            executions = (await operator.list_executions(session_id, listener="respond"))["executions"]
            return [(e["id"], e["status"]) for e in executions] == [(run, "running")]

        await eventually(in_flight, what=f"respond's run {run}")
        await operator.command(_with_session(CLOCK, session_id))
        yield session_id


async def run_example(operator: Client, session_id: str, example: Example) -> None:
    for step in FIRST.get(example.name, []):
        done = await operator.command(_with_session(step, session_id))
        assert done["status"] == "success", (step, done)
    reply = await operator.command(example.block.value(session_id))
    assert reply["status"] == "success", f"{example.block.where}: {example.name} answered {reply}"


def test_every_command_has_one_example_and_every_block_is_one() -> None:
    examples, problems = read_page(PAGE)
    assert not problems, "\n".join(problems)
    assert all(example.kind == "command" and example.reply is None for example in examples)
    assert sorted(example.name for example in examples) == sorted(COMMANDS), "a command without an example"
    assert set(COMMANDS) > NEEDS_TEMPORAL | set(FIRST)


@pytest.mark.parametrize(
    "example", [e for e in examples_of(PAGE, "command") if e.name not in NEEDS_TEMPORAL], ids=lambda e: e.id
)
async def test_a_commands_example_succeeds_through_the_door(operator: Client, staged: str, example: Example) -> None:
    await run_example(operator, staged, example)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "example", [e for e in examples_of(PAGE, "command") if e.name in NEEDS_TEMPORAL], ids=lambda e: e.id
)
async def test_a_commands_example_that_needs_temporal_succeeds_through_the_door(
    operator: Client, staged_with_temporal: str, example: Example
) -> None:
    await run_example(operator, staged_with_temporal, example)
