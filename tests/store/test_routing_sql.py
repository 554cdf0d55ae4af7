"""Routing in SQL against routing in Python: the same lanes, the same keys, the same verdicts.

Generated listeners (type and alias globs, `where` with every op and nested `any` and `not` groups, keyed on
paths into every part of the envelope, versions taking effect later) and generated events (objects, thread
items with whole messages, app events with data of every JSON kind, graph changes, executions, a listener's own
writes and its own lane's silence) go through `orchestrator_route_page` on a real PostgreSQL; the same events,
read back as the envelopes the engine reads, go through the core's `route`. Each (listener, lane) must get
exactly the same events, and each lane the workflow id `lane_workflow_id` gives it. The listeners are saved as
a user saves them, by `save_listener` through the HTTP door: a generated body the door refuses fails the test,
and what both routings read is the body as the command stored it.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from orchestrator.client import Client
from orchestrator.config import Settings
from orchestrator.core.declaration import ListenerFilter, never_holding
from orchestrator.core.envelope_paths import why_unresolvable
from orchestrator.core.events import Committed, envelope_of
from orchestrator.core.lane_keys import lane_workflow_id
from orchestrator.core.routing import route, versions_by_name
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.engine.probe_pruning import ProbePruning
from orchestrator.platform import Platform
from orchestrator.store.listener_rules import compile_missing_rules, save_rule
from orchestrator.store.postgres import EVENT_COLUMNS, WHOLE_MESSAGE, PostgresStore

TYPE_GLOBS = ["object.**", "object.written", "object.*", "*.written", "thread.item_posted", "app.*", "app.**", "**",
              "graph.changed", "lane.idle", "execution.*", "ap*.thing"]  # fmt: skip
PLACELESS_GLOBS = {"app.*", "app.**", "lane.idle", "execution.*", "ap*.thing"}
ALIAS_GLOBS = ["a/**", "a/*", "a/b", "*/b", "**/c", "a/*/c", "x*", "a/b*", "**", "a.b/**", "n*"]
PATHS = ["alias", "object.alias", "type", "data.n", "data.s", "data.l", "data.o", "data.l.0", "data.o.k",
         "source.client", "source.listener", "item.role", "item.type", "item.message", "item.message.k", "depth",
         "actor.key", "actor.listener", "data.missing", "execution.status", "graph.nodes.0", "graph.1", "graph", "id",
         "session_id"]  # fmt: skip
KEY_PATHS = ["alias", "data.n", "data.s", "data.o", "data.l", "item.role", "data.missing", "item.message", "depth"]
# Text with LIKE's metacharacters (`%`, `_`, `\`) and a regular expression's: `prefix` and `contains` read a value
# as text, so a value spliced into a pattern would take strings it should not.
PATTERNED = ["%", "_", "\\", "a%", "a_b", "a\\%", ".*"]
SCALARS = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([1.0, 1.5, -0.0, 2.25, 1e20, 1e-7, 0.1]),
    st.booleans(),
    st.sampled_from(["", "a", "b", "é", "a/b/c", "A", "10", "2", "a%b", "axb", "a_b", "\\"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["k", "j", "é"]), inner, max_size=2)
    ),
    max_leaves=4,
)


OPS = ["eq", "neq", "in", "not_in", "exists", "gt", "gte", "lt", "lte", "prefix", "contains"]
# The application's event types the generated events and globs name, declared before any listener is saved (a
# glob no type matches is refused); their schemas hold any `data`.
DECLARED = {"app.thing": {"type": "object"}, "app.other.x": {"type": "object"}}


def resolving(paths: Sequence[str], types: Sequence[str] | None) -> list[str]:
    """The paths the save accepts for a listener of `types` (one none of whose events can carry a path is
    refused: `item.role` beside `object.**` only). The rule is the save's own, held by its tests; here it keeps
    the generated bodies to those the door must accept."""
    return [path for path in paths if why_unresolvable(path, types, DECLARED) is None]


def conditions(ops: Sequence[str], paths: Sequence[str]) -> st.SearchStrategy[dict[str, Any]]:
    def one(path: str, op: str) -> st.SearchStrategy[dict[str, Any]]:
        if op == "exists":
            # Left out, `value` is true: the stored body holds no value, and both routings read the default.
            value: st.SearchStrategy[Any] = st.one_of(st.booleans(), st.none())
        elif op in ("in", "not_in"):
            value = st.lists(st.one_of(SCALARS, st.none()), min_size=0, max_size=3)
        elif op in ("gt", "gte", "lt", "lte"):
            value = st.one_of(st.integers(-3, 3), st.sampled_from([1.5, 0.1]), st.sampled_from(["", "a", "b", "é"]))
        elif op == "prefix":
            value = st.sampled_from(["", "a", "a/", "a/b", "é", "1", "h", "hel", "re", "x", *PATTERNED])
        elif op == "contains":
            # Lists too, often short or empty: a member equals the value, never a part of the list (jsonb's `@>`).
            value = st.one_of(
                st.sampled_from(["/", "b/", "ell", "es", *PATTERNED]), st.lists(SCALARS, max_size=2), VALUES
            )
        else:
            value = VALUES
        return value.map(lambda v: {"path": path, "op": op} if v is None else {"path": path, "op": op, "value": v})

    return st.tuples(st.sampled_from(paths), st.sampled_from(ops)).flatmap(lambda t: one(*t))


@st.composite
def listener_bodies(draw: st.DrawFn, name: str, ops: Sequence[str] = OPS) -> dict[str, Any]:
    flt: dict[str, Any] = {}
    if draw(st.booleans()):
        flt["types"] = draw(st.lists(st.sampled_from(TYPE_GLOBS), min_size=1, max_size=2, unique=True))
    # `aliases` beside types of which no event is at an alias is refused at save: not drawn.
    placed = "types" not in flt or not set(flt["types"]) <= PLACELESS_GLOBS
    if placed and draw(st.booleans()):
        flt["aliases"] = draw(st.lists(st.sampled_from(ALIAS_GLOBS), min_size=1, max_size=2, unique=True))
    groups = st.recursive(
        conditions(ops, resolving(PATHS, flt.get("types"))),
        lambda inner: st.one_of(
            st.lists(inner, min_size=1, max_size=2).map(lambda items: {"any": items}),
            inner.map(lambda item: {"not": item}),
        ),
        max_leaves=3,
    )
    flt["where"] = draw(st.lists(groups, max_size=2))
    # A `where` no event can pass is refused at save (an `in` of no value): not a listener to compare routings by.
    assume(not never_holding(ListenerFilter.model_validate({"where": flt["where"]})))
    mode = draw(st.sampled_from(["serial", "keyed", "parallel"]))
    concurrency: dict[str, Any] = {"mode": mode}
    if mode == "keyed":
        concurrency["key"] = draw(st.sampled_from(resolving(KEY_PATHS, flt.get("types"))))
        segments = draw(st.sampled_from([None, 1, 2]))
        if segments is not None:
            concurrency["key_segments"] = segments
    return {"name": name, "filter": flt, "concurrency": concurrency, "action": {"type": "workflow", "workflow": "w"}}


@st.composite
def events(draw: st.DrawFn, names: Sequence[str]) -> dict[str, Any]:
    kind = draw(st.sampled_from(["object.written", "object.deleted", "thread.item_posted", "app.thing", "app.other.x",
                                 "graph.changed", "execution.ended", "lane.idle"]))  # fmt: skip
    event: dict[str, Any] = {"type": kind, "source": {}}
    if kind.startswith("object") or kind == "thread.item_posted":
        event["alias"] = draw(st.sampled_from(["a", "a/b", "a/b/c", "x1", "a/bc", "b", "n/b", "a.b/c"]))
    if kind.startswith("app") or kind.startswith("object"):
        data = draw(st.dictionaries(st.sampled_from(["n", "s", "l", "o"]), VALUES, max_size=3))
        event["data"] = data
    if kind == "thread.item_posted":
        event["item"] = {"id": "i", "type": draw(st.sampled_from(["text", "request", "json"])),
                         "role": draw(st.sampled_from([None, "user", "request"]))}  # fmt: skip
        event["message"] = draw(st.one_of(st.sampled_from(["hello", ""]), VALUES))
    if kind == "graph.changed":
        event["graph"] = {"nodes": draw(st.lists(st.sampled_from(["a/b", "c", "n", "a/x/c"]), max_size=2))}
    if kind == "execution.ended":
        event["execution"] = {"id": "exe", "workflow": "w", "status": draw(st.sampled_from(["completed", "failed"]))}
    if kind == "lane.idle":
        event["data"] = {
            "listener": draw(st.sampled_from([*names, "other"])),
            "lane": draw(st.sampled_from(["_", "a"])),
        }
        event["source"] = {"listener": event["data"]["listener"]}
    elif draw(st.booleans()):
        event["source"] = draw(st.sampled_from([{"client": "c1"}, {"listener": names[0]}, {"client": "c2"}]))
    if draw(st.booleans()):
        event["cause"] = draw(st.sampled_from([{"request": {"key": "k1"}}, {"schedule": {"alias": "clock"}}]))
    event["depth"] = draw(st.integers(0, 2))
    return event


_numbers = itertools.count()


async def _write(store: PostgresStore, session_id: str, event: dict[str, Any], n: int) -> None:
    item = event.get("item")
    if item is not None:
        message = event["message"]
        text, whole = (message, None) if isinstance(message, str) else (None, message)
        await store.pool.execute(
            "INSERT INTO orchestrator.thread_items (session_id, alias, id, type, role, message, message_json, event_id)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, 0)",
            session_id, event["alias"], f"i{n}", item["type"], item["role"], text, whole,
        )  # fmt: skip
        item = {k: v for k, v in {**item, "id": f"i{n}", "message": "preview"}.items() if v is not None}
    await store.pool.execute(
        "WITH e AS (INSERT INTO orchestrator.events"
        " (id, session_id, type, alias, item, execution, source, depth, data, cause, graph)"
        " VALUES (nextval('orchestrator.event_ids'::regclass), $1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id)"
        " UPDATE orchestrator.sessions SET last_event_id = (SELECT id FROM e) WHERE id = $1",
        session_id, event["type"], event.get("alias"), item, event.get("execution"), event["source"],
        event["depth"], event.get("data"), event.get("cause"), event.get("graph"),
    )  # fmt: skip


async def _python_routes(store: PostgresStore, session_id: str) -> dict[tuple[str, str], list[int]]:
    rows = await store.pool.fetch(
        f"SELECT {EVENT_COLUMNS}, {WHOLE_MESSAGE} FROM orchestrator.events e WHERE session_id = $1 ORDER BY id",
        session_id,
    )
    committed = [Committed(envelope_of(dict(r)), r["created_at"]) for r in rows]
    versions = versions_by_name(await store.listener_versions())
    deliveries = route([(c.envelope, c.created_at) for c in committed], versions)
    return {(d.listener, d.lane): [int(e["id"]) for e in d.events] for d in deliveries}


async def _sql_routes(store: PostgresStore, session_id: str) -> dict[tuple[str, str], list[int]]:
    while (await store.lanes.route_page(session_id, 7, 16)).read:
        pass
    rows = await store.pool.fetch(
        "SELECT l.listener, l.lane, l.workflow_id, array_agg(q.event_id ORDER BY q.event_id) AS ids FROM"
        " orchestrator.lanes l"
        " JOIN orchestrator.lane_events q ON q.lane_id = l.id WHERE l.session_id = $1 GROUP BY 1, 2, 3",
        session_id,
    )
    for r in rows:
        assert r["workflow_id"] == lane_workflow_id(session_id, r["listener"], r["lane"]), dict(r)
    return {(r["listener"], r["lane"]): list(r["ids"]) for r in rows}


@pytest.fixture
async def doors(platform: Platform, settings: Settings) -> AsyncIterator[tuple[Client, Client]]:
    """The HTTP door, and a door of a deployment whose saves take effect an hour later (on the same database),
    with the application's event types declared."""
    later = settings.model_copy(
        update={"limits": settings.limits.model_copy(update={"activation_delay_seconds": 3600})}
    )
    async with (
        serve_api(create_app(platform, settings), "127.0.0.1", 0) as url,
        serve_api(create_app(Platform(platform.store, later), later), "127.0.0.1", 0) as later_url,
    ):
        now, in_an_hour = Client.http(url), Client.http(later_url)
        for name, schema in DECLARED.items():
            await now.save_event_type(name, schema)
        yield now, in_an_hour
        await now.aclose()
        await in_an_hour.aclose()


