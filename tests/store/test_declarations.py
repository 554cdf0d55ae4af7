"""Bad declarations are refused at `save_listener`, naming the field, and nothing is stored.

Each case breaks one field of a declaration that is otherwise valid (and already saved once, so a refusal
must also leave the saved version alone): a wrong type, a wrong value, a bad glob or path, a bound crossed.
The simpler cases of `test_bad_input.py` and `test_listeners.py` (a bad name, an alias glob with `//`, a
window over 300 s, keyed with no key, `max_events` 5000, the op `like`, the action type `email`) are not
repeated here.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from orchestrator.config import Settings
from orchestrator.core.limits import Limits
from orchestrator.dev.embedded import EmbeddedPostgres
from orchestrator.platform import Platform
from orchestrator.store.postgres import PostgresStore
from tests.store.helpers import ok, refused

GOOD: dict[str, Any] = {
    "name": "orchestrate",
    "filter": {
        "types": ["object.**", "thread.item_posted"],
        "aliases": ["missions/**", "app/missions/sweep"],
        "where": [{"path": "item.type", "op": "not_in", "value": ["text", "thinking"]}],
    },
    "concurrency": {"mode": "keyed", "key": "alias", "key_segments": 2, "max_parallel": 2},
    "batch": {"window_seconds": 2, "max_events": 100, "distinct_by": "alias"},
    "action": {"type": "workflow", "workflow": "orchestrator", "input": {"events": "{{ batch.messages }}"}},
    "retry": {"attempts": 2, "delay_seconds": 30},
    "receipt": {"alias": "ops/receipts"},
    "idle": {"after_seconds": 60},
    "owns": ["missions/**", "views/*/cells"],
    "description": "moves every mission",
}


class _Drop:
    """The field is left out (named so in test ids, which every test worker must spell alike)."""

    def __repr__(self) -> str:
        return "DROP"


DROP = _Drop()

# (field path in the body, bad value, what the refusal must name)
CASES: list[tuple[str, Any, str]] = [
    # name
    ("name", DROP, "listener.name"),
    ("name", 5, "listener.name"),
    ("name", "", "listener.name"),
    ("name", "n" * 65, "listener.name"),
    ("name", "9lives", "listener.name"),
    # filter
    ("filter", DROP, "listener.filter"),
    ("filter", "object.**", "listener.filter"),
    ("filter.kinds", ["object.**"], "listener.filter.kinds"),
    ("filter.types", "object.**", "listener.filter.types"),
    ("filter.types", [], "listener.filter.types"),
    ("filter.types", [5], "listener.filter.types.0"),
    ("filter.types", ["object..written"], "listener.filter.types.0"),
    ("filter.types", ["object.**", "object.**x"], "listener.filter.types.1"),
    ("filter.types", ["object.***"], "listener.filter.types.0"),
    ("filter.types", ["object written"], "listener.filter.types.0"),
    ("filter.types", [".object"], "listener.filter.types.0"),
    ("filter.aliases", "missions/**", "listener.filter.aliases"),
    ("filter.aliases", [], "listener.filter.aliases"),
    ("filter.aliases", ["missions/**", "/missions"], "listener.filter.aliases.1"),
    ("filter.aliases", ["missions/a**"], "listener.filter.aliases.0"),
    ("filter.aliases", ["missions/"], "listener.filter.aliases.0"),
    ("filter.aliases", [None], "listener.filter.aliases.0"),
    ("filter.where", {"path": "alias", "op": "eq", "value": "x"}, "listener.filter.where"),
    ("filter.where", ["alias eq x"], "listener.filter.where.0"),
    ("filter.where", [{"op": "eq", "value": "x"}], "listener.filter.where.0.path"),
    ("filter.where", [{"path": "alias", "value": "x"}], "listener.filter.where.0.op"),
    ("filter.where", [{"path": "a..b", "op": "eq", "value": 1}], "listener.filter.where.0.path"),
    ("filter.where", [{"path": "alias", "op": "EQ", "value": 1}], "listener.filter.where.0.op"),
    ("filter.where", [{"path": "alias", "op": "in", "value": "x"}], "listener.filter.where.0.value"),
    ("filter.where", [{"path": "alias", "op": "eq"}], "listener.filter.where.0.value"),
    ("filter.where", [{"path": "depth", "op": "gt", "value": [1]}], "listener.filter.where.0.value"),
    ("filter.where", [{"path": "depth", "op": "lte", "value": True}], "listener.filter.where.0.value"),
    ("filter.where", [{"path": "alias", "op": "exists", "value": "yes"}], "listener.filter.where.0.value"),
    ("filter.where", [{"path": "alias", "op": "eq", "value": 1, "not": True}], "listener.filter.where.0.not"),
    # concurrency
    ("concurrency", "serial", "listener.concurrency"),
    ("concurrency.mode", "fifo", "listener.concurrency.mode"),
    ("concurrency.key", "a..b", "listener.concurrency.key"),
    ("concurrency.key", 7, "listener.concurrency.key"),
    ("concurrency.key_segments", 0, "listener.concurrency.key_segments"),
    ("concurrency.key_segments", "2", "listener.concurrency.key_segments"),
    ("concurrency.max_parallel", 0, "listener.concurrency.max_parallel"),
    ("concurrency.max_parallel", "4", "listener.concurrency.max_parallel"),
    ("concurrency.max_parallel", 2.5, "listener.concurrency.max_parallel"),
    ("concurrency.lanes", 3, "listener.concurrency.lanes"),
    # batch
    ("batch", [2, 100], "listener.batch"),
    ("batch.window_seconds", -1, "listener.batch.window_seconds"),
    ("batch.window_seconds", "2", "listener.batch.window_seconds"),
    ("batch.max_events", 0, "listener.batch.max_events"),
    ("batch.max_events", 1001, "listener.batch.max_events"),
    ("batch.max_events", "100", "listener.batch.max_events"),
    ("batch.max_events", True, "listener.batch.max_events"),
    ("batch.distinct_by", "alias.", "listener.batch.distinct_by"),
    ("batch.distinct_by", ["alias"], "listener.batch.distinct_by"),
    ("batch.size", 10, "listener.batch.size"),
    # action
    ("action", DROP, "listener.action"),
    ("action", "orchestrator", "listener.action"),
    ("action", {"workflow": "orchestrator"}, "listener.action.type: is required"),
    ("action", {"type": "webhook", "url": "http://x"}, "listener.action"),
    ("action", {"type": 3}, "listener.action"),
    ("action.workflow", DROP, "listener.action.workflow"),
    ("action.workflow", "", "listener.action.workflow"),
    ("action.workflow", ["orchestrator"], "listener.action.workflow"),
    ("action.queue", "fast", "listener.action.queue"),
    ("action", {"type": "thread_item", "item": {"type": "text"}}, "listener.action.alias"),
    ("action", {"type": "thread_item", "alias": "chats/*", "item": {"type": "text"}}, "listener.action.alias"),
    ("action", {"type": "thread_item", "alias": "chats/1"}, "listener.action.item"),
    ("action", {"type": "object", "alias": "views/**", "value": {"type": "v"}}, "listener.action.alias"),
    ("action", {"type": "object", "alias": 5, "value": {"type": "v"}}, "listener.action.alias"),
    ("action", {"type": "object", "alias": "views/x"}, "listener.action.value"),
    # a template hole no batch of the listener's types can fill (types: object.**, thread.item_posted)
    ("action.input", {"events": "{{ batch.mesages }}"}, "listener.action.input: template path 'batch.mesages'"),
    ("action.input", "{{ batch.count.n }}", "listener.action.input: template path 'batch.count.n'"),
    ("action.input", ["{{ evnt.alias }}"], "listener.action.input: template path 'evnt.alias'"),
    ("action.input", "id {{ event.execution.id }}", "listener.action.input: template path 'event.execution.id'"),
    ("action.input", {"who": "{{ item.nickname }}"}, "listener.action.input: template path 'item.nickname'"),
    ("action.input", "{{ session.name }}", "listener.action.input: template path 'session.name'"),
    # retry
    ("retry", 2, "listener.retry"),
    ("retry.attempts", DROP, "listener.retry.attempts"),
    ("retry.attempts", -1, "listener.retry.attempts"),
    ("retry.attempts", 0, "listener.retry.attempts"),  # a retry that would do nothing
    ("retry.attempts", "2", "listener.retry.attempts"),
    ("retry.attempts", 1.5, "listener.retry.attempts"),
    ("retry.delay_seconds", -1, "listener.retry.delay_seconds"),
    ("retry.delay_seconds", "30", "listener.retry.delay_seconds"),
    ("retry.backoff", "linear", "listener.retry.backoff"),
    # receipt
    ("receipt", "ops/receipts", "listener.receipt"),
    ("receipt.alias", DROP, "listener.receipt.alias"),
    ("receipt.alias", "ops//receipts", "listener.receipt.alias"),
    ("receipt.alias", "{{ event.alias }}", "listener.receipt.alias"),
    ("receipt.alias", 1, "listener.receipt.alias"),
    # idle
    ("idle", 60, "listener.idle"),
    ("idle.after_seconds", DROP, "listener.idle.after_seconds"),
    ("idle.after_seconds", -5, "listener.idle.after_seconds"),
    ("idle.after_seconds", 0, "listener.idle.after_seconds"),
    ("idle.after_seconds", 8 * 24 * 3600, "listener.idle.after_seconds"),
    ("idle.after_seconds", "60", "listener.idle.after_seconds"),
    # owns
    ("owns", "missions/**", "listener.owns"),
    ("owns", ["missions/**", "views//x"], "listener.owns.1"),
    ("owns", ["views/x**"], "listener.owns.0"),
    ("owns", [3], "listener.owns.0"),
    # description, and a field nobody declared
    ("description", "d" * 2001, "listener.description"),
    ("description", 5, "listener.description"),
    ("colour", "red", "listener.colour"),
]


def broken(path: str, value: Any) -> dict[str, Any]:
    """GOOD with the field at dotted `path` replaced by `value` (or left out for DROP)."""
    body = copy.deepcopy(GOOD)
    *parents, last = path.split(".")
    node = body
    for part in parents:
        node = node[part]
    if value is DROP:
        node.pop(last)
    else:
        node[last] = value
    return body


STORED_TABLES = ["listeners", "listener_versions"]


@pytest.fixture(scope="module")
async def saved_once(embedded_pg: EmbeddedPostgres) -> AsyncIterator[Platform]:
    """One database for the module, holding GOOD as version 1: every refusal must leave it as it is."""
    name = f"t_{uuid.uuid4().hex}"
    admin = await asyncpg.connect(embedded_pg.url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    settings = Settings(database_url=None, temporal_address=None, limits=Limits(activation_delay_seconds=0))
    platform = await Platform.connect(settings, embedded_pg.url_for(name))
    try:
        await ok(platform, "save_listener", listener=GOOD)
        yield platform
    finally:
        await platform.close()
        admin = await asyncpg.connect(embedded_pg.url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


async def stored(platform: Platform) -> dict[str, Any]:
    store = platform.store
    assert isinstance(store, PostgresStore)
    counts = {t: int(await store.pool.fetchval(f"SELECT count(*) FROM orchestrator.{t}")) for t in STORED_TABLES}
    return {"counts": counts, "listener": (await ok(platform, "get_listener", name="orchestrate"))["listener"]}


def test_every_case_changes_the_good_body() -> None:
    # GOOD itself is accepted (the fixture saves it), so a case that left it as it is would prove nothing.
    for path, value, _ in CASES:
        assert broken(path, value) != GOOD, path


@pytest.mark.parametrize(("path", "value", "field"), CASES, ids=[f"{c[0]}={c[1]!r}"[:60] for c in CASES])
async def test_a_bad_declaration_is_refused_naming_the_field_and_nothing_is_stored(
    saved_once: Platform, path: str, value: Any, field: str
) -> None:
    before = await stored(saved_once)
    assert before["listener"]["version"] == 1
    reply = await refused(saved_once, "invalid_request", field, "save_listener", listener=broken(path, value))
    assert reply["message"].startswith("listener"), reply
    assert await stored(saved_once) == before, "a refused declaration stores nothing"


async def test_max_events_over_the_deployments_limit_is_refused(fresh_db: str) -> None:
    settings = Settings(
        database_url=None,
        temporal_address=None,
        limits=Limits(activation_delay_seconds=0, max_events_per_batch=50, max_window_seconds=5),
    )
    platform = await Platform.connect(settings, fresh_db)
    try:
        for batch, field in [
            ({"window_seconds": 2, "max_events": 51}, "listener.batch.max_events: must be at most 50"),
            ({"window_seconds": 6, "max_events": 50}, "listener.batch.window_seconds: must be at most 5"),
        ]:
            await refused(platform, "invalid_request", field, "save_listener", listener={**GOOD, "batch": batch})
        assert (await ok(platform, "list_listeners"))["listeners"] == []
        saved = await ok(platform, "save_listener", listener={**GOOD, "batch": {"window_seconds": 5, "max_events": 50}})
        assert saved["listener"]["version"] == 1
    finally:
        await platform.close()


async def test_every_action_type_and_an_empty_where_are_accepted(fresh_db: str) -> None:
    # The other side of the refusals: what the cases above break, done right, is stored as written.
    settings = Settings(database_url=None, temporal_address=None, limits=Limits(activation_delay_seconds=0))
    platform = await Platform.connect(settings, fresh_db)
    try:
        actions = [
            {"type": "workflow", "workflow": "w"},
            {"type": "thread_item", "alias": "chats/{{ event.alias }}", "item": {"type": "text", "message": "hi"}},
            {"type": "object", "alias": "views/x", "value": {"type": "v", "n": "{{ batch.count }}"}},
            # every root, the seed's spelling, and a deep path into data
            {
                "type": "workflow",
                "workflow": "w",
                "input": {
                    "a": "{{ event.object.alias }} {{ event.data.rev }} {{ event.cause.batch.lane }}",
                    "b": ["{{ batch.events.0.alias }}", "{{ batch.messages }}", "{{ listener.name }}"],
                    "c": "{{ session.alias }}/{{ session.id }}/{{ batch.first_id }}-{{ batch.last_id }}",
                },
            },
        ]
        for n, action in enumerate(actions):
            body = {"name": f"l{n}", "filter": {"types": ["object.**"], "where": []}, "action": action}
            await ok(platform, "save_listener", listener=body)
            got = (await ok(platform, "get_listener", name=f"l{n}"))["listener"]["body"]
            assert got["action"] == action
        exists = {"path": "item", "op": "exists"}
        saved = await ok(
            platform, "save_listener", listener={**GOOD, "filter": {"types": ["thread.*"], "where": [exists]}}
        )
        assert saved["listener"]["version"] == 1
    finally:
        await platform.close()
