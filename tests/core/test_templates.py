"""Templates: whole-value holes keep their type, inline holes become text, unknown paths fail."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.declaration import ListenerDeclaration, parse_declaration
from orchestrator.core.errors import CommandError
from orchestrator.core.events import message_of
from orchestrator.core.limits import Limits
from orchestrator.core.templates import (
    CONTEXT_FIELDS,
    ENVELOPE_ROOTS,
    TemplateError,
    batch_context,
    needs_envelopes,
    needs_messages,
    render,
    why_no_hole,
)

POSTED: dict[str, Any] = {
    "id": 4,
    "session_id": "s1",
    "type": "thread.item_posted",
    "alias": "chats/7",
    "item": {"id": "i9", "type": "request", "role": "user", "message": "hi"},
    "source": {},
    "depth": 0,
}
WRITTEN: dict[str, Any] = {"id": 2, "session_id": "s1", "type": "object.written", "alias": "cells/1"}
ENDED: dict[str, Any] = {
    "id": 3,
    "session_id": "s1",
    "type": "execution.ended",
    "execution": {"id": "e1", "workflow": "w", "status": "failed"},
}


def _context(entries: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A batch's context with its events whole (a template that names them), the messages from the events."""
    return batch_context(
        messages=[message_of(e) for e in entries],
        events=entries,
        retry=1,
        lane="chats/7",
        listener={"name": "answer", "version": 3},
        session={"id": "s1", "alias": "demo"},
        **extra,
    )


def test_the_batch_context() -> None:
    context = _context([WRITTEN, ENDED, POSTED])
    assert context["batch"]["first_id"] == 2 and context["batch"]["last_id"] == 4
    assert context["batch"]["count"] == 3 and context["batch"]["retry"] == 1
    assert context["batch"]["lane"] == "chats/7"
    assert context["batch"]["messages"] == [
        {"id": 2, "type": "object.written", "alias": "cells/1"},
        {"id": 3, "type": "execution.ended", "alias": None, "execution_id": "e1"},
        {"id": 4, "type": "thread.item_posted", "alias": "chats/7", "item_id": "i9"},
    ]
    assert context["event"] == POSTED and context["item"] == POSTED["item"]


def test_without_its_events_a_batch_renders_from_its_pointers_and_leaves_events_unknown() -> None:
    messages = [message_of(e) for e in (WRITTEN, POSTED)]
    context = batch_context(messages=messages, events=None, retry=0, lane="_", listener={}, session={})
    assert render("{{ batch.messages }}", context) == messages and render("{{ batch.count }}", context) == 2
    for path in ("batch.events", "event.alias", "item.id"):
        with pytest.raises(TemplateError):
            render("{{ " + path + " }}", context)


@pytest.mark.parametrize(
    ("template", "needs"),
    [
        ({"events": "{{ batch.messages }}"}, False),
        ("{{ batch.count }} {{ listener.name }}", False),
        ({"all": "{{ batch.events }}"}, True),
        ("{{ batch.events.0.alias }}", True),
        (["{{ event.alias }}"], True),
        ("{{ item.message }}", True),
        ("{{ batch }}", True),
        (None, False),
    ],
)
def test_a_template_needs_events_whole_only_when_it_names_them(template: Any, needs: bool) -> None:
    assert needs_envelopes(template) is needs


@pytest.mark.parametrize(
    ("template", "needs"),
    [
        ({"events": "{{ batch.messages }}"}, True),
        ("first {{ batch.messages.0.alias }}", True),
        ("{{ batch }}", True),
        ({"n": "{{ batch.count }}", "ids": ["{{ batch.first_id }}", "{{ batch.last_id }}"]}, False),
        ({"all": "{{ batch.events }}", "last": "{{ event.alias }}"}, False),
        ({"{{ batch.messages }}": "a dict key is not rendered"}, False),
        ("{{ listener.name }} {{ session.id }}", False),
        (None, False),
    ],
)
def test_a_run_carries_the_batchs_pointers_only_when_its_template_names_them(template: Any, needs: bool) -> None:
    assert needs_messages(template) is needs


def test_consumed_ids_widen_the_batch_span() -> None:
    context = _context([POSTED], consumed_ids=[1, 4])
    assert context["batch"]["first_id"] == 1 and context["batch"]["last_id"] == 4


def test_an_event_without_item_leaves_item_unknown() -> None:
    context = _context([WRITTEN])
    with pytest.raises(TemplateError) as caught:
        render("{{ item.id }}", context)
    assert caught.value.path == "item.id"


def test_an_empty_batch_has_no_context() -> None:
    with pytest.raises(ValueError):
        _context([])


def test_rendering_the_specification_example() -> None:
    context = _context([WRITTEN, POSTED])
    rendered = render({"events": "{{ batch.messages }}", "n": "{{batch.count}}"}, context)
    assert rendered == {"events": context["batch"]["messages"], "n": 2}