async def _saved(door: Client, body: dict[str, Any]) -> None:
    reply = await door.command({"command": "save_listener", "listener": body})
    assert reply["status"] == "success", (reply, body)


# Without `eq` and `in`, no version probes by a value: the round then finds a plain event's listeners once per
# type (0021). The ops that read inside a value (`prefix`, `contains`) also alone, so that their conditions meet
# strings and lists often enough for a difference to show.
@pytest.mark.parametrize(
    "ops",
    [OPS, [op for op in OPS if op not in ("eq", "in")], ["prefix", "contains"]],
    ids=["probes_by_value", "plain", "inside_values"],
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
async def test_routing_in_sql_gives_every_lane_what_routing_in_python_gives_it(
    platform: Platform, doors: tuple[Client, Client], ops: list[str], data: Any
) -> None:
    store = platform.store
    assert isinstance(store, PostgresStore)
    now, in_an_hour = doors
    number = next(_numbers)
    names = [f"l{number}x{i}" for i in range(data.draw(st.integers(1, 3)))]
    for name in names:
        await _saved(now, data.draw(listener_bodies(name, ops)))
        if data.draw(st.booleans()):
            # A later version that takes effect in an hour: every event here is the first version's.
            await _saved(in_an_hour, data.draw(listener_bodies(name, ops)))
    if not {"eq", "in"} & set(ops):  # the way of events with no place and no probe path is the one taken
        assert not await store.pool.fetchval("SELECT count(*) FROM orchestrator.listener_probe_paths")
    session_id = (await now.open_session())["session"]["id"]
    for n, event in enumerate(data.draw(st.lists(events(names), min_size=1, max_size=12))):
        await _write(store, session_id, event, n)
    try:
        expected = await _python_routes(store, session_id)
        got = await _sql_routes(store, session_id)
        assert got == expected, json.dumps({"sql": {str(k): v for k, v in got.items()},
                                            "python": {str(k): v for k, v in expected.items()}})  # fmt: skip
    finally:
        for name in names:
            await now.delete_listener(name)


# Paths into `data` that `orchestrator_event_keys` reads in place (0018) and paths it leaves to
# `orchestrator_value`: indexes `#>` would read otherwise (signed, padded past 9 digits, with an exponent).
KEY_PROBE_PATHS = ["data.l.0", "data.l.01", "data.l.-1", "data.l.+1", "data.l.1e0", "data.l. 1", "data.l.3.k",
                   "data.l.0000000001", "data.o.k", "data.o.0", "data.o.k-1", "data.o.é", "data.n", "data.s",
                   "data.z", "data.missing", "data.l", "data.o", "data._x", "data", "alias", "type",
                   "depth"]  # fmt: skip
KEY_PROBE_EVENTS: list[dict[str, Any]] = [
    {"type": "app.thing", "data": {"l": [1, "a", None, {"k": 2}], "o": {"k": "s", "0": True, "k-1": 3, "é": [1.50]},
                                   "n": 1.50, "s": "é", "z": None, "_x": False}},
    {"type": "app.thing", "data": {"l": {"0": "zero", "01": 1, "-1": "minus", "+1": 2, "1e0": 3, " 1": 4}}},
    {"type": "app.thing", "data": {"l": None, "o": [1, 2]}},
    {"type": "object.written", "alias": "a/b", "data": {"l": [True], "n": 10}},
    {"type": "graph.changed", "graph": {"nodes": ["a/b", "c"]}, "data": {"s": "x"}},
]  # fmt: skip


async def test_an_events_probe_keys_read_in_place_are_those_the_general_reading_gives(platform: Platform) -> None:
    store = platform.store
    assert isinstance(store, PostgresStore)
    session_id = (await platform.command({"command": "open_session"}))["session"]["id"]
    for n, event in enumerate(KEY_PROBE_EVENTS):
        await _write(store, session_id, {"source": {}, "depth": 0, **event}, n)
    # The keys as 0007 built them: every place head times '' and each path's value read by orchestrator_value.
    rows = await store.pool.fetch(
        "SELECT e.id, orchestrator.orchestrator_event_keys(e, $2) AS got, ARRAY("
        "  SELECT h.head || chr(31) || v.key"
        "  FROM unnest(orchestrator.orchestrator_place_heads(e.alias, e.graph)) WITH ORDINALITY AS h(head, i)"
        "  CROSS JOIN (SELECT chr(31) || 'null' AS key, 0::bigint AS j UNION ALL"
        "    SELECT q.path || chr(31) || orchestrator.orchestrator_canonical(x.value), q.n"
        "    FROM unnest($2::text[]) WITH ORDINALITY AS q(path, n),"
        "    LATERAL (SELECT orchestrator.orchestrator_value(e, split_part(q.path, '.', 1), (string_to_array(q.path,"
        " '.'))[2:])"
        "             AS value) x WHERE x.value IS NOT NULL) v"
        "  ORDER BY h.i, v.j) AS expected"
        " FROM orchestrator.events e WHERE e.session_id = $1 ORDER BY e.id",
        session_id,
        KEY_PROBE_PATHS,
    )
    assert len(rows) == len(KEY_PROBE_EVENTS)
    for row in rows:
        assert row["got"] == row["expected"], (row["id"], set(row["got"]) ^ set(row["expected"]))
    # The edges read as the general reading reads them: a signed or padded index finds nothing in a list.
    first = set(rows[0]["got"])
    assert f"{chr(31)}data.l.0{chr(31)}1" in first and f'{chr(31)}data.l.01{chr(31)}"a"' in first
    assert not any(k.startswith(f"{chr(31)}data.l.-1{chr(31)}") for k in first)
    assert f"{chr(31)}data.o.é{chr(31)}[1.5]" in first


# A value one of the events above holds at a path into `data`: a listener probing by each, each met. Every path
# probed being into `data`, an event with no alias and no graph offers its keys from the round's expression
# (0020), the others through `orchestrator_event_keys`.
PROBED_VALUES: list[tuple[str, Any]] = [("data.l.0", 1), ("data.o.k", "s"), ("data.n", 1.5), ("data.s", "é"),
                                        ("data._x", False), ("data.o.k-1", 3), ("data.l.0", "zero"),
                                        ("data.l.01", 1), ("data.o.0", 1), ("data.o", [1, 2]), ("data.o.0", True),
                                        ("data.l.3.k", 2), ("data.n", 10), ("data.s", "x")]  # fmt: skip


async def _each_listener_meets_an_event_as_python_routes_it(
    platform: Platform,
    session_id: str,
    prefix: str,
    filters: Sequence[dict[str, Any]],
    events: Sequence[dict[str, Any]],
) -> None:
    """Save a listener per filter (by the command), write the events, and hold the round to the core's `route`:
    every listener meets an event, and each lane gets what Python gives it."""
    store = platform.store
    assert isinstance(store, PostgresStore)
    names = [f"{prefix}{n}" for n in range(len(filters))]
    for name, schema in DECLARED.items():
        await platform.command({"command": "save_event_type", "name": name, "schema": schema})
    for name, flt in zip(names, filters, strict=True):
        body = {"name": name, "filter": flt, "action": {"type": "workflow", "workflow": "w"}}
        reply = await platform.command({"command": "save_listener", "listener": body})
        assert reply["status"] == "success", reply
    for n, event in enumerate(events):
        await _write(store, session_id, event, n)
    expected = await _python_routes(store, session_id)
    assert {listener for listener, _ in expected} == set(names), "every listener meets an event"
    assert await _sql_routes(store, session_id) == expected


async def test_events_probed_by_paths_into_data_alone_reach_the_listeners_python_routes_them_to(
    platform: Platform,
) -> None:
    store = platform.store
    assert isinstance(store, PostgresStore)
    session_id = (await platform.command({"command": "open_session"}))["session"]["id"]
    filters = [{"where": [{"path": path, "op": "eq", "value": value}]} for path, value in PROBED_VALUES]
    events = [{"source": {}, "depth": 0, **event} for event in KEY_PROBE_EVENTS]
    await _each_listener_meets_an_event_as_python_routes_it(platform, session_id, "probe", filters, events)
    # Every path probed is one the round reads in place: the events with no alias and no graph took that branch.
    probed = [r["path"] for r in await store.pool.fetch("SELECT path FROM orchestrator.listener_probe_paths")]
    assert probed and all(re.fullmatch(r"data(\.([0-9]{1,9}|[A-Za-z_][^.]*))+", p) for p in probed), probed


# Values events with no alias and no graph hold at paths outside `data` too, so the round reads them through
# `orchestrator_event_keys` (less the key with no value), and listeners probing by none beside them (0021).
PROBED_OUTSIDE_DATA: list[tuple[str, Any]] = [("type", "app.thing"), ("depth", 1), ("source.client", "c1"),
                                              ("execution.status", "failed"), ("data.n", 1)]  # fmt: skip
EVENTS_WITHOUT_PLACE: list[dict[str, Any]] = [
    {"type": "app.thing", "data": {"n": 1}, "depth": 1, "source": {"client": "c1"}},
    {"type": "app.thing", "data": {"n": 2}, "depth": 0, "source": {}},
    {"type": "execution.ended", "execution": {"id": "exe", "workflow": "w", "status": "failed"}, "depth": 0,
     "source": {}},
    # And one of the same type with a place: it offers its keys its own way, never by its type's.
    {"type": "app.thing", "alias": "n/b", "data": {"n": 3}, "depth": 0, "source": {}},
]  # fmt: skip


async def test_events_without_a_place_reach_listeners_probing_by_any_path_and_those_probing_by_none(
    platform: Platform,
) -> None:
    store = platform.store
    assert isinstance(store, PostgresStore)
    session_id = (await platform.command({"command": "open_session"}))["session"]["id"]
    filters = [{"where": [{"path": path, "op": "eq", "value": value}]} for path, value in PROBED_OUTSIDE_DATA]
    filters += [{"types": ["app.*"]}, {}]
    await _each_listener_meets_an_event_as_python_routes_it(
        platform, session_id, "outside", filters, EVENTS_WITHOUT_PLACE
    )


@pytest.mark.parametrize("value", [1, 1.0, 1.5, 1e20, 1e-7, -0.0, True, {"b": 1, "a": [1, "é"]}, [2.50, None]])
async def test_a_key_of_any_json_value_is_the_same_text_in_sql_and_python(platform: Platform, value: Any) -> None:
    from orchestrator.core.lane_keys import key_text

    store = platform.store
    assert isinstance(store, PostgresStore)
    text = await store.pool.fetchval("SELECT orchestrator.orchestrator_key_text($1::jsonb, NULL)", value)
    assert text == key_text(value)


# Every value against every other, under every op: one statement evaluates them all.
EDGE_VALUES: list[Any] = [-1, 0, 1, 1.0, 1.5, 2, True, False, "", "a", "b", "B", "é", "10", "2", [1], [1, 2],
                          [1.0, 2], {"k": 1}, {"k": 1.0}, {"k": 1, "j": 2}, {"j": 2, "k": 1}, [], {}, "ab", "aé",
                          "a%b", "a_b", "axb", "%", "_", "\\", "a\\b", "a\\%", ".*", [[1, 2], "a", None],
                          ["a%b", {"k": 1}], [True]]  # fmt: skip


async def test_every_where_op_holds_in_sql_exactly_when_it_holds_in_python(platform: Platform) -> None:
    from orchestrator.core.declaration import WhereCondition
    from orchestrator.core.filters import condition_holds
    from orchestrator.core.paths import MISSING

    store = platform.store
    assert isinstance(store, PostgresStore)
    cases: list[tuple[Any, str, Any]] = []
    for found in [MISSING, *EDGE_VALUES]:
        for op in ("eq", "neq", "gt", "gte", "lt", "lte"):
            cases += [(found, op, v) for v in EDGE_VALUES if op in ("eq", "neq") or isinstance(v, int | float | str)]
        cases += [(found, op, v) for op in ("in", "not_in") for v in ([], [1], [1.0, "a"], [[1, 2]], [{"k": 1}])]
        cases += [(found, "exists", v) for v in (True, False)]
        cases += [(found, "prefix", v) for v in EDGE_VALUES if isinstance(v, str)]
        cases += [(found, "contains", v) for v in EDGE_VALUES if v is not None]
    cases = [c for c in cases if not (c[1] in ("gt", "gte", "lt", "lte") and isinstance(c[2], bool))]
    rows = await store.pool.fetch(
        "SELECT n, orchestrator.orchestrator_holds(f::jsonb, o, v::jsonb) AS holds"
        " FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS x(f, o, v, n)",
        [None if f is MISSING else json.dumps(f) for f, _, _ in cases],
        [o for _, o, _ in cases],
        [json.dumps(v) for _, _, v in cases],
    )
    wrong = []
    for row in rows:
        found, op, value = cases[row["n"] - 1]
        envelope = {} if found is MISSING else {"data": {"x": found}}
        expected = condition_holds(WhereCondition(path="data.x", op=op, value=value), envelope)  # type: ignore[arg-type]
        if row["holds"] is not expected:
            wrong.append((found, op, value, row["holds"], expected))
    assert not wrong, wrong[:20]
    assert len(rows) > 1500


def _instant_text(at: datetime, hours: int) -> str:
    return at.astimezone(timezone(timedelta(hours=hours))).isoformat()


async def test_orderings_of_created_at_route_by_the_instant_in_sql_as_in_python(platform: Platform) -> None:
    """Values written in other zones and with a fraction the envelope leaves out (`...:00Z`, `...:00.5Z`): as text
    each listener below took other events than the instants name."""
    store = platform.store
    assert isinstance(store, PostgresStore)
    session_id = (await platform.command({"command": "open_session"}))["session"]["id"]
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)  # after the listeners take effect
    times = [at - timedelta(seconds=1), at, at + timedelta(microseconds=1), at + timedelta(seconds=0.5)]
    await platform.command({"command": "save_event_type", "name": "app.thing", "schema": DECLARED["app.thing"]})
    filters = {
        "after": ("gt", at.isoformat().replace("+00:00", "Z")),
        "from": ("gte", _instant_text(at, 5)),
        "before": ("lt", _instant_text(at + timedelta(seconds=0.25), 14)),
        "until": ("lte", _instant_text(at - timedelta(seconds=1), -12)),
    }
    for name, (op, value) in filters.items():
        body = {
            "name": f"at_{name}",
            "filter": {"types": ["app.thing"], "where": [{"path": "created_at", "op": op, "value": value}]},
            "action": {"type": "workflow", "workflow": "w"},
        }
        reply = await platform.command({"command": "save_listener", "listener": body})
        assert reply["status"] == "success", reply
    for n, _ in enumerate(times):
        await _write(store, session_id, {"type": "app.thing", "data": {}, "depth": 0, "source": {}}, n)
    ids = [r["id"] for r in await store.pool.fetch(
        "UPDATE orchestrator.events e SET created_at = t.at FROM unnest($2::timestamptz[]) WITH ORDINALITY t(at, n)"
        " WHERE e.session_id = $1 AND e.id = (SELECT min(id) FROM orchestrator.events WHERE session_id = $1) + t.n - 1"
        " RETURNING e.id", session_id, times)]  # fmt: skip
    ids.sort()
    taken = {"at_after": ids[2:], "at_from": ids[1:], "at_before": ids[:3], "at_until": ids[:1]}
    expected = await _python_routes(store, session_id)
    assert {listener: found for (listener, _), found in expected.items()} == taken
    assert await _sql_routes(store, session_id) == expected


