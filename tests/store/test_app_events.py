"""The application's own events, many writes in one request, and the graph, through the command surface.

Declared types are kept and checked; an emit of an undeclared type or of data outside its schema is refused
naming the field and writes nothing; `emit_events`, `write_objects` and `post_thread_items` are all or none
and name the failing item; `update_graph` is guarded by `if_rev` and writes one `graph.changed` naming the
nodes it changed; every write records the request that caused it.
"""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from orchestrator.platform import Platform
from tests.store.helpers import all_events, ok, refused

TICKET = {
    "name": "ticket.escalated",
    "schema": {
        "type": "object",
        "properties": {"priority": {"type": "integer"}, "queue": {"type": "string"}},
        "required": ["priority"],
        "additionalProperties": False,
    },
    "description": "a ticket was escalated",
}


async def _session(platform: Platform) -> str:
    return str((await ok(platform, "open_session"))["session"]["id"])


async def test_a_declared_type_is_kept_and_its_events_carry_their_data_whole(platform: Platform) -> None:
    saved = await ok(platform, "save_event_type", **TICKET)
    assert saved["event_type"]["name"] == "ticket.escalated"
    assert (await ok(platform, "get_event_type", name="ticket.escalated"))["event_type"]["schema"] == TICKET["schema"]
    assert [t["name"] for t in (await ok(platform, "list_event_types"))["event_types"]] == ["ticket.escalated"]
    sid = await _session(platform)
    emitted = await ok(
        platform,
        "emit_event",
        session_id=sid,
        type="ticket.escalated",
        data={"priority": 2, "queue": "vip"},
        client="w",
    )
    [event] = await all_events(platform, sid)
    assert event["id"] == emitted["event_id"]
    assert event["type"] == "ticket.escalated" and event["data"] == {"priority": 2, "queue": "vip"}
    assert event["source"] == {"client": "w"} and event["depth"] == 0
    # An emit retried with its key finds the first event.
    again = await ok(
        platform, "emit_event", session_id=sid, type="ticket.escalated", data={"priority": 2}, idempotency_key="k1"
    )
    twice = await ok(
        platform, "emit_event", session_id=sid, type="ticket.escalated", data={"priority": 2}, idempotency_key="k1"
    )
    assert again["event_id"] == twice["event_id"]
    # A key the session holds for another write is refused, named as this command's own field.
    await ok(platform, "write_object", session_id=sid, alias="q/1", value={"type": "x"}, idempotency_key="k-w")
    reused = await refused(
        platform,
        "invalid_request",
        "idempotency_key: this key names another write",
        "emit_event",
        session_id=sid,
        type="ticket.escalated",
        data={"priority": 1},
        idempotency_key="k-w",
    )
    assert reused["message"].startswith("idempotency_key: "), reused


async def test_an_undeclared_type_or_data_outside_its_schema_is_refused_and_nothing_is_written(
    platform: Platform,
) -> None:
    await ok(platform, "save_event_type", **TICKET)
    sid = await _session(platform)
    await refused(platform, "invalid_request", "type", "emit_event", session_id=sid, type="ticket.closed", data={})
    # A typo is told the type it most likely meant; a name like none is told to declare it.
    typo = await refused(
        platform, "invalid_request", "type", "emit_event", session_id=sid, type="ticket.escalatd", data={}
    )
    assert typo["message"] == "type: 'ticket.escalatd' is not a declared event type; did you mean 'ticket.escalated'?"
    events = [{"type": "ticket.escalated", "data": {"priority": 1}}, {"type": "invoice.paid", "data": {}}]
    unlike = await refused(platform, "invalid_request", "events.1.type", "emit_events", session_id=sid, events=events)
    assert unlike["message"].endswith("is not a declared event type; declare it first (save_event_type)"), unlike
    await refused(
        platform,
        "invalid_request",
        "data.priority",
        "emit_event",
        session_id=sid,
        type="ticket.escalated",
        data={"priority": "high"},
    )
    await refused(
        platform, "invalid_request", "data", "emit_event", session_id=sid, type="ticket.escalated", data={"queue": "x"}
    )
    await refused(
        platform,
        "invalid_request",
        "data",
        "emit_event",
        session_id=sid,
        type="ticket.escalated",
        data={"priority": 1, "extra": True},
    )
    assert await all_events(platform, sid) == []


