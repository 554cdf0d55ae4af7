"""A platform's database dumped and restored into a new one by docs/operations.md's own commands (the wheel's
`pg_dump` and `pg_restore`): the platform on the copy serves the sessions, objects, items and events the dump held,
answers a retried write of before the backup from its idempotency key, and writes new events with ids past every
id the original drew, a write made after the backup among them (lost, and made again when retried with its key)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from orchestrator.config import Settings
from orchestrator.dev.embedded import EmbeddedPostgres
from orchestrator.platform import Platform
from tests.backups import back_up, restore


@pytest.fixture
async def restored_name(embedded_pg: EmbeddedPostgres) -> AsyncIterator[str]:
    name = f"restored_{uuid.uuid4().hex[:12]}"
    yield name
    admin = await asyncpg.connect(embedded_pg.url)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def ok(platform: Platform, body: dict[str, Any]) -> dict[str, Any]:
    reply = await platform.command(body)
    assert reply["status"] == "success", reply
    return reply


async def everything(platform: Platform, session_id: str) -> dict[str, Any]:
    """What the platform answers of a session: the session, its stream, an object, a thread's items."""
    return {
        "session": (await ok(platform, {"command": "get_session", "session_id": session_id}))["session"],
        "events": (await ok(platform, {"command": "list_session_events", "session_id": session_id, "limit": 1000}))[
            "events"
        ],
        "object": (await ok(platform, {"command": "read_object", "session_id": session_id, "alias": "docs/1"}))[
            "object"
        ],
        "items": (await ok(platform, {"command": "list_thread_items", "session_id": session_id, "alias": "chats/1"}))[
            "items"
        ],
    }


def write(session_id: str, alias: str, n: int, key: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"command": "write_object", "session_id": session_id, "alias": alias}
    body["value"] = {"type": "doc", "n": n}
    if key is not None:
        body["idempotency_key"] = key
    return body


async def test_the_platform_on_a_restored_copy_serves_what_was_dumped_and_writes_after_it(
    platform: Platform,
    fresh_db: str,
    settings: Settings,
    embedded_pg: EmbeddedPostgres,
    restored_name: str,
    tmp_path: Path,
) -> None:
    session_id = (await ok(platform, {"command": "open_session", "alias": "restore/me"}))["session"]["id"]
    before_key = await ok(platform, write(session_id, "docs/1", 1, key="before"))
    await ok(platform, write(session_id, "docs/1", 2))
    await ok(
        platform,
        {
            "command": "post_thread_item",
            "session_id": session_id,
            "alias": "chats/1",
            "item": {"type": "text", "role": "request", "message": "still there?"},
        },
    )
    dumped = await everything(platform, session_id)

    await back_up(fresh_db, tmp_path)
    # Acknowledged after the backup: not in the dump.
    lost = await ok(platform, write(session_id, "docs/1", 3, key="after"))
    original_last = (await ok(platform, {"command": "get_session", "session_id": session_id}))["session"][
        "last_event_id"
    ]

    restored_url = embedded_pg.url_for(restored_name)
    await restore(fresh_db, tmp_path, restored_name, restored_url)
    copy = await Platform.connect(settings, restored_url)
    try:
        assert await everything(copy, session_id) == dumped
        found = await ok(copy, {"command": "open_session", "alias": "restore/me"})
        assert found["session"]["id"] == session_id
        # A retry of a write from before the backup is answered from its key; one from after it is written again.
        again = await ok(copy, write(session_id, "docs/1", 1, key="before"))
        assert again["event_id"] == before_key["event_id"]
        retried = await ok(copy, write(session_id, "docs/1", 3, key="after"))
        assert retried["event_id"] > original_last >= lost["event_id"]
        assert retried["object"]["rev"] == 3
        later = await ok(copy, write(session_id, "docs/2", 4))
        assert later["event_id"] > retried["event_id"]
        events = (await ok(copy, {"command": "list_session_events", "session_id": session_id, "limit": 1000}))["events"]
        written_after = [retried["event_id"], later["event_id"]]
        assert [e["id"] for e in events] == [*(e["id"] for e in dumped["events"]), *written_after]
        # A reader that followed the original past the restored ids still gets what is written now.
        past = await ok(copy, {"command": "list_session_events", "session_id": session_id, "after": original_last})
        assert [e["id"] for e in past["events"]] == written_after
    finally:
        await copy.close()