@pytest.mark.parametrize(
    "value",
    ["2026-12-06T14:00:00Z", "2026-12-06T14:00:00.5+14:00", "2026-12-06T14:00:00.123456-12:00", "2026-02-30T00:00:00Z",
     "2026-12-06T25:00:00Z", "2026-12-06T14:00:00+15:00", "2026-12-06", "2026-12-06 14:00:00Z", "0000-01-01T00:00:00Z",
     "2026-12-06T14:00:00Z\n", "2026-12-06T14:00:00+01:60", "2026-12-06T24:00:00Z", 1, None],
)  # fmt: skip
async def test_an_instant_reads_in_sql_as_in_python_and_what_names_none_is_null_never_an_error(
    platform: Platform, value: Any
) -> None:
    from orchestrator.core.instants import instant_of

    store = platform.store
    assert isinstance(store, PostgresStore)
    got = await store.pool.fetchval("SELECT orchestrator.orchestrator_instant($1::jsonb)", value)
    assert got == instant_of(value)


# Strings a value with LIKE's metacharacters would take as a pattern (`%` any run, `_` any one character, `\` the
# escape), and the strings each listener below takes, read as text.
PATTERNED_STRINGS = ["50%", "5000", "50%_off", "a_b", "axb", "a\\b", "ab", "a\\%x", "a%x", "A_B"]
PATTERNED_FILTERS: list[tuple[str, Any, list[str]]] = [
    ("prefix", "50%", ["50%", "50%_off"]),
    ("prefix", "a_", ["a_b"]),
    ("prefix", "a\\", ["a\\b", "a\\%x"]),
    ("contains", "_", ["50%_off", "a_b", "A_B"]),
    ("contains", "%_", ["50%_off"]),
    ("contains", "\\", ["a\\b", "a\\%x"]),
    ("contains", "a\\%", ["a\\%x"]),
    ("contains", "%", ["50%", "50%_off", "a\\%x", "a%x"]),
]  # fmt: skip