async def test_emit_events_is_all_or_none_and_names_the_failing_event(platform: Platform) -> None:
    await ok(platform, "save_event_type", **TICKET)
    sid = await _session(platform)
    good = {"type": "ticket.escalated", "data": {"priority": 1}}
    reply = await refused(
        platform,
        "invalid_request",
        "events.2.data.priority",
        "emit_events",
        session_id=sid,
        events=[good, good, {"type": "ticket.escalated", "data": {"priority": "x"}}],
    )
    assert reply["message"].startswith("events.2.data.priority")
    assert await all_events(platform, sid) == []
    emitted = await ok(platform, "emit_events", session_id=sid, events=[good] * 3)
    assert [e["id"] for e in await all_events(platform, sid)] == emitted["event_ids"]
    over = platform.settings.limits.max_writes_per_request + 1
    await refused(platform, "limit_exceeded", "events", "emit_events", session_id=sid, events=[good] * over)


async def test_emit_events_draws_ids_in_order_and_writes_each_key_once(platform: Platform) -> None:
    await ok(platform, "save_event_type", **TICKET)
    sid = await _session(platform)
    many = [{"type": "ticket.escalated", "data": {"priority": n}} for n in range(1000)]
    ids = (await ok(platform, "emit_events", session_id=sid, events=many))["event_ids"]
    assert ids == sorted(ids) and len(set(ids)) == 1000
    stored = await all_events(platform, sid)
    assert [(e["id"], e["data"]["priority"]) for e in stored] == list(zip(ids, range(1000), strict=True))
    # A key the session holds answers its event; a key given twice in one call writes once.
    keyed = [
        {"type": "ticket.escalated", "data": {"priority": 1}, "idempotency_key": "a"},
        {"type": "ticket.escalated", "data": {"priority": 2}, "client": "w"},
        {"type": "ticket.escalated", "data": {"priority": 3}, "idempotency_key": "a"},
        {"type": "ticket.escalated", "data": {"priority": 4}, "idempotency_key": "b"},
    ]
    first = (await ok(platform, "emit_events", session_id=sid, events=keyed))["event_ids"]
    assert first[0] == first[2] and first[0] < first[1] < first[3]
    again = (await ok(platform, "emit_events", session_id=sid, events=keyed))["event_ids"]
    assert again[0] == again[2] == first[0] and again[3] == first[3] and again[1] > first[3]
    after = (await ok(platform, "list_session_events", session_id=sid, after=ids[-1], limit=1000))["events"]
    written = {e["id"]: e for e in after}
    assert len(written) == 3 + 1
    assert written[first[0]]["data"] == {"priority": 1} and written[first[1]]["source"] == {"client": "w"}


DRAFT_7 = "http://json-schema.org/draft-07/schema#"