def test_inline_holes_are_text() -> None:
    context = _context([POSTED])
    template = "{{ listener.name }} saw {{ batch.count }} on {{ event.alias }}: {{ item }}"
    assert render(template, context) == (
        'answer saw 1 on chats/7: {"id":"i9","type":"request","role":"user","message":"hi"}'
    )


def test_containers_render_recursively_but_keys_do_not() -> None:
    rendered = render({"{{ x }}": ["{{ session.id }}", 3, None, True]}, _context([POSTED]))
    assert rendered == {"{{ x }}": ["s1", 3, None, True]}


@pytest.mark.parametrize(
    "template",
    ["{{ nothing }}", "a {{ batch.nope }} b", "{{ }}", ["{{ session.x }}"], "{{ batch.count.more }}"],
)
def test_unknown_paths_fail(template: Any) -> None:
    with pytest.raises(TemplateError):
        render(template, _context([POSTED]))


@pytest.mark.parametrize("text", ["{{ not closed", "plain", "{ { a } }", "__import__('os')"])
def test_text_without_holes_is_left_alone(text: str) -> None:
    assert render(text, {}) == text


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=10,
)


@given(value=_json.filter(lambda v: v is not None), spaces=st.sampled_from(["", " ", "  "]))
def test_whole_value_holes_keep_their_type(value: Any, spaces: str) -> None:
    rendered = render("{{" + spaces + "v" + spaces + "}}", {"v": value})
    assert type(rendered) is type(value)
    assert rendered == value


def test_message_of_agrees_with_the_event_model() -> None:
    from datetime import UTC, datetime

    from orchestrator.core.events import Event, EventItem

    event = Event(
        id=4,
        session_id="s1",
        type="thread.item_posted",
        alias="chats/7",
        item=EventItem(id="i9", type="request"),
        created_at=datetime(2025, 1, 1, tzinfo=UTC),
    )
    assert message_of(event.envelope()) == event.message()


def test_a_template_path_no_batch_of_the_listeners_types_can_hold_is_refused_at_save() -> None:
    def save(action: dict[str, Any], types: list[str]) -> None:
        parse_declaration({"name": "l", "filter": {"types": types}, "action": action}, Limits())

    written = {"type": "object", "alias": "views/{{ event.alais }}", "value": {"type": "v", "n": "{{ batch.count }}"}}
    with pytest.raises(CommandError, match=r"listener\.action\.alias: template path 'event\.alais' never resolves"):
        save(written, ["object.**"])
    item = {"type": "thread_item", "alias": "chats/1", "item": {"type": "text", "message": "{{ item.role }}"}}
    with pytest.raises(CommandError, match=r"listener\.action\.item: template path 'item\.role' never resolves"):
        save(item, ["object.**"])  # object events carry no item
    save(item, ["thread.item_posted"])
    deep = {"type": "workflow", "workflow": "w", "input": "{{ item.message.kind }} {{ event.item.message.a.b }}"}
    save(deep, ["thread.item_posted"])  # a json item's whole message is any value


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("batch.events.foo", "'batch.events' is a list: a path into it is an index first"),
        ("batch.events.0.nope", "no event has a field 'nope'"),
        ("batch.events.0.item.role", "no event of the listener's types (object.written) has 'item'"),
        ("batch.messages.0.nope", "a pointer of 'batch.messages' holds id, type, alias"),
        ("batch.messages.0.alias.x", "'batch.messages.0.alias' is a plain value"),
        ("batch.events.0.alias", None),
        ("batch.events.1.data.rev", None),
        ("batch.events.1.data.n", "the data of object.written holds data.rev"),
        ("batch.messages.0.item_id", None),
        ("batch.events", None),
    ],
)
def test_a_path_into_the_batchs_lists_is_checked_below_its_index(path: str, why: str | None) -> None:
    """Below `batch.events.N` is an envelope's path, below `batch.messages.N` a pointer's field: one that never
    resolves would end every batch `invocation_error`, so a save refuses it."""
    found = why_no_hole(path, ["object.written"])
    assert (found is None) if why is None else (found is not None and found.startswith(why)), found
    if why is not None:
        action = {"type": "workflow", "workflow": "w", "input": {"x": "{{ " + path + " }}"}}
        with pytest.raises(CommandError, match=r"listener\.action\.input: template path"):
            parse_declaration({"name": "l", "filter": {"types": ["object.written"]}, "action": action}, Limits())


def test_the_seeds_spelling_resolves_in_a_template_as_in_a_filter() -> None:
    context = _context([WRITTEN])
    assert render("{{ batch.events.0.object.alias }}", context) == "cells/1", "in the batch's events too"
    assert why_no_hole("batch.events.0.object.alias", ["object.**"]) is None
    assert render("{{ event.object.alias }}", context) == "cells/1"
    assert render("at {{ event.object.alias }}", context) == "at cells/1"
    assert why_no_hole("event.object.alias", ["object.**"]) is None