async def test_prefix_and_contains_read_likes_metacharacters_as_plain_text(platform: Platform) -> None:
    """A hostile value: were `%`, `_` or `\\` spliced into a LIKE pattern, `50%` would take `5000` and `a_` `axb`.
    Saved through the command, routed in SQL and in Python, each listener takes exactly the strings it names."""
    store = platform.store
    assert isinstance(store, PostgresStore)
    session_id = (await platform.command({"command": "open_session"}))["session"]["id"]
    filters = [
        {"types": ["app.thing"], "where": [{"path": "data.s", "op": op, "value": v}]} for op, v, _ in PATTERNED_FILTERS
    ]
    events = [{"type": "app.thing", "data": {"s": text}, "depth": 0, "source": {}} for text in PATTERNED_STRINGS]
    await _each_listener_meets_an_event_as_python_routes_it(platform, session_id, "patterned", filters, events)
    rows = await store.pool.fetch(
        "SELECT id, data ->> 's' AS s FROM orchestrator.events WHERE session_id = $1", session_id
    )
    text = {r["id"]: r["s"] for r in rows}
    taken = {listener: [text[i] for i in ids] for (listener, _), ids in (await _sql_routes(store, session_id)).items()}
    assert taken == {f"patterned{n}": strings for n, (_, _, strings) in enumerate(PATTERNED_FILTERS)}


