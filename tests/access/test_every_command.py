"""Every command under a key with generated scopes, through the HTTP door: it runs when the scopes allow it, and
otherwise answers `access_denied` (or `not_found`, for a session the key cannot see) and changes nothing:
not the stream, objects, threads, listeners, event types, schedules, keys or sessions.

The expected verdict comes from the target as this test sees it (the session's alias, the aliases a body
writes, the types it emits and their `allow`) given to the core's decision, whose own properties are
tests/core/test_access.py's; here the point is that every door's command is held to it.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.commands.registry import COMMANDS
from orchestrator.core.access import NEEDS, SESSION_NEEDS, Target, decide, need_of
from orchestrator.core.scopes import Grant
from tests.access.conftest import Api
from tests.store.helpers import STATE_TABLES
from tests.test_hostile_input import LISTENER, SESSION, VALID

# Sessions each example opens one of (under a new alias below this one; None: no alias).
SESSION_BASES = ["t1/a", "t1/b", "t2/a", None]
SESSION_GLOBS = ["**", "t1/**", "t2/**", "t1/a/*", "t*/b/*"]
ALIASES = ["a/b", "x/1", "y/2/3"]
ALIAS_GLOBS = ["**", "x/**", "a/*"]
TYPE_GLOBS = ["**", "app.*", "pay.*"]
PAY_ALLOW = ["emit:pay.*", "write:t1/**"]
TYPES = {"app.note": None, "pay.captured": PAY_ALLOW}
# Failures an allowed command may meet that are not about who asks (no Temporal here, a name taken before).
NOT_ABOUT_ACCESS = {"invalid_request", "not_found", "session_not_open", "internal_error", "rev_conflict", "unavailable"}

scope_texts = st.one_of(
    st.sampled_from(["admin", "listeners"]),
    st.tuples(st.sampled_from(["read", "listen", "write"]), st.sampled_from(SESSION_GLOBS)).map(":".join),
    st.tuples(st.sampled_from(SESSION_GLOBS), st.sampled_from(ALIAS_GLOBS)).map(lambda p: f"write:{p[0]}:{p[1]}"),
    st.sampled_from(TYPE_GLOBS).map(lambda g: f"emit:{g}"),
    st.tuples(st.sampled_from(TYPE_GLOBS), st.sampled_from(SESSION_GLOBS)).map(lambda p: f"emit:{p[0]}:{p[1]}"),
    st.sampled_from(["emit:pay.*", "write:t1/**"]),
)
_numbers = itertools.count()


async def fingerprint(api: Api) -> dict[str, Any]:
    async with api.platform.store.transaction() as conn:
        return {
            table: await conn.fetchval(
                f"SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) FROM orchestrator.{table} t"
            )
            for table in STATE_TABLES
        }


def body_of(name: str, session: str, alias: str, event_type: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(json.dumps(VALID[name][0]).replace(SESSION, session))
    if "alias" in body and name in ("write_object", "delete_object", "post_thread_item", "post_thread_items"):
        body["alias"] = alias
    if name == "write_objects":
        body["objects"] = [{"alias": alias, "value": {"type": "t"}}]
    if name == "emit_event":
        body |= {"type": event_type, "data": {}}
    if name == "emit_events":
        body["events"] = [{"type": event_type, "data": {}}]
    return {"command": name, **body}


def expected(scopes: list[str], body: dict[str, Any], session_alias: str | None) -> Target:
    name = body["command"]
    if need_of(name) == "open_session":
        return Target(new_session_alias=body.get("alias"))
    if need_of(name) not in SESSION_NEEDS:
        return Target()
    written = [o["alias"] for o in body.get("objects", [])] or ([body["alias"]] if "alias" in body else [])
    emitted = [body["type"]] if "type" in body else [e["type"] for e in body.get("events", [])]
    allows = tuple((t, None if TYPES[t] is None else tuple(TYPES[t] or ())) for t in emitted)
    return Target(body["session_id"], True, session_alias, tuple(written), allows)


@pytest.fixture
async def world(api: Api) -> Api:
    """The application's declarations every example may touch: a listener and two event types."""
    for body in (
        {"command": "save_listener", "listener": LISTENER},
        {"command": "save_event_type", "name": "app.note", "schema": {"type": "object"}},
        {
            "command": "save_event_type",
            "name": "pay.captured",
            "schema": {"type": "object"},
            "allow": TYPES["pay.captured"],
        },
    ):
        assert (await api.platform.command(body))["status"] == "success"
    return api


def test_every_command_is_in_the_table_of_what_it_needs() -> None:
    assert set(COMMANDS) <= set(NEEDS), sorted(set(COMMANDS) - set(NEEDS))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(sorted(COMMANDS)),
    scopes=st.lists(scope_texts, min_size=1, max_size=4, unique=True),
    base=st.sampled_from(SESSION_BASES),
    alias=st.sampled_from(ALIASES),
    event_type=st.sampled_from(sorted(TYPES)),
)
async def test_a_key_runs_what_its_scopes_allow_and_a_refused_command_changes_nothing(
    world: Api, name: str, scopes: list[str], base: str | None, alias: str, event_type: str
) -> None:
    api, number = world, next(_numbers)
    session_alias = None if base is None else f"{base}/{number}"
    session = (await api.platform.command({"command": "open_session", "alias": session_alias}))["session"]["id"]
    await api.platform.command(
        {"command": "write_object", "session_id": session, "alias": "a/b", "value": {"type": "t"}}
    )
    body = body_of(name, session, alias, event_type)
    if name == "open_session":
        body["alias"] = None if base is None else f"{base}/new-{number}"
        if body["alias"] is None:
            del body["alias"]
    secret = await api.key(f"k{number}", scopes)
    verdict = decide(Grant.of(scopes), name, expected(scopes, body, session_alias))

    before = await fingerprint(api)
    response = await api.post(body, secret)
    reply = response.json()

    if verdict.allowed:
        assert reply["status"] == "success" or reply["error"] in NOT_ABOUT_ACCESS, (scopes, body, reply)
        assert not (reply.get("error") == "not_found" and reply["message"].startswith("session_id")), reply
    else:
        assert (reply["status"], reply.get("error")) == ("error", verdict.code), (scopes, body, reply)
        assert response.status_code == (404 if verdict.code == "not_found" else 403)
        assert await fingerprint(api) == before, f"{body} under {scopes} was refused but changed something"


