"""Filter matching: types, aliases, `where` ops on present and missing paths, and never waking oneself."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.core.declaration import ListenerDeclaration, ListenerFilter, WhereCondition, parse_declaration
from orchestrator.core.errors import CommandError
from orchestrator.core.filters import json_equal, listener_accepts, matches, mismatch
from orchestrator.core.limits import Limits

POSTED: dict[str, Any] = {
    "id": 5,
    "session_id": "s1",
    "type": "thread.item_posted",
    "alias": "chats/7",
    "item": {"id": "i1", "type": "request", "role": "user"},
    "source": {"client": "web"},
    "depth": 0,
    "created_at": "2025-01-01T00:00:00Z",
}
STARTED: dict[str, Any] = {"id": 6, "session_id": "s1", "type": "execution.started", "source": {}, "depth": 0}


def _where(path: str, op: str, value: Any = None) -> ListenerFilter:
    return ListenerFilter(where=[WhereCondition.model_validate({"path": path, "op": op, "value": value})])


def test_absent_types_and_aliases_match_everything() -> None:
    assert matches(ListenerFilter(), POSTED)
    assert matches(ListenerFilter(), STARTED)


def test_type_globs() -> None:
    assert matches(ListenerFilter(types=["thread.*"]), POSTED)
    assert not matches(ListenerFilter(types=["object.**"]), POSTED)
    assert matches(ListenerFilter(types=["object.**", "**.item_posted"]), POSTED)


def test_an_event_without_alias_matches_only_when_aliases_is_absent() -> None:
    assert not matches(ListenerFilter(aliases=["**"]), STARTED)
    assert matches(ListenerFilter(aliases=["**"]), POSTED)
    assert matches(ListenerFilter(aliases=["chats/*"]), POSTED)
    assert not matches(ListenerFilter(aliases=["missions/**"]), POSTED)


@pytest.mark.parametrize(
    ("path", "op", "value", "expected"),
    [
        ("item.role", "eq", "user", True),
        ("item.role", "eq", "system", False),
        ("item.role", "neq", "system", True),
        ("item.type", "in", ["request", "text"], True),
        ("item.type", "not_in", ["text", "thinking"], True),
        ("item.type", "not_in", ["request"], False),
        ("depth", "eq", False, False),
        ("depth", "eq", 0.0, True),
        ("id", "gt", 4, True),
        ("id", "gte", 5, True),
        ("id", "lt", 5, False),
        ("id", "lte", 5.5, True),
        ("alias", "gt", "chats/6", True),
        ("id", "gt", "4", False),
        ("item", "gt", 1, False),
        ("alias", "exists", True, True),
        ("alias", "exists", False, False),
        ("source", "eq", {"client": "web"}, True),
        ("alias", "prefix", "chats/", True),
        ("alias", "prefix", "", True),
        ("alias", "prefix", "chats/7/", False),
        ("alias", "prefix", "Chats/", False),
        ("id", "prefix", "5", False),
        ("item", "prefix", "i", False),
        ("alias", "contains", "ts/7", True),
        ("alias", "contains", "", True),
        ("alias", "contains", "7/", False),
        ("alias", "contains", 7, False),
        ("alias", "contains", ["chats/7"], False),
        ("id", "contains", 5, False),
        ("source", "contains", "client", False),
    ],
)
def test_where_on_present_paths(path: str, op: str, value: Any, expected: bool) -> None:
    assert matches(_where(path, op, value), POSTED) is expected


@pytest.mark.parametrize(
    ("op", "value", "expected"),
    [
        ("eq", "x", False),
        ("in", ["x"], False),
        ("gt", 0, False),
        ("gte", 0, False),
        ("lt", 0, False),
        ("lte", 0, False),
        ("exists", True, False),
        ("neq", "x", True),
        ("not_in", ["x"], True),
        ("exists", False, True),
        ("prefix", "", False),
        ("contains", "", False),
        ("contains", ["x"], False),
    ],
)
def test_a_missing_path_never_equals_anything(op: str, value: Any, expected: bool) -> None:
    assert matches(_where("source.client", op, value), STARTED) is expected


def test_all_conditions_must_hold() -> None:
    flt = ListenerFilter(
        where=[
            WhereCondition(path="item.role", op="eq", value="user"),
            WhereCondition(path="source.client", op="neq", value="web"),
        ]
    )
    assert not matches(flt, POSTED)


def test_json_equality_keeps_booleans_apart_from_numbers() -> None:
    assert not json_equal(True, 1)
    assert not json_equal([1], [True])
    assert json_equal({"a": [1, 2.0]}, {"a": [1.0, 2]})
    assert not json_equal("1", 1)


def test_a_listener_never_accepts_its_own_writes() -> None:
    action = {"type": "workflow", "workflow": "w"}
    body = {"name": "answer", "filter": {"types": ["thread.*"]}, "action": action}
    decl = parse_declaration(body, Limits())
    assert listener_accepts(decl, POSTED)
    assert not listener_accepts(decl, {**POSTED, "source": {"listener": "answer"}})
    assert listener_accepts(decl, {**POSTED, "source": {"listener": "other"}})


def test_a_mismatch_names_the_part_of_the_filter_at_fault() -> None:
    flt = ListenerFilter(
        types=["object.*"],
        aliases=["tickets/**"],
        where=[
            WhereCondition(path="depth", op="eq", value=0),
            WhereCondition(path="source.client", op="neq", value="importer"),
        ],
    )
    ticket = {"type": "object.written", "alias": "tickets/1", "depth": 0, "source": {}}
    assert mismatch(flt, ticket) is None
    assert mismatch(flt, {**ticket, "type": "thread.item_posted"}) == (
        "filter.types: 'thread.item_posted' is not among ['object.*']"
    )
    assert mismatch(flt, {**ticket, "alias": "chats/1"}) == "filter.aliases: 'chats/1' is not under ['tickets/**']"
    assert mismatch(flt, {"type": "object.written"}) == "filter.aliases: the event has no alias"
    assert mismatch(flt, {**ticket, "source": {"client": "importer"}}) == (
        "filter.where.1: source.client neq 'importer' does not hold (source.client is 'importer')"
    )
    assert mismatch(flt, {**ticket, "depth": None}) == "filter.where.0: depth eq 0 does not hold (depth is missing)"
    assert mismatch(flt, {k: v for k, v in ticket.items() if k != "depth"}) == (
        "filter.where.0: depth eq 0 does not hold (depth is missing)"
    )


def test_where_groups_hold_as_any_and_not_say() -> None:
    from orchestrator.core.declaration import ListenerFilter

    flt = ListenerFilter.model_validate(
        {
            "where": [
                {"any": [{"path": "data.n", "op": "eq", "value": 1}, {"path": "data.n", "op": "gt", "value": 5}]},
                {"not": {"path": "alias", "op": "in", "value": ["a/x"]}},
            ]
        }
    )
    assert matches(flt, {"data": {"n": 1}, "alias": "a/b"})
    assert matches(flt, {"data": {"n": 9}, "alias": "a/b"})
    assert not matches(flt, {"data": {"n": 3}, "alias": "a/b"})
    assert mismatch(flt, {"data": {"n": 3}, "alias": "a/b"}) == "filter.where.0: no condition of its any holds"
    assert mismatch(flt, {"data": {"n": 1}, "alias": "a/x"}) == "filter.where.1: its not holds"


def test_where_groups_nest_four_deep_at_most() -> None:
    import pydantic

    from orchestrator.core.declaration import ListenerFilter

    condition: dict[str, Any] = {"path": "alias", "op": "exists"}
    for _ in range(5):
        condition = {"not": condition}
    with pytest.raises(pydantic.ValidationError, match="nest at most 4 deep"):
        ListenerFilter.model_validate({"where": [condition]})


CHANGED: dict[str, Any] = {
    "type": "ticket.updated",
    "data": {"changed": ["priority", "title"], "doc": {"title": "50%_off\\"}},
}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("priority", True),
        ("title", True),
        ("prio", False),  # a member, never a part of one
        (["priority"], False),  # the list is not a member of itself
        (["priority", "title"], False),
        ({"priority": True}, False),
    ],
)
def test_a_list_contains_a_member_equal_to_the_value(value: Any, expected: bool) -> None:
    assert matches(_where("data.changed", "contains", value), CHANGED) is expected


def test_a_list_member_compares_as_json_values_compare() -> None:
    event = {"data": {"l": [1, True, {"k": [1.0]}, "1"]}}
    assert matches(_where("data.l", "contains", 1.0), event)
    assert matches(_where("data.l", "contains", {"k": [1]}), event)
    assert not matches(_where("data.l", "contains", False), event)
    assert not matches(_where("data.l", "contains", 2), event)
    assert not matches(_where("data.l", "contains", {"k": [True]}), event)


@pytest.mark.parametrize(
    ("op", "value", "expected"),
    [
        ("prefix", "50%", True),
        ("prefix", "5_%", False),  # as LIKE patterns `%` and `_` would match it
        ("prefix", "%", False),
        ("contains", "%_", True),
        ("contains", "0%", True),
        ("contains", "_", True),
        ("contains", "\\", True),
        ("contains", "%o", False),
        ("contains", "off\\", True),
        ("contains", "f_", False),
        ("contains", ".*", False),
    ],
)
def test_a_value_is_text_never_a_pattern(op: str, value: str, expected: bool) -> None:
    assert matches(_where("data.doc.title", op, value), CHANGED) is expected


def test_not_of_prefix_and_contains_holds_where_they_do_not_hold_missing_paths_and_other_kinds_too() -> None:
    def not_(op: str, value: Any, path: str = "alias") -> ListenerFilter:
        return ListenerFilter.model_validate({"where": [{"not": {"path": path, "op": op, "value": value}}]})

    assert not matches(not_("prefix", "chats/"), POSTED)
    assert matches(not_("prefix", "tickets/"), POSTED)
    assert matches(not_("prefix", "chats/"), STARTED), "no alias: prefix is false, so its not holds"
    assert matches(not_("contains", "x", "id"), POSTED), "a number contains nothing"
    assert not matches(not_("contains", "priority", "data.changed"), CHANGED)
    assert matches(not_("contains", "state", "data.changed"), CHANGED)
    # Present and not starting with it: `exists` beside the `not`.
    present = ListenerFilter.model_validate(
        {"where": [{"path": "alias", "op": "exists"}, {"not": {"path": "alias", "op": "prefix", "value": "x/"}}]}
    )
    assert matches(present, POSTED) and not matches(present, STARTED)


def test_a_mismatch_of_prefix_and_contains_says_what_was_found() -> None:
    assert mismatch(_where("alias", "prefix", "tickets/"), POSTED) == (
        "filter.where.0: alias prefix 'tickets/' does not hold (alias is 'chats/7')"
    )
    assert mismatch(_where("data.changed", "contains", "state"), CHANGED) == (
        "filter.where.0: data.changed contains 'state' does not hold (data.changed is ['priority', 'title'])"
    )


# The envelope leaves out a fraction that is zero, so as text `...:00.5Z` sorted before `...:00Z` ('.' < 'Z'), and
# an offset compared its local hour: a commit time compares as an instant.
@pytest.mark.parametrize(
    ("created_at", "op", "value", "expected"),
    [
        ("2026-12-06T14:00:00.500000Z", "gt", "2026-12-06T14:00:00Z", True),
        ("2026-12-06T14:00:00.500000Z", "lt", "2026-12-06T14:00:00Z", False),
        ("2026-12-06T14:00:00Z", "lt", "2026-12-06T14:00:00.000001Z", True),
        ("2026-12-06T14:00:00Z", "gte", "2026-12-06T14:00:00.000000Z", True),
        ("2026-12-06T14:00:00Z", "lte", "2026-12-06T15:00:00+01:00", True),
        ("2026-12-06T14:00:00Z", "gt", "2026-12-06T15:00:00+01:00", False),
        ("2026-12-06T14:00:00.250000Z", "lt", "2026-12-06T03:00:00-12:00", True),
        ("2026-12-06T14:00:00.250000Z", "gt", "2026-12-07T03:00:00.25+14:00", True),
        ("2026-12-06T14:00:00.250000Z", "gte", "2026-12-07T04:00:00.25+14:00", True),
    ],
)
def test_created_at_compares_as_an_instant(created_at: str, op: str, value: str, expected: bool) -> None:
    assert matches(_where("created_at", op, value), {**POSTED, "created_at": created_at}) is expected


@pytest.mark.parametrize(
    "value",
    [
        "2026-12-06",
        "2026-12-06T14:00Z",
        "2026-12-06T14:00:00",
        "2026-12-06 14:00:00Z",
        "2026-12-06T14:00:00.1234567Z",
        "2026-12-06T14:00:00+15:00",
        "2026-12-06T14:00:00+01:60",
        "2026-12-06T24:00:00Z",
        "2026-12-06T23:59:60Z",
        "2026-02-30T14:00:00Z",
        "2026-12-06T14:00:00Z\n",
        "yesterday",
        1765029600,
    ],
)
def test_an_ordering_of_created_at_takes_only_an_instant_with_a_zone(value: Any) -> None:
    with pytest.raises(ValueError, match="created_at compares with an instant"):
        WhereCondition.model_validate({"path": "created_at", "op": "gt", "value": value}, context={"limits": Limits()})
    # Other paths compare text or numbers as they always have, and `eq` on created_at is the envelope's text.
    WhereCondition.model_validate({"path": "data.at", "op": "gt", "value": value})
    WhereCondition.model_validate({"path": "created_at", "op": "eq", "value": value})


def test_an_ordering_of_created_at_saved_before_values_were_checked_compares_as_text() -> None:
    stored = WhereCondition.model_construct(path="created_at", op="gt", value="2026-02-30T00:00:00Z")
    assert matches(ListenerFilter(where=[stored]), {**POSTED, "created_at": "2026-03-01T00:00:00Z"})
    assert not matches(ListenerFilter(where=[stored]), {**POSTED, "created_at": "2026-02-29T00:00:00Z"})


def test_a_graph_change_names_its_nodes_as_a_list_and_graph_nodes_still_reads_it() -> None:
    """SPEC 2: `graph` is the ids of the nodes the update changed; `graph.nodes`, its spelling before, still reads
    them, in `where` and for `filter.aliases` (a graph change matches by its node ids)."""
    changed: dict[str, Any] = {"id": 7, "session_id": "s1", "type": "graph.changed", "graph": ["missions/1", "m2"],
                               "source": {}, "depth": 0, "data": {"rev": 2}}  # fmt: skip
    for path in ("graph.0", "graph.nodes.0"):
        assert matches(_where(path, "eq", "missions/1"), changed), path
    assert matches(_where("graph", "contains", "m2"), changed)
    assert matches(_where("graph.nodes", "contains", "m2"), changed)
    assert matches(ListenerFilter(types=["graph.changed"], aliases=["missions/**"]), changed)
    with pytest.raises(CommandError, match="a path into it is an index"):
        parse_declaration(
            {
                "name": "g",
                "filter": {"types": ["graph.changed"], "where": [{"path": "graph.rev", "op": "eq", "value": 1}]},
                "action": {"type": "workflow", "workflow": "w"},
            },
            Limits(),
        )


def test_a_stored_ordering_of_created_at_from_before_the_check_still_loads() -> None:
    """The check is of input (validated with a context): a body stored before it loads, and compares as text."""
    body = {"name": "old", "filter": {"where": [{"path": "created_at", "op": "gt", "value": "2026-01-01"}]},
            "action": {"type": "workflow", "workflow": "w"}}  # fmt: skip
    ListenerDeclaration.model_validate(body)
    with pytest.raises(CommandError, match="created_at compares with an instant"):
        parse_declaration(body, Limits())