TYPE_NAMES = ["object.written", "object", "object.written.x", "thread.item_posted", "app.thing", "ap.thing",
              "apx.thing", "graph.changed", "a.b.c", "x"]  # fmt: skip
ALIASES = ["a", "a/b", "a/b/c", "a/x/c", "x1", "x", "a/bc", "b", "n/b", "a.b/c", "c", "a/b/c/d", "ab"]
MORE_TYPE_GLOBS = ["**.written", "object.**.x", "a.*.c", "a.**.c", "*", "*.*", "ob*ct.*", "**.**"]
MORE_ALIAS_GLOBS = ["a/**/c", "**/b/**", "a*/*", "*/*/*", "a/b/**", "*", "a/*c", "x*1"]


async def test_every_glob_matches_in_sql_what_it_matches_in_python(platform: Platform) -> None:
    from orchestrator.core.globs import compile_alias_glob, compile_type_glob
    from orchestrator.core.rules import glob_regex

    store = platform.store
    assert isinstance(store, PostgresStore)
    cases = [(g, ".", t, compile_type_glob(g).matches(t)) for g in TYPE_GLOBS + MORE_TYPE_GLOBS for t in TYPE_NAMES]
    cases += [(g, "/", a, compile_alias_glob(g).matches(a)) for g in ALIAS_GLOBS + MORE_ALIAS_GLOBS for a in ALIASES]
    rows = await store.pool.fetch(
        "SELECT n, x ~ r AS hit FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS c(x, r, n)",
        [x for _, _, x, _ in cases],
        [glob_regex(g, sep) for g, sep, _, _ in cases],
    )
    wrong = [(cases[r["n"] - 1], r["hit"]) for r in rows if r["hit"] is not cases[r["n"] - 1][3]]
    assert not wrong, wrong[:20]


