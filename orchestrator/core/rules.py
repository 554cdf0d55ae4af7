"""A listener version compiled for routing in SQL: index probes that find it, and the checks that decide.

Owns the translation of a declaration's filter, key and timing into values one static statement evaluates for
every listener at once (`orchestrator_route_page`, 0007_routing.sql), with no SQL text per listener. The
filter is inverted (SET-BASED.md): each version gets probe rows keyed by the literal head of its type globs
and of its alias globs (`object.**` is found under `object`, `missions/*/meta` under `missions`), and by the
value of one `eq` (or short `in`) condition, so an event finds only the listeners that could take it, whatever
their number; then the full globs (as PostgreSQL regular expressions), the `where` conditions, the self-wake
rule and the activation time decide. `route` (routing.py) is the same decision in Python, event by event: a
differential test holds the two to one behaviour.

A version whose probes would fan out past `MAX_PROBES` (many globs times many `in` values) is probed by fewer
of its parts, never dropped: a coarser probe only lets more candidates reach the checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.core.declaration import (
    ListenerDeclaration,
    ListenerFilter,
    WhereAny,
    WhereCondition,
    WhereItem,
    WhereNot,
    WorkflowAction,
)
from orchestrator.core.envelope_paths import canonical_path
from orchestrator.core.globs import glob_body

# The most probe rows one version gets; past it the `eq` term, then the alias heads, are left out.
MAX_PROBES = 256
# An `in` condition probes by each of its values when it has at most this many.
MAX_IN_PROBES = 16
# The probe key of a version with no `eq` term: no event value is ever JSON null (null reads as missing).
NO_EQ_PATH = ""


@dataclass(frozen=True)
class Probe:
    """One index entry: the literal heads an event's type and alias (or a graph node) must start with, and the
    value the event must hold at `eq_path` (NO_EQ_PATH: none)."""

    type_head: str
    alias_head: str
    eq_path: str = NO_EQ_PATH
    eq_value: Any = None


@dataclass(frozen=True)
class Rule:
    """A listener version as the routing statement reads it."""

    name: str
    version: int
    type_res: tuple[str, ...] | None
    alias_res: tuple[str, ...] | None
    # `where`, each condition as {root, rest, op, value}: the envelope field its path starts in, the rest.
    where: tuple[dict[str, Any], ...]
    # Keyed: the key path split as the conditions' are, and how many alias segments it keeps.
    key_root: str | None
    key_rest: tuple[str, ...]
    key_segments: int | None
    distinct_root: str | None
    distinct_rest: tuple[str, ...]
    window_seconds: float
    idle: bool
    # Runs a lane may hold as declared (None: a write action), and a keyed listener's key slots as declared;
    # the routing statement caps both by the deployment's `listener_parallel_runs`.
    slots: int | None
    key_slots: int | None
    probes: tuple[Probe, ...]
    # The listener's own throttle (None: none): its runs per window, the window, and its key's path split as the
    # conditions' are (root None: no key, one key for the listener).
    throttle_runs: int | None = None
    throttle_seconds: float | None = None
    throttle_root: str | None = None
    throttle_rest: tuple[str, ...] = ()


def split_path(path: str) -> tuple[str, tuple[str, ...]]:
    """An envelope path as (the field it starts in, the rest), the seed's spellings read as the envelope's."""
    parts = canonical_path(path).split(".")
    return parts[0], tuple(parts[1:])


def glob_regex(pattern: str, sep: str) -> str:
    """A validated glob as an anchored PostgreSQL regular expression, meaning what `globs.py`'s does."""
    return "^" + glob_body(pattern, sep) + "$"


def glob_head(pattern: str, sep: str) -> str:
    """The literal segments a glob starts with, before its first wildcard: what an event's value must begin
    with, segment for segment, to match it ('' when it starts with one)."""
    head: list[str] = []
    for segment in pattern.split(sep):
        if "*" in segment:
            break
        head.append(segment)
    return sep.join(head)


def _heads(globs: Sequence[str] | None, sep: str) -> list[str]:
    return [""] if globs is None else sorted({glob_head(g, sep) for g in globs})


