"""Paths into an event's envelope: the seed's spellings, and which paths can ever resolve for which types.

Owns what `where`, `key`, `distinct_by` and a template's `event.` and `item.` holes may name. The envelope
keeps `alias` at its top, and the seed speaks of `object.alias` (the alias the event is about, an object's
or a thread's): both resolve. A path that no event of the listener's types can carry (`item.role` on a
listener of `object.**` only, `objet.alias` anywhere) is refused when the listener is saved, rather than left
to never match, lane everything into the shared lane, collapse nothing or fail every batch, silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.core.event_types import why_data_unresolvable
from orchestrator.core.globs import compile_type_glob
from orchestrator.core.paths import Missing, resolve

# The seed's spellings, and the envelope path each stands for.
SEED_PATHS = {"object.alias": "alias"}
# `graph` is the list of the node ids a `graph.changed` names (SPEC 2); `graph.nodes`, its spelling before, still
# reads it (`graph.nodes.0` is `graph.0`).
_GRAPH_NODES = "graph.nodes"


def canonical_path(path: str) -> str:
    """The envelope path a path stands for: the seed's spellings, and `graph.nodes[.N]` as `graph[.N]`."""
    if path == _GRAPH_NODES or path.startswith(_GRAPH_NODES + "."):
        return "graph" + path[len(_GRAPH_NODES) :]
    return SEED_PATHS.get(path, path)


# Every event type the platform writes, and the envelope fields each carries beside the common ones.
EVENT_FIELDS: dict[str, frozenset[str]] = {
    "object.written": frozenset({"alias", "data"}),
    "object.deleted": frozenset({"alias", "data"}),
    "thread.item_posted": frozenset({"alias", "item"}),
    "execution.started": frozenset({"execution"}),
    "execution.ended": frozenset({"execution"}),
    "graph.changed": frozenset({"graph", "data"}),
    "listener.failed": frozenset({"data", "execution"}),
    "lane.idle": frozenset({"data"}),
    "listener.replayed": frozenset({"data"}),
    "listener.redelivered": frozenset({"data"}),
}
COMMON_FIELDS = frozenset({"id", "session_id", "type", "source", "depth", "created_at", "cause", "actor"})
# What a field's subpaths may be (None: any, for `data`; empty: the field is a plain value).
SUBFIELDS: dict[str, frozenset[str] | None] = {
    "id": frozenset(),
    "session_id": frozenset(),
    "type": frozenset(),
    "alias": frozenset(),
    "depth": frozenset(),
    "created_at": frozenset(),
    "item": frozenset({"id", "type", "role", "message"}),
    "execution": frozenset({"id", "workflow", "status", "error"}),
    "source": frozenset({"client", "listener", "execution"}),
    "data": None,
    "cause": None,
    "graph": None,  # the list of node ids: a path into it is an index (`graph.0`), checked below
    "actor": frozenset({"key", "listener", "execution", "schedule", "role"}),
}

# What `data` holds for the platform's types whose data is known whole (a rev, a plain value); the others'
# (`listener.failed`, `lane.idle`, ...) take any path below `data`.
DATA_FIELDS: dict[str, frozenset[str]] = {
    "object.written": frozenset({"rev"}),
    "object.deleted": frozenset({"rev"}),
    "graph.changed": frozenset({"rev"}),
}

# The subfields with more below them (None: any JSON, as a `json` item's whole message is any value): a failed,
# stopped or cancelled run's error is `{type, message}` (`execution.error.message`).
DEEP_SUBFIELDS: dict[tuple[str, str], frozenset[str] | None] = {
    ("item", "message"): None,
    ("execution", "error"): frozenset({"type", "message"}),
}


def resolve_in_event(envelope: dict[str, Any], path: str) -> Any | Missing:
    """The value at `path` in an envelope, the seed's spellings included."""
    return resolve(envelope, canonical_path(path))


def why_unresolvable(
    path: str, types: Sequence[str] | None, declared: Mapping[str, Mapping[str, Any]] | None = None
) -> str | None:
    """Why no event of `types` (type globs; None: every type) can carry `path`, or None when some can.

    `declared`: the application's event types (name to schema), whose events carry `data` as their schema
    holds it, besides the fields every event has.
    """
    path = canonical_path(path)
    field, _, rest = path.partition(".")
    if field not in SUBFIELDS:
        return f"no event has a field {field!r}"
    if field == "graph" and rest and not rest.isdigit():
        return "'graph' is the list of the node ids a change names: a path into it is an index (graph.0)"
    allowed = SUBFIELDS[field]
    if rest and allowed is not None:
        sub, _, deeper = rest.partition(".")
        if sub not in allowed or (deeper and (field, sub) not in DEEP_SUBFIELDS):
            shown = ", ".join(sorted(allowed)) or "nothing: it is a plain value"
            return f"{field!r} holds {shown}"
        below = DEEP_SUBFIELDS.get((field, sub))
        if deeper and below is not None and deeper not in below:
            plain = deeper.split(".")[0]
            if plain in below:
                return f"'{field}.{sub}.{plain}' is a plain value"
            return f"'{field}.{sub}' holds {', '.join(sorted(below))}"
    if field in COMMON_FIELDS:
        return None
    declared = declared or {}

    def wanted(name: str) -> bool:
        return types is None or any(compile_type_glob(g).matches(name) for g in types)

    matched = [t for t in EVENT_FIELDS if wanted(t)]
    apps = [t for t in declared if wanted(t)]
    if not matched and not apps:
        return None
    carriers = [t for t in matched if field in EVENT_FIELDS[t]]
    if field == "data" and rest and carriers:
        # The platform's types that carry it, each with what its data holds; the application's types by schema.
        sub, _, deeper = rest.partition(".")
        if any(t not in DATA_FIELDS or (sub in DATA_FIELDS[t] and not deeper) for t in carriers):
            return None
        why = why_data_unresolvable(path, [declared[t] for t in apps]) if apps else None
        if apps and why is None:
            return None
        known = sorted({f"data.{k}" for t in carriers for k in DATA_FIELDS[t]})
        return f"the data of {', '.join(carriers)} holds {', '.join(known)}" + (f"; {why}" if why else "")
    if carriers:
        return None
    if field == "data" and apps:
        return why_data_unresolvable(path, [declared[t] for t in apps])
    return f"no event of the listener's types ({', '.join([*matched, *apps])}) has {field!r}"