async def test_a_deleted_listener_leaves_routing_with_its_probes_and_the_paths_only_it_probed_by(
    platform: Platform,
) -> None:
    store = platform.store
    assert isinstance(store, PostgresStore)

    def body(name: str, flt: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "filter": flt, "action": {"type": "workflow", "workflow": "w"}}

    async def paths() -> list[str]:
        return sorted(r["path"] for r in await store.pool.fetch("SELECT path FROM orchestrator.listener_probe_paths"))

    async def probes(name: str) -> int:
        return int(await store.pool.fetchval("SELECT count(*) FROM orchestrator.listener_probes WHERE name = $1", name))

    await store.save_listener("by_n", body("by_n", {"where": [{"path": "data.n", "op": "eq", "value": 1}]}), 0)
    await store.save_listener("by_s", body("by_s", {"where": [{"path": "data.s", "op": "eq", "value": "x"}]}), 0)
    await store.save_listener("also_n", body("also_n", {"where": [{"path": "data.n", "op": "in", "value": [2]}]}), 0)
    await store.save_listener("plain", body("plain", {"types": ["app.*"]}), 0)
    assert await paths() == ["data.n", "data.s"]

    await store.delete_listener("by_s")
    assert await paths() == ["data.n"], "data.s was by_s's alone"
    await store.delete_listener("by_n")
    assert await paths() == ["data.n"], "also_n still probes by data.n"
    assert await probes("by_n") == await probes("by_s") == 0 and await probes("also_n") > 0
    await store.delete_listener("also_n")
    assert await paths() == [], "no listener left probes by a value: plain events are found once per type again"

    # Saved again after its deletion: it routes by its new version alone.
    await store.save_listener("by_n", body("by_n", {"where": [{"path": "data.s", "op": "eq", "value": "y"}]}), 0)
    assert await paths() == ["data.s"]
    session_id = (await platform.command({"command": "open_session"}))["session"]["id"]
    for n, data in enumerate([{"n": 1, "s": "x"}, {"n": 2, "s": "y"}]):
        await _write(store, session_id, {"type": "app.thing", "source": {}, "depth": 0, "data": data}, n)
    expected = await _python_routes(store, session_id)
    got = await _sql_routes(store, session_id)
    assert got == expected
    first = min(min(ids) for ids in got.values())
    assert {listener: ids for (listener, _), ids in got.items()} == {"plain": [first, first + 1], "by_n": [first + 1]}