def _compiled_where(item: WhereItem) -> dict[str, Any]:
    """A `where` item as the routing statement reads it: a condition as {root, rest, op, value}, a group as
    {op: "any", items} or {op: "not", item}."""
    if isinstance(item, WhereAny):
        return {"op": "any", "items": [_compiled_where(inner) for inner in item.any]}
    if isinstance(item, WhereNot):
        return {"op": "not", "item": _compiled_where(item.not_)}
    root, rest = split_path(item.path)
    return {"root": root, "rest": list(rest), "op": item.op, "value": item.value}


def _eq_term(where: Sequence[WhereItem]) -> tuple[str, list[Any]] | None:
    """The condition to probe by, among those that must hold (not inside a group): the first `eq`, else the first
    `in` short enough (its path, its values)."""
    conditions = [item for item in where if isinstance(item, WhereCondition)]
    for condition in conditions:
        if condition.op == "eq":
            return canonical_path(condition.path), [condition.value]
    for condition in conditions:
        if condition.op == "in" and 0 < len(condition.value) <= MAX_IN_PROBES:
            return canonical_path(condition.path), list(condition.value)
    return None


def probes_of(flt: ListenerFilter) -> tuple[Probe, ...]:
    types, aliases = _heads(flt.types, "."), _heads(flt.aliases, "/")
    term = _eq_term(flt.where)
    if term is not None and len(types) * len(aliases) * len(term[1]) > MAX_PROBES:
        term = None
    if len(types) * len(aliases) > MAX_PROBES:
        aliases = [""]
    eqs: list[tuple[str, Any]] = [(NO_EQ_PATH, None)] if term is None else [(term[0], v) for v in term[1]]
    found = [Probe(t, a, path, value) for t in types for a in aliases for path, value in eqs]
    return tuple(p for i, p in enumerate(found) if p not in found[:i])


def compile_rule(name: str, version: int, decl: ListenerDeclaration) -> Rule:
    flt, concurrency = decl.filter, decl.concurrency
    keyed = concurrency.mode == "keyed" and concurrency.key is not None
    key_root, key_rest = split_path(concurrency.key) if keyed and concurrency.key else (None, ())
    workflow = isinstance(decl.action, WorkflowAction)
    distinct_by = decl.batch.distinct_by
    distinct_root, distinct_rest = split_path(distinct_by) if distinct_by is not None else (None, ())
    slots = None
    if workflow:
        slots = concurrency.max_parallel if concurrency.mode == "parallel" else 1
    compiled = compile_filter(flt)
    throttle = decl.throttle
    throttle_root, throttle_rest = (
        split_path(throttle.key) if throttle is not None and throttle.key is not None else (None, ())
    )
    return Rule(
        name=name,
        version=version,
        type_res=compiled.type_res,
        alias_res=compiled.alias_res,
        where=compiled.where,
        key_root=key_root,
        key_rest=key_rest,
        key_segments=concurrency.key_segments if keyed else None,
        distinct_root=distinct_root,
        distinct_rest=distinct_rest,
        window_seconds=decl.batch.window_seconds,
        idle=decl.idle is not None,
        slots=slots,
        key_slots=concurrency.max_parallel if keyed and workflow else None,
        probes=compiled.probes,
        throttle_runs=None if throttle is None else throttle.runs,
        throttle_seconds=None if throttle is None else throttle.per_seconds,
        throttle_root=throttle_root,
        throttle_rest=throttle_rest,
    )


@dataclass(frozen=True)
class FilterRule:
    """A filter alone as the routing statement reads it (a wait's condition, a `cancel_on`): its globs as regular
    expressions, its `where` compiled, and the probes that find it."""

    type_res: tuple[str, ...] | None
    alias_res: tuple[str, ...] | None
    where: tuple[dict[str, Any], ...]
    probes: tuple[Probe, ...]


def compile_filter(flt: ListenerFilter) -> FilterRule:
    return FilterRule(
        type_res=None if flt.types is None else tuple(glob_regex(g, ".") for g in flt.types),
        alias_res=None if flt.aliases is None else tuple(glob_regex(g, "/") for g in flt.aliases),
        where=tuple(_compiled_where(item) for item in flt.where),
        probes=probes_of(flt),
    )


__all__ = [
    "MAX_PROBES",
    "NO_EQ_PATH",
    "FilterRule",
    "Probe",
    "Rule",
    "compile_filter",
    "compile_rule",
    "glob_head",
    "glob_regex",
    "split_path",
]