async def test_a_bad_type_declaration_is_refused_naming_the_field(platform: Platform) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({**TICKET, "name": "object.escalated"}, "name"),
        ({**TICKET, "name": "Ticket"}, "name"),
        ({**TICKET, "schema": {"type": "objekt"}}, "schema"),
        ({**TICKET, "schema": "not a schema"}, "schema"),
        ({**TICKET, "schema": {"properties": {"a": {"type": "string"}}, "padding": "x" * 70_000}}, "schema"),
        ({**TICKET, "allow": "emit:*"}, "allow"),
        # References lead somewhere inside the schema, and never round to where they began on the same value.
        ({**TICKET, "schema": {"$ref": "#/definitions/nope"}}, "schema"),
        ({**TICKET, "schema": {"$ref": "http://example.com/ticket.json"}}, "schema"),
        ({**TICKET, "schema": {"$ref": "#"}}, "schema"),
        ({**TICKET, "schema": {"type": "object", "properties": {"a": {"$ref": "#/properties/a"}}}}, "schema"),
        (
            {**TICKET, "schema": {"$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}]}, "b": {"$ref": "#/$defs/a"}}}},
            "schema",
        ),
        ({**TICKET, "schema": {"dependentSchemas": {"a": {"$ref": "#"}}}}, "schema"),
        (
            {**TICKET, "schema": {"$schema": DRAFT_7, "$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}},
            "schema",
        ),
        ({**TICKET, "schema": {"$schema": 5}}, "schema"),
    ]
    for body, field in cases:
        await refused(platform, "invalid_request", field, "save_event_type", **body)
    assert (await ok(platform, "list_event_types"))["event_types"] == []


async def test_a_schema_that_refers_to_itself_through_the_value_holds_a_tree(platform: Platform) -> None:
    node = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}, "required": ["kids"]}
    await ok(platform, "save_event_type", name="tree.grown", schema=node)
    sid = await _session(platform)
    tree = {"kids": [{"kids": []}, {"kids": [{"kids": []}]}]}
    await ok(platform, "emit_event", session_id=sid, type="tree.grown", data=tree)
    await refused(
        platform,
        "invalid_request",
        "data.kids.1.kids.0",
        "emit_event",
        session_id=sid,
        type="tree.grown",
        data={"kids": [{"kids": []}, {"kids": [{}]}]},
    )


async def test_a_type_saved_with_a_reference_that_leads_nowhere_refuses_its_events_naming_data(
    platform: Platform, fresh_db: str
) -> None:
    """A type saved before references were checked (written here as an earlier release would have) holds no
    event, and says so: its emit answered internal_error, and fetched a remote reference from the network."""
    conn = await asyncpg.connect(fresh_db)
    try:
        await conn.execute(
            "INSERT INTO orchestrator.event_types (name, schema)"
            " VALUES ('old.nowhere', $1::jsonb), ('old.loop', $2::jsonb)",
            json.dumps({"$ref": "http://example.com/old.json"}),
            json.dumps({"$ref": "#"}),
        )
    finally:
        await conn.close()
    sid = await _session(platform)
    for name in ("old.nowhere", "old.loop"):
        await refused(platform, "invalid_request", "data", "emit_event", session_id=sid, type=name, data={"a": 1})
    assert not (await ok(platform, "list_session_events", session_id=sid))["events"]


async def test_write_objects_and_post_thread_items_are_all_or_none(platform: Platform) -> None:
    sid = await _session(platform)
    await ok(platform, "write_object", session_id=sid, alias="a/2", value={"type": "t"})
    before = await all_events(platform, sid)
    objects = [
        {"alias": "a/1", "value": {"type": "t"}},
        {"alias": "a/2", "value": {"type": "t"}, "if_rev": 5},
        {"alias": "a/3", "value": {"type": "t"}},
    ]
    reply = await refused(
        platform, "rev_conflict", "objects.1.if_rev", "write_objects", session_id=sid, objects=objects
    )
    assert "1" in reply["message"]
    assert await all_events(platform, sid) == before
    await refused(platform, "not_found", "alias", "read_object", session_id=sid, alias="a/1")
    objects[1]["if_rev"] = 1
    written = await ok(platform, "write_objects", session_id=sid, objects=objects)
    assert written["objects"] == [{"alias": "a/1", "rev": 1}, {"alias": "a/2", "rev": 2}, {"alias": "a/3", "rev": 1}]
    events = await all_events(platform, sid)
    assert [e["id"] for e in events[len(before) :]] == written["event_ids"]
    items = [{"type": "text", "role": "user", "message": "hi"}, {"type": "json", "message": {"a": [1, 2]}}]
    posted = await ok(platform, "post_thread_items", session_id=sid, alias="chat/1", items=items)
    listed = (await ok(platform, "list_thread_items", session_id=sid, alias="chat/1"))["items"]
    assert [i["id"] for i in listed] == [i["id"] for i in posted["items"]]
    assert listed[1]["message"] == {"a": [1, 2]}
    await refused(
        platform,
        "invalid_request",
        "items.1.message",
        "post_thread_items",
        session_id=sid,
        alias="chat/1",
        items=[{"type": "text", "message": "ok"}, {"type": "text", "message": {"not": "text"}}],
    )
    assert len((await ok(platform, "list_thread_items", session_id=sid, alias="chat/1"))["items"]) == 2


async def test_a_listener_path_no_declared_type_can_hold_is_refused_at_save(platform: Platform) -> None:
    await ok(platform, "save_event_type", **TICKET)

    def body(**more: Any) -> dict[str, Any]:
        return {
            "name": "escalations",
            "filter": {"types": ["ticket.*"]},
            "action": {"type": "object", "alias": "out/x", "value": {"type": "x"}},
            **more,
        }

    where = {"filter": {"types": ["ticket.*"], "where": [{"path": "data.urgency", "op": "eq", "value": 1}]}}
    await refused(platform, "invalid_request", "listener.filter.where.0.path", "save_listener", listener=body(**where))
    keyed = {"concurrency": {"mode": "keyed", "key": "data.priority"}}
    await ok(platform, "save_listener", listener=body(**keyed))
    await refused(
        platform,
        "invalid_request",
        "listener.batch.distinct_by",
        "save_listener",
        listener=body(batch={"distinct_by": "data.queue.name"}),
    )


async def test_update_graph_is_guarded_by_if_rev_and_names_the_nodes_it_changed(platform: Platform) -> None:
    sid = await _session(platform)
    patch = {
        "nodes": {"m1": {"type": "mission"}, "m2": {"type": "mission"}},
        "edges": {"add": [{"from": "m1", "to": "m2"}]},
    }
    first = await ok(platform, "update_graph", session_id=sid, patch=patch, if_rev=0)
    assert first["graph"]["rev"] == 1 and first["graph"]["changed"] == ["m1", "m2"]
    await refused(
        platform,
        "rev_conflict",
        "if_rev",
        "update_graph",
        session_id=sid,
        patch={"nodes": {"m3": {"type": "mission"}}},
        if_rev=0,
    )
    await refused(
        platform,
        "invalid_request",
        "patch.edges.add.0.to",
        "update_graph",
        session_id=sid,
        patch={"edges": {"add": [{"from": "m1", "to": "nowhere"}]}},
    )
    await refused(
        platform,
        "invalid_request",
        "patch.nodes.m9",
        "update_graph",
        session_id=sid,
        patch={"nodes": {"m9": {"no": "type"}}},
    )
    graph = (await ok(platform, "read_graph", session_id=sid))["graph"]
    assert graph["rev"] == 1 and set(graph["nodes"]) == {"m1", "m2"} and graph["edges"] == [{"from": "m1", "to": "m2"}]
    # Removing a node takes its edges; the event names what changed: the node, and the one at its edge's other end.
    second = await ok(platform, "update_graph", session_id=sid, patch={"nodes": {"m2": None}}, if_rev=1)
    assert second["graph"] == {"rev": 2, "changed": ["m1", "m2"]}
    assert (await ok(platform, "read_graph", session_id=sid, nodes=["m1"]))["graph"]["edges"] == []
    changed = [e for e in await all_events(platform, sid) if e["type"] == "graph.changed"]
    # SPEC 2: `graph` is the ids of the nodes the update changed.
    assert [e["graph"] for e in changed] == [["m1", "m2"], ["m1", "m2"]]
    assert [e["id"] for e in changed] == [first["event_id"], second["event_id"]]


async def test_an_edge_removed_and_added_by_one_patch_is_no_change(platform: Platform) -> None:
    """An edge is its ends and its type: one patch removing and adding it leaves the graph as it was, so no rev and
    no `graph.changed`; a removal of one edge and an addition of another beside it names only their nodes."""
    sid = await _session(platform)
    nodes = {"a": {"type": "t"}, "b": {"type": "t"}, "c": {"type": "t"}}
    first = await ok(platform, "update_graph", session_id=sid, patch={"nodes": nodes, "edges": {"add": [AB]}})
    same = await ok(platform, "update_graph", session_id=sid, patch={"edges": {"add": [AB], "remove": [AB]}})
    assert same["graph"] == {"rev": first["graph"]["rev"], "changed": []} and same["event_id"] is None
    moved = await ok(
        platform,
        "update_graph",
        session_id=sid,
        patch={"edges": {"remove": [AB], "add": [AB, {"from": "b", "to": "c"}]}},
    )
    assert moved["graph"]["changed"] == ["b", "c"]
    assert [e["graph"] for e in await all_events(platform, sid) if e["type"] == "graph.changed"] == [
        ["a", "b", "c"],
        ["b", "c"],
    ]


AB = {"from": "a", "to": "b"}


async def test_every_write_records_the_request_that_caused_it(platform: Platform) -> None:
    await ok(platform, "save_event_type", **TICKET)
    sid = await _session(platform)
    await ok(platform, "write_object", session_id=sid, alias="a/1", value={"type": "t"}, client="ui")
    await ok(platform, "post_thread_item", session_id=sid, alias="c/1", item={"type": "text", "message": "hi"})
    await ok(
        platform, "emit_events", session_id=sid, events=[{"type": "ticket.escalated", "data": {"priority": 1}}] * 2
    )
    await ok(platform, "update_graph", session_id=sid, patch={"nodes": {"n": {"type": "t"}}})
    events = await all_events(platform, sid)
    assert all(set(e["cause"]) == {"request"} for e in events), events
    assert events[0]["cause"]["request"]["client"] == "ui"
    # One request, one cause: the two events of one emit_events share it; separate requests do not.
    ids = [e["cause"]["request"]["id"] for e in events]
    assert ids[2] == ids[3] and len(set(ids)) == 4


async def test_a_deleted_type_keeps_its_events_refuses_new_ones_and_never_strands_a_listener(
    platform: Platform,
) -> None:
    await ok(platform, "save_event_type", **TICKET)
    await ok(platform, "save_event_type", name="ticket.closed", schema={"type": "object"})
    sid = await _session(platform)
    await ok(platform, "emit_event", session_id=sid, type="ticket.escalated", data={"priority": 1})
    only = {"name": "only", "filter": {"types": ["ticket.escalated"]}, "action": {"type": "workflow", "workflow": "w"}}
    both = {"name": "both", "filter": {"types": ["ticket.*"]}, "action": {"type": "workflow", "workflow": "w"}}
    await ok(platform, "save_listener", listener=only)
    await ok(platform, "save_listener", listener=both)

    reply = await refused(platform, "invalid_request", "name", "delete_event_type", name="ticket.escalated")
    assert "'only'" in reply["message"] and "'both'" not in reply["message"], reply
    assert (await ok(platform, "get_event_type", name="ticket.escalated"))["event_type"]["name"] == "ticket.escalated"

    await ok(platform, "delete_listener", name="only")
    gone = (await ok(platform, "delete_event_type", name="ticket.escalated"))["event_type"]
    assert gone["name"] == "ticket.escalated" and gone["description"] == TICKET["description"], gone
    await refused(platform, "not_found", "name", "get_event_type", name="ticket.escalated")
    await refused(platform, "not_found", "name", "delete_event_type", name="ticket.escalated")
    await refused(platform, "invalid_request", "type", "emit_event", session_id=sid, type="ticket.escalated", data={})
    assert [e["type"] for e in await all_events(platform, sid)] == ["ticket.escalated"], "its events stay"


async def test_a_listener_stranded_already_does_not_refuse_the_deletion_of_another_type(
    platform: Platform, fresh_db: str
) -> None:
    """Only a glob the deletion itself would leave matching nothing refuses it: a listener that matches nothing
    already (its type gone another way) is not the deleted type's, and must not block every deletion after."""
    await ok(platform, "save_event_type", name="order.noted", schema={"type": "object"})
    await ok(platform, "save_event_type", name="zz.one", schema={"type": "object"})
    noted = {"name": "thr", "filter": {"types": ["order.noted"]}, "action": {"type": "workflow", "workflow": "w"}}
    await ok(platform, "save_listener", listener=noted)
    # Stranded below the commands (as an older release's plan left it).
    conn = await asyncpg.connect(fresh_db)
    try:
        await conn.execute("DELETE FROM orchestrator.event_types WHERE name = 'order.noted'")
    finally:
        await conn.close()

    assert (await ok(platform, "delete_event_type", name="zz.one"))["event_type"]["name"] == "zz.one"


async def test_a_type_only_a_cancel_on_names_is_not_deleted_from_under_it(platform: Platform) -> None:
    """A `cancel_on` watch that names a type is stranded by its deletion as a filter is: refused, naming where."""
    await ok(platform, "save_event_type", name="order.cancelled", schema={"type": "object"})
    watched = {
        "name": "fulfil",
        "filter": {"types": ["object.written"]},
        "concurrency": {"mode": "keyed", "key": "alias"},
        "action": {"type": "workflow", "workflow": "w"},
        "cancel_on": [{"types": ["order.cancelled"]}],
    }
    await ok(platform, "save_listener", listener=watched)
    reply = await refused(platform, "invalid_request", "name", "delete_event_type", name="order.cancelled")
    assert "'fulfil' (cancel_on.0.types.0)" in reply["message"], reply


async def test_a_schema_that_takes_no_object_is_refused_naming_its_type(platform: Platform) -> None:
    """An event's data is a JSON object: a type whose schema takes none could never be emitted (SPEC 12, 15)."""
    for kinds in ("string", ["array", "null"]):
        reply = await refused(platform, "invalid_request", None, "save_event_type", name="t.x", schema={"type": kinds})
        assert reply["message"] == "schema.type: an event's data is a JSON object: the schema's type must take 'object'"
    assert (await platform.command({"command": "get_event_type", "name": "t.x"}))["error"] == "not_found"
    await ok(platform, "save_event_type", name="t.x", schema={"type": ["object", "null"]})


async def test_a_schema_that_would_leave_a_saved_listener_reading_a_path_it_never_holds_is_refused(
    platform: Platform,
) -> None:
    """SPEC 12 and 15: a path the schema can never hold is refused at save, and a save refuses what can never fire;
    so is a type's new schema that would leave a saved listener so (it was saved, and the listener never fired)."""
    closed = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False}
    await ok(platform, "save_event_type", name="order.placed", schema=closed)
    watch = {
        "name": "big_orders",
        "filter": {"types": ["order.placed"], "where": [{"path": "data.a", "op": "gt", "value": 1}]},
        "action": {"type": "workflow", "workflow": "w"},
    }
    await ok(platform, "save_listener", listener=watch)
    narrowed = {**closed, "properties": {"b": {"type": "integer"}}}
    reply = await refused(
        platform, "invalid_request", "schema", "save_event_type", name="order.placed", schema=narrowed
    )
    assert reply["message"].startswith("schema: listener 'big_orders' (listener.filter.where.0.path:"), reply
    assert (await ok(platform, "get_event_type", name="order.placed"))["event_type"]["schema"] == closed
    # A schema that still holds the path, or one the listener no longer reads, is saved.
    await ok(platform, "save_event_type", name="order.placed", schema={**closed, "properties": {"a": {}, "b": {}}})
    await ok(platform, "delete_listener", name="big_orders")
    await ok(platform, "save_event_type", name="order.placed", schema=narrowed)


async def test_a_simulation_of_a_range_that_ends_before_it_starts_is_refused(platform: Platform) -> None:
    """As `redeliver`'s is: `before` at or below `after` holds no event, and was answered as a stream with none."""
    sid = await _session(platform)
    listener = {"name": "x", "filter": {"types": ["object.written"]}, "action": {"type": "workflow", "workflow": "w"}}
    for before in (3, 5):
        await refused(
            platform, "invalid_request", "before", "simulate_listener", session_id=sid, listener=listener, after=5,
            before=before,
        )  # fmt: skip
    await ok(platform, "simulate_listener", session_id=sid, listener=listener, after=5, before=6)
