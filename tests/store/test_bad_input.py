"""Bad input to every command is answered with the right code, names the field, and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.platform import Platform
from orchestrator.store.postgres import PostgresStore
from tests.store.helpers import STATE_TABLES, ok

BIG = "x" * (256 * 1024 + 1)
S = "$SESSION"  # replaced by a real open session's id

CASES: list[tuple[str, dict[str, Any], str, str]] = [
    # (case, command, error code, field named in the message)
    ("not an object", {"command": "open_session", "alias": 5}, "invalid_request", "alias"),
    ("unknown command", {"command": "explode"}, "invalid_request", "command"),
    ("no command", {"session_id": S}, "invalid_request", "command"),
    ("extra field", {"command": "open_session", "colour": "red"}, "invalid_request", "colour"),
    ("bad session alias", {"command": "open_session", "alias": "a//b"}, "invalid_request", "alias"),
    ("close: missing id", {"command": "close_session"}, "invalid_request", "session_id"),
    ("close: wrong type", {"command": "close_session", "session_id": 12}, "invalid_request", "session_id"),
    ("close: unknown", {"command": "close_session", "session_id": "ses_none"}, "not_found", "session_id"),
    ("reopen: unknown", {"command": "reopen_session", "session_id": "ses_none"}, "not_found", "session_id"),
    (
        "write: missing value",
        {"command": "write_object", "session_id": S, "alias": "a"},
        "invalid_request",
        "value",
    ),
    (
        "write: value not object",
        {"command": "write_object", "session_id": S, "alias": "a", "value": [1]},
        "invalid_request",
        "value",
    ),
    (
        "write: value without type",
        {"command": "write_object", "session_id": S, "alias": "a", "value": {"x": 1}},
        "invalid_request",
        "value",
    ),
    (
        "write: alias with glob",
        {"command": "write_object", "session_id": S, "alias": "a/*", "value": {"type": "t"}},
        "invalid_request",
        "alias",
    ),
    (
        "write: alias slash",
        {"command": "write_object", "session_id": S, "alias": "/a", "value": {"type": "t"}},
        "invalid_request",
        "alias",
    ),
    (
        "write: alias with a '..' segment",
        {"command": "write_object", "session_id": S, "alias": "a/../b", "value": {"type": "t"}},
        "invalid_request",
        "alias",
    ),
    (
        "post: alias with a '.' segment",
        {"command": "post_thread_item", "session_id": S, "alias": "./chat", "item": {"type": "text"}},
        "invalid_request",
        "alias",
    ),
    (
        "list objects: prefix with a control character",
        {"command": "list_objects", "session_id": S, "prefix": "a\x00"},
        "invalid_request",
        "prefix",
    ),
    (
        "write: alias empty",
        {"command": "write_object", "session_id": S, "alias": "", "value": {"type": "t"}},
        "invalid_request",
        "alias",
    ),
    (
        "write: if_rev string",
        {"command": "write_object", "session_id": S, "alias": "a", "value": {"type": "t"}, "if_rev": "1"},
        "invalid_request",
        "if_rev",
    ),
    (
        "write: if_rev negative",
        {"command": "write_object", "session_id": S, "alias": "a", "value": {"type": "t"}, "if_rev": -1},
        "invalid_request",
        "if_rev",
    ),
    (
        "write: oversize",
        {"command": "write_object", "session_id": S, "alias": "a", "value": {"type": "t", "blob": BIG}},
        "limit_exceeded",
        "value",
    ),
    (
        "write: unknown session",
        {"command": "write_object", "session_id": "ses_none", "alias": "a", "value": {"type": "t"}},
        "not_found",
        "session_id",
    ),
    ("read: missing alias", {"command": "read_object", "session_id": S}, "invalid_request", "alias"),
    (
        "read: absent",
        {"command": "read_object", "session_id": S, "alias": "nothing/here"},
        "not_found",
        "alias",
    ),
    (
        "delete: absent",
        {"command": "delete_object", "session_id": S, "alias": "nothing"},
        "not_found",
        "alias",
    ),
    (
        "list objects: prefix type",
        {"command": "list_objects", "session_id": S, "prefix": 3},
        "invalid_request",
        "prefix",
    ),
    (
        "post: missing item",
        {"command": "post_thread_item", "session_id": S, "alias": "chats/1"},
        "invalid_request",
        "item",
    ),
    (
        "post: item without type",
        {"command": "post_thread_item", "session_id": S, "alias": "chats/1", "item": {"message": "hi"}},
        "invalid_request",
        "item.type",
    ),
    (
        "post: item extra",
        {
            "command": "post_thread_item",
            "session_id": S,
            "alias": "chats/1",
            "item": {"type": "text", "mood": "x"},
        },
        "invalid_request",
        "item.mood",
    ),
    (
        "post: oversize message",
        {
            "command": "post_thread_item",
            "session_id": S,
            "alias": "chats/1",
            "item": {"type": "text", "message": BIG},
        },
        "limit_exceeded",
        "item.message",
    ),
    (
        "post: unknown session",
        {"command": "post_thread_item", "session_id": "ses_none", "alias": "c", "item": {"type": "text"}},
        "not_found",
        "session_id",
    ),
    (
        "items: limit too big",
        {"command": "list_thread_items", "session_id": S, "alias": "c", "limit": 5000},
        "invalid_request",
        "limit",
    ),
    (
        "events: limit zero",
        {"command": "list_session_events", "session_id": S, "limit": 0},
        "invalid_request",
        "limit",
    ),
    (
        "events: limit over 1000",
        {"command": "list_session_events", "session_id": S, "limit": 1001},
        "invalid_request",
        "limit",
    ),
    (
        "events: after string",
        {"command": "list_session_events", "session_id": S, "after": "5"},
        "invalid_request",
        "after",
    ),
    (
        "events: bad type glob",
        {"command": "list_session_events", "session_id": S, "types": ["a..b"]},
        "invalid_request",
        "types",
    ),
    ("save: missing body", {"command": "save_listener"}, "invalid_request", "listener"),
    ("save: body not object", {"command": "save_listener", "listener": "x"}, "invalid_request", "listener"),
    (
        "save: bad name",
        {
            "command": "save_listener",
            "listener": {"name": "Bad Name", "filter": {}, "action": {"type": "workflow", "workflow": "w"}},
        },
        "invalid_request",
        "listener.name",
    ),
    (
        "save: bad glob",
        {
            "command": "save_listener",
            "listener": {
                "name": "l",
                "filter": {"aliases": ["a//b"]},
                "action": {"type": "workflow", "workflow": "w"},
            },
        },
        "invalid_request",
        "listener.filter.aliases",
    ),
    (
        "save: window too long",
        {
            "command": "save_listener",
            "listener": {
                "name": "l",
                "filter": {},
                "batch": {"window_seconds": 301},
                "action": {"type": "workflow", "workflow": "w"},
            },
        },
        "invalid_request",
        "listener.batch.window_seconds",
    ),
    (
        "save: keyed without key",
        {
            "command": "save_listener",
            "listener": {
                "name": "l",
                "filter": {},
                "concurrency": {"mode": "keyed"},
                "action": {"type": "workflow", "workflow": "w"},
            },
        },
        "invalid_request",
        "listener.concurrency",
    ),
    ("get: unknown", {"command": "get_listener", "name": "nobody"}, "not_found", "name"),
    (
        "switch: enabled string",
        {"command": "switch_listener", "session_id": S, "name": "x", "enabled": "yes"},
        "invalid_request",
        "enabled",
    ),
    (
        "switch: unknown listener",
        {"command": "switch_listener", "session_id": S, "name": "x", "enabled": False},
        "not_found",
        "name",
    ),
]


async def _snapshot(store: PostgresStore) -> dict[str, int]:
    return {t: int(await store.pool.fetchval(f"SELECT count(*) FROM orchestrator.{t}")) for t in STATE_TABLES}


@pytest.mark.parametrize(("case", "body", "code", "field"), CASES, ids=[c[0] for c in CASES])
async def test_bad_input_is_refused_with_no_change(
    platform: Platform, case: str, body: dict[str, Any], code: str, field: str
) -> None:
    store = platform.store
    assert isinstance(store, PostgresStore)
    sid = (await ok(platform, "open_session"))["session"]["id"]
    await ok(platform, "write_object", session_id=sid, alias="a", value={"type": "t"})
    body = {k: (sid if v == S else v) for k, v in body.items()}
    before = await _snapshot(store)
    reply = await platform.command(body)
    assert reply["status"] == "error", reply
    assert reply["error"] == code, reply
    assert field in reply["message"], reply
    assert await _snapshot(store) == before


async def test_a_body_that_is_not_an_object_is_refused(platform: Platform) -> None:
    for body in [None, [], "open_session", 3]:
        reply = await platform.command(body)
        assert reply == {"status": "error", "error": "invalid_request", "message": reply["message"]}
        assert "body" in reply["message"]
