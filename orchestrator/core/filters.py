"""Whether an event envelope matches a listener's filter, and whether a listener accepts it.

Owns filter semantics (docs/listeners.md, "Where conditions"): type globs, alias globs, `where` conditions;
glob syntax is `globs.py`'s and path reading `paths.py`'s. "A missing path never equals anything" is taken
literally: on a missing path `eq`, `in`, the orderings, `prefix`, `contains` and `exists: true` are false, while
`neq`, `not_in` and `exists: false` are true (nothing is unequal to everything). Values compare as JSON values,
so `true` never equals `1`, and comparing things that have no order (a number with a string, a list) is false
rather than an error: a filter is evaluated against every event and must never raise. `prefix` and `contains`
hold only where they mean something (a string that starts with the string, a string that holds the substring,
a list with a member equal to the value) and are false on any other value, so a `not` of one holds on a missing
path and on a value of another kind too: `not` is plain negation, never a "present and not".
"""

from __future__ import annotations

import reprlib
from typing import Any

from orchestrator.core.declaration import (
    ListenerDeclaration,
    ListenerFilter,
    WhereAny,
    WhereCondition,
    WhereItem,
    WhereNot,
)
from orchestrator.core.envelope_paths import resolve_in_event
from orchestrator.core.globs import compile_alias_glob, compile_type_glob
from orchestrator.core.instants import INSTANT_PATH, instant_of
from orchestrator.core.paths import MISSING, json_equal

# How a mismatch shows a condition's value and the event's: a few hundred characters at most, whatever their size.
# The message is made for each event a filter refuses (`simulate_listener` reads up to 10,000), and writing out an
# `eq` of a 100,000-item list in each took 10 ms an event.
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxdict, _SHOWN.maxtuple = 3, 10, 10, 10
_SHOWN.maxstring, _SHOWN.maxlong, _SHOWN.maxother = 80, 40, 80


def _ordered(left: Any, right: Any) -> bool:
    if isinstance(left, bool) or isinstance(right, bool):
        return False
    numbers = isinstance(left, int | float) and isinstance(right, int | float)
    return numbers or (isinstance(left, str) and isinstance(right, str))


def _contains(found: Any, value: Any) -> bool:
    if isinstance(found, str):
        return isinstance(value, str) and value in found
    if isinstance(found, list):
        return any(json_equal(member, value) for member in found)
    return False


def condition_holds(condition: WhereCondition, envelope: dict[str, Any]) -> bool:
    """One `where` condition against an envelope; never raises."""
    found = resolve_in_event(envelope, condition.path)
    op, value = condition.op, condition.value
    if op == "exists":
        return (found is not MISSING) == bool(value)
    if found is MISSING:
        return op in ("neq", "not_in")
    if op == "eq":
        return json_equal(found, value)
    if op == "neq":
        return not json_equal(found, value)
    if op == "in":
        return any(json_equal(found, candidate) for candidate in value)
    if op == "not_in":
        return not any(json_equal(found, candidate) for candidate in value)
    if op == "prefix":
        return isinstance(found, str) and found.startswith(value)
    if op == "contains":
        return _contains(found, value)
    # A commit time compares with an instant as an instant (a value stored before that was checked, as text).
    at, since = (instant_of(found), instant_of(value)) if condition.path == INSTANT_PATH else (None, None)
    if at is not None and since is not None:
        found, value = at, since
    elif not _ordered(found, value):
        return False
    if op == "gt":
        return bool(found > value)
    if op == "gte":
        return bool(found >= value)
    if op == "lt":
        return bool(found < value)
    return bool(found <= value)


def matches(flt: ListenerFilter, envelope: dict[str, Any]) -> bool:
    """Whether the envelope passes the filter's types, aliases and every `where` condition."""
    return mismatch(flt, envelope) is None


def mismatch(flt: ListenerFilter, envelope: dict[str, Any]) -> str | None:
    """Which part of the filter the envelope fails, said as the field at fault (None: it passes)."""
    if flt.types is not None:
        event_type = envelope.get("type")
        if not isinstance(event_type, str) or not any(compile_type_glob(g).matches(event_type) for g in flt.types):
            return f"filter.types: {event_type!r} is not among {flt.types}"
    if flt.aliases is not None:
        places = aliases_of(envelope)
        if not places:
            return "filter.aliases: the event has no alias"
        if not any(compile_alias_glob(glob).matches(place) for glob in flt.aliases for place in places):
            shown = repr(places[0]) if len(places) == 1 else f"none of {places}"
            return f"filter.aliases: {shown} is not under {flt.aliases}"
    for index, item in enumerate(flt.where):
        if item_holds(item, envelope):
            continue
        if isinstance(item, WhereCondition):
            found = resolve_in_event(envelope, item.path)
            shown = "missing" if found is MISSING else _SHOWN.repr(found)
            value = _SHOWN.repr(item.value)
            return f"filter.where.{index}: {item.path} {item.op} {value} does not hold ({item.path} is {shown})"
        group = "no condition of its any" if isinstance(item, WhereAny) else "its not"
        return f"filter.where.{index}: {group} holds"
    return None


def item_holds(item: WhereItem, envelope: dict[str, Any]) -> bool:
    """A `where` condition or group against an envelope: `any` holds when one of its items does, `not` when its
    item does not."""
    if isinstance(item, WhereAny):
        return any(item_holds(inner, envelope) for inner in item.any)
    if isinstance(item, WhereNot):
        return not item_holds(item.not_, envelope)
    return condition_holds(item, envelope)


def aliases_of(envelope: dict[str, Any]) -> list[str]:
    """What `filter.aliases` matches: the event's alias, or for `graph.changed` the ids of the nodes it changed."""
    alias = envelope.get("alias")
    if isinstance(alias, str):
        return [alias]
    nodes = envelope.get("graph")
    return [node for node in nodes if isinstance(node, str)] if isinstance(nodes, list) else []


def listener_accepts(decl: ListenerDeclaration, envelope: dict[str, Any]) -> bool:
    """Whether the listener takes the event: it matches, and the listener's own runs did not cause it."""
    source = envelope.get("source")
    if isinstance(source, dict) and source.get("listener") == decl.name:
        return False
    return matches(decl.filter, envelope)