def test_the_seeds_spellings_stand_at_a_templates_root_for_the_last_event() -> None:
    """SPEC 2: templates accept `object.alias` and `execution.status`, as `where` does: at the root they read the
    batch's last event, and a path no event of the listener's types holds is refused at save as any other."""
    written = _context([WRITTEN])
    assert render({"a": "{{ object.alias }}", "t": "at {{ object.alias }}"}, written) == {
        "a": "cells/1",
        "t": "at cells/1",
    }
    context = _context([WRITTEN, ENDED])
    assert render({"s": "{{ execution.status }}", "w": "{{ execution.workflow }}"}, context) == {
        "s": "failed",
        "w": "w",
    }
    # An envelope leaves out what its event does not have: the last event about no alias fails the batch
    # (`invocation_error`), as `{{ event.alias }}` does; its pointer says `alias: null`.
    for path in ("object.alias", "event.object.alias", "event.alias"):
        with pytest.raises(TemplateError):
            render("{{ " + path + " }}", context)
    assert render("{{ batch.messages.1.alias }}", context) is None
    assert needs_envelopes("{{ object.alias }}") and needs_envelopes("{{ execution.status }}")
    assert why_no_hole("object.alias", ["object.**"]) is None
    assert why_no_hole("execution.status", ["execution.ended"]) is None
    assert why_no_hole("execution.status", ["object.written"]) is not None
    assert why_no_hole("object.rev", ["object.written"]) is not None
    with pytest.raises(CommandError, match=r"listener\.action\.input: template path 'execution\.status'"):
        action = {"type": "workflow", "workflow": "w", "input": "{{ execution.status }}"}
        parse_declaration({"name": "l", "filter": {"types": ["object.written"]}, "action": action}, Limits())
    unread = batch_context(
        messages=[message_of(WRITTEN)], events=None, retry=0, lane="_", listener={"name": "l", "version": 1}, session={}
    )
    with pytest.raises(TemplateError, match=r"object\.alias"):
        render("{{ object.alias }}", unread)


def test_a_lane_with_idle_may_template_its_own_lane_idle_event_and_graph_nodes_by_index() -> None:
    def save(**body: Any) -> None:
        parse_declaration({"name": "l", "action": {"type": "workflow", "workflow": "w"}, **body}, Limits())

    reads_idle = {"type": "workflow", "workflow": "w", "input": "{{ event.data.last_event_id }}"}
    with pytest.raises(CommandError, match=r"template path 'event\.data\.last_event_id'"):
        save(filter={"types": ["thread.item_posted"]}, action=reads_idle)
    save(filter={"types": ["thread.item_posted"]}, action=reads_idle, idle={"after_seconds": 60})
    save(
        filter={"types": ["graph.changed"]},
        action={"type": "workflow", "workflow": "w", "input": "{{ event.graph.nodes.0 }}"},
    )


def test_a_retry_of_no_attempts_is_refused_at_save_but_a_version_stored_with_one_still_reads() -> None:
    body = {"name": "l", "filter": {}, "action": {"type": "workflow", "workflow": "w"}, "retry": {"attempts": 0}}
    with pytest.raises(CommandError, match=r"listener\.retry\.attempts: 0 would repeat nothing"):
        parse_declaration(body, Limits())
    assert ListenerDeclaration.model_validate(body).retry is not None  # saved before the rule: still routed


def test_what_the_save_check_takes_a_batchs_context_to_hold_is_what_a_batch_context_holds() -> None:
    # The check at save lists the context's fields by hand: a field added to one and not the other would refuse
    # a path that renders, or take one that never does.
    context = _context([WRITTEN, POSTED], replay_of=2)
    assert {root: set(fields) for root, fields in CONTEXT_FIELDS.items()} == {
        root: set(context[root]) for root in CONTEXT_FIELDS
    }
    assert set(context) == {*CONTEXT_FIELDS, *ENVELOPE_ROOTS}


def test_a_null_that_is_there_renders_as_null_and_a_path_through_it_fails() -> None:
    """SPEC 3: a whole hole becomes the JSON value at its path, keeping its type; only a path the event lacks
    is an `invocation_error`."""
    noted = {**WRITTEN, "type": "app.noted", "data": {"note": None, "tags": [None, "a"]}}
    context = _context([noted])
    assert render({"n": "{{ event.data.note }}", "t": "{{ event.data.tags.0 }}"}, context) == {"n": None, "t": None}
    assert render("note: {{ event.data.note }}", context) == "note: null"
    for path in ("event.data.note.text", "event.data.missing", "event.data.tags.2"):
        with pytest.raises(TemplateError):
            render("{{ " + path + " }}", context)