async def test_a_listener_saved_again_after_its_deletion_takes_nothing_committed_before_it(
    platform: Platform,
) -> None:
    store = platform.store
    assert isinstance(store, PostgresStore)

    def body(flt: dict[str, Any]) -> dict[str, Any]:
        return {"name": "back", "filter": flt, "action": {"type": "workflow", "workflow": "w"}}

    await store.save_listener("back", body({"types": ["app.*"]}), 0)
    session_id = (await platform.command({"command": "open_session"}))["session"]["id"]
    # Committed while its first life took them, never routed: an event of its type and its own lane's silence.
    await _write(store, session_id, {"type": "app.thing", "source": {}, "depth": 0, "data": {}}, 0)
    idle = {"listener": "back", "lane": "_", "after_seconds": 60, "last_event_id": 0}
    await _write(store, session_id, {"type": "lane.idle", "source": {}, "depth": 0, "data": idle}, 1)
    await store.delete_listener("back")
    await store.save_listener("back", body({"types": ["app.*"]}), 0)
    assert [v["version"] for v in await store.listener_versions() if v["name"] == "back"] == [2]
    assert await _python_routes(store, session_id) == {}
    assert await _sql_routes(store, session_id) == {}, "its first life's versions take nothing"

    await _write(store, session_id, {"type": "app.thing", "source": {}, "depth": 0, "data": {}}, 2)
    got = await _sql_routes(store, session_id)
    assert got == await _python_routes(store, session_id)
    newest = await store.pool.fetchval("SELECT max(id) FROM orchestrator.events WHERE session_id = $1", session_id)
    assert got == {("back", "_"): [newest]}
    # A process that compiles missing rules at its start leaves the first life's version without one.
    async with store.pool.acquire() as conn:
        assert await compile_missing_rules(conn) == 0
    assert await store.pool.fetchval(
        "SELECT array_agg(version) FROM orchestrator.listener_rules WHERE name = 'back'"
    ) == [2]


def _often(description: str) -> dict[str, Any]:
    return {
        "name": "often",
        "description": description,
        "filter": {"types": ["app.*"]},
        "action": {"type": "workflow", "workflow": "w"},
    }