# The least a key needs for each command (on a session aliased `t1/...`, at aliases under `a/`).
LEAST: dict[str, list[str]] = {
    "open_session": ["write:t1/**"],
    "list_sessions": ["read:t1/**"],
    "close_session": ["write:t1/**"],
    "reopen_session": ["write:t1/**"],
    "delete_session": ["write:t1/**"],
    "write_object": ["write:t1/**:a/**"],
    "write_objects": ["write:t1/**:a/**"],
    "delete_object": ["write:t1/**:a/**"],
    "post_thread_item": ["write:t1/**:a/**"],
    "post_thread_items": ["write:t1/**:a/**"],
    "update_graph": ["write:t1/**"],
    "start_execution": ["write:t1/**"],
    "stop_execution": ["write:t1/**"],
    "create_schedule": ["write:t1/**"],
    "update_schedule": ["write:t1/**"],
    "delete_schedule": ["write:t1/**"],
    "emit_event": ["emit:app.*"],
    "emit_events": ["emit:app.*"],
    "save_listener": ["listeners"],
    "delete_listener": ["listeners"],
    "save_event_type": ["listeners"],
    "delete_event_type": ["listeners"],
    "capture_table": ["admin"],
    "uncapture_table": ["admin"],
    "list_captures": ["listeners"],
    "get_listener": ["read:t1/**"],
    "list_listeners": ["listeners"],
    "switch_listener": ["listeners", "read:t1/**"],
    "pause_listener": ["listeners", "listen:t1/**"],
    "resume_listener": ["listeners", "listen:t1/**"],
    "replay_batch": ["listeners", "read:t1/**"],
    "redeliver": ["listeners", "read:t1/**"],
    "get_event_type": ["emit:nothing.*"],
    "list_event_types": ["listen:t2/**"],
    "whoami": ["emit:nothing.*"],
    "create_api_key": ["admin"],
    "list_api_keys": ["admin"],
    "revoke_api_key": ["admin"],
}
# Every other command reads a session.
READS = ["read:t1/**"]
# What a key lacking the least scopes holds instead: everything else it might be given (any read scope lets a
# key list sessions, those it reads, and see the listeners, which belong to the application, not to a session).
OTHERS = ["read:t2/**", "write:t2/**", "listen:t2/**", "emit:pay.*:t2/**", "write:t1/**:x/**"]
NO_READS = ["write:**", "listen:**", "emit:**"]


async def _fresh(api: Api, number: int) -> str:
    """A new session with an object at `a/b`, and the listener there again (an example may have deleted it)."""
    await api.platform.command({"command": "save_listener", "listener": LISTENER})
    session = (await api.platform.command({"command": "open_session", "alias": f"t1/least/{number}"}))["session"]["id"]
    await api.platform.command(
        {"command": "write_object", "session_id": session, "alias": "a/b", "value": {"type": "t"}}
    )
    return str(session)


async def test_each_command_runs_under_the_least_scopes_it_needs_as_it_does_for_an_admin(world: Api) -> None:
    api = world
    admin = await api.key("least-admin", ["admin"])
    for number, name in enumerate(sorted(COMMANDS)):
        least = LEAST.get(name, READS)
        replies = []
        for holder in (admin, await api.key(f"least-{number}", least)):
            body = body_of(name, await _fresh(api, 2 * number + len(replies)), "a/b", "app.note")
            if name == "open_session":
                body["alias"] = f"t1/opened/{2 * number + len(replies)}"
            if name in ("create_api_key", "revoke_api_key"):
                body["name"] = f"made-{number}-{len(replies)}"
                if name == "revoke_api_key":
                    await api.key(body["name"], ["read:**"])
            reply = (await api.post(body, holder)).json()
            # What answered: the command itself, or (a message naming the session) a refusal of the key.
            replies.append((reply["status"], reply.get("error"), reply.get("message", "").split(":")[0]))
        assert replies[0] == replies[1], (name, least, replies)
        assert replies[1][1] not in ("access_denied", "unauthorized"), (name, replies)
        assert replies[1][1:] != ("not_found", "session_id"), (name, replies)

        # Without them (everything else instead), it is refused.
        lacking = NO_READS if name in ("list_sessions", "get_listener", "list_listeners") else OTHERS
        body = body_of(name, await _fresh(api, 10_000 + number), "a/b", "app.note")
        if name == "open_session":
            body["alias"] = f"t1/opened/lacking-{number}"
        if name in ("get_event_type", "list_event_types", "whoami"):
            continue  # any key may read the declared types, and ask who it is
        reply = (await api.post(body, await api.key(f"lacking-{number}", lacking))).json()
        assert reply.get("error") in ("access_denied", "not_found"), (name, lacking, reply)
