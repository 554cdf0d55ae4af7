"""Globs are matched in time linear in the name they are matched against: Python's backtracking engine took time
polynomial in it, of a degree the glob's `**` set, `**/a/**/a/**/a/**/a/**/a/**/a/**/b` holding the API's event
loop, `/healthz` included, for 11 s against a 50-segment alias and for hours against the longest; a `read:` key's
`simulate_listener` was enough. Driven through the HTTP door with keys: the simulation and the keys' reach are
matched in Python, the sessions a key lists in PostgreSQL (whose engine was linear already)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.access.conftest import Api

# The longest alias (256 characters allow 128 one-letter segments), and globs made to backtrack over it: the
# first matches, the second fails only at its last segment, after every way of placing its six `**`.
DEEPEST = "/".join(["a"] * 128)
MATCHES = "**/a/**/a/**/a/**/a/**/a/**/a/**/a"
FAILS_LAST = "**/a/**/a/**/a/**/a/**/a/**/a/**/b"

# Before: hours; pytest-timeout's signal stops Python's engine mid-match, so a test failed here.
pytestmark = pytest.mark.timeout(90)


async def _as(api: Api, secret: str, command: str, **args: Any) -> dict[str, Any]:
    response = await api.post({"command": command, **args}, secret)
    reply: dict[str, Any] = response.json()
    return reply


async def test_a_read_keys_simulation_with_a_glob_made_to_backtrack_answers(api: Api) -> None:
    session = (await api.admin.command({"command": "open_session"}))["session"]["id"]
    written = {"command": "write_object", "session_id": session, "alias": DEEPEST, "value": {"type": "t"}}
    await api.admin.command(written)
    reader = await api.key("reader", ["read:**"])
    for glob, batches in ((FAILS_LAST, 0), (MATCHES, 1)):
        listener = {
            "name": "deep",
            "filter": {"types": ["object.written"], "aliases": [glob]},
            "action": {"type": "object", "alias": "views/deep", "value": {"type": "view"}},
        }
        reply = await _as(api, reader, "simulate_listener", session_id=session, listener=listener)
        assert reply["status"] == "success", reply
        assert len(reply["batches"]) == batches, (glob, reply)
        assert reply["unmatched"] == ({"filter": 1} if batches == 0 else {}), (glob, reply)


async def test_a_keys_reach_by_a_glob_made_to_backtrack_answers(api: Api) -> None:
    """A key's session globs judge a read in Python and a listing in PostgreSQL; its alias glob judges a write."""
    session = (await api.admin.command({"command": "open_session", "alias": DEEPEST}))["session"]["id"]
    for glob, reaches in ((FAILS_LAST, False), (MATCHES, True)):
        name = "reaches" if reaches else "misses"
        reader = await api.key(f"{name}-reader", [f"read:{glob}"])
        listed = await _as(api, reader, "list_sessions")
        assert [s["id"] for s in listed["sessions"]] == ([session] if reaches else []), glob
        read = await _as(api, reader, "list_objects", session_id=session)
        assert read["status"] == ("success" if reaches else "error"), read
        writer = await api.key(f"{name}-writer", [f"write:**:{glob}"])
        written = await _as(api, writer, "write_object", session_id=session, alias=DEEPEST, value={"type": "t"})
        assert written["status"] == ("success" if reaches else "error"), written