async def _probes_by_version(store: PostgresStore) -> dict[int, int]:
    rows = await store.pool.fetch(
        "SELECT version, count(*) AS n FROM orchestrator.listener_probes WHERE name = 'often' GROUP BY version ORDER"
        " BY version"
    )
    return {r["version"]: r["n"] for r in rows}


async def _routed_versions(store: PostgresStore, session_id: str) -> list[int]:
    await _sql_routes(store, session_id)
    rows = await store.pool.fetch(
        "SELECT q.version FROM orchestrator.lane_events q JOIN orchestrator.lanes l ON l.id = q.lane_id"
        " WHERE l.session_id = $1 AND l.listener = 'often' ORDER BY q.event_id",
        session_id,
    )
    return [r["version"] for r in rows]


async def _prune(store: PostgresStore) -> int:
    """The router's upkeep twice: a mark, then the pruning (no transaction is open here)."""
    pruning = ProbePruning(store.pool)
    assert await pruning() == 0, "the first call only marks"
    return await pruning()


THING = {"type": "app.thing", "source": {}, "depth": 0, "data": {}}


async def test_a_superseded_version_leaves_routing_once_no_event_waits_for_it(platform: Platform) -> None:
    store = platform.store
    assert isinstance(store, PostgresStore)
    await store.save_listener("often", _often("v1"), 0)
    session_id = (await platform.command({"command": "open_session"}))["session"]["id"]
    await _write(store, session_id, THING, 0)  # committed under v1, not routed yet
    await store.save_listener("often", _often("v2"), 0)
    assert set(await _probes_by_version(store)) == {1, 2}

    assert await _prune(store) == 0, "an event committed under v1 waits to be routed"
    assert await _routed_versions(store, session_id) == [1]
    assert await _prune(store) > 0
    assert set(await _probes_by_version(store)) == {2}, "no event left for v1: its probes went, v2's stayed"

    await _write(store, session_id, THING, 1)
    assert await _routed_versions(store, session_id) == [1, 2]
    await store.save_listener("often", _often("v3"), 3600)  # takes effect in an hour: v2 has not ended
    assert await _prune(store) == 0
    assert set(await _probes_by_version(store)) == {2, 3}


async def test_a_superseded_version_stays_while_a_transaction_that_wrote_under_it_is_open(
    platform: Platform,
) -> None:
    store = platform.store
    assert isinstance(store, PostgresStore)
    await store.save_listener("often", _often("v1"), 0)
    session_id = (await platform.command({"command": "open_session"}))["session"]["id"]
    pruning = ProbePruning(store.pool)
    async with store.pool.acquire() as conn:
        writing = conn.transaction()
        await writing.start()
        await conn.execute(
            "WITH e AS (INSERT INTO orchestrator.events (id, session_id, type, source, depth, data)"
            " VALUES (nextval('orchestrator.event_ids'::regclass), $1, 'app.thing', '{}', 0, '{}') RETURNING id)"
            " UPDATE orchestrator.sessions SET last_event_id = (SELECT id FROM e) WHERE id = $1",
            session_id,
        )
        await store.save_listener("often", _often("v2"), 0)  # v1 ends after the open transaction's write
        assert await pruning() == 0  # the mark: the open transaction is below its id
        assert await pruning() == 0, "the transaction is still open: nothing pruned, the mark kept"
        assert set(await _probes_by_version(store)) == {1, 2}, "the open transaction may commit an event of v1"
        await writing.commit()
    assert await pruning() == 0, "its event is committed now and not yet routed"
    assert await _routed_versions(store, session_id) == [1]
    assert await _prune(store) > 0
    assert set(await _probes_by_version(store)) == {2}


async def test_a_superseded_version_stays_for_a_writer_older_than_the_save_that_ended_it(platform: Platform) -> None:
    store = platform.store
    assert isinstance(store, PostgresStore)
    await store.save_listener("often", _often("v1"), 0)
    session_id = (await platform.command({"command": "open_session"}))["session"]["id"]
    pruning = ProbePruning(store.pool)
    async with store.pool.acquire() as writer, store.pool.acquire() as saver:
        writing, saving = writer.transaction(), saver.transaction()
        await writing.start()
        await writer.execute(
            "WITH e AS (INSERT INTO orchestrator.events (id, session_id, type, source, depth, data)"
            " VALUES (nextval('orchestrator.event_ids'::regclass), $1, 'app.thing', '{}', 0, '{}') RETURNING id)"
            " UPDATE orchestrator.sessions SET last_event_id = (SELECT id FROM e) WHERE id = $1",
            session_id,
        )
        # v2's save, as `save_listener` makes it, still open when the pruner marks: it commits after the mark, so
        # every transaction that ended before the mark's id is not a sign that the writer has.
        await saving.start()
        effective_at = await saver.fetchval(
            "INSERT INTO orchestrator.listener_versions (name, version, body, effective_at)"
            " VALUES ('often', 2, $1, clock_timestamp()) RETURNING effective_at",
            _often("v2"),
        )
        await saver.execute("UPDATE orchestrator.listeners SET version = 2 WHERE name = 'often'")
        await save_rule(saver, "often", 2, effective_at, _often("v2"))
        assert await pruning() == 0  # the mark
        await saving.commit()
        assert await pruning() == 0, "the writer is still open"
        assert set(await _probes_by_version(store)) == {1, 2}
        await writing.commit()
    assert await pruning() == 0, "its event waits to be routed"
    assert await _routed_versions(store, session_id) == [1]
