"""Action templates: JSON values with `{{ path }}` holes, and the context a batch renders them in.

Owns rendering (SPEC section 3, Templates) and the template context of a batch; running the rendered
action is the engine's. Nothing is evaluated as code: a hole holds a dotted path, read with `paths.py`.
A string that is exactly one hole becomes the value at its path, keeping its type; holes inside a longer
string are interpolated as text (strings as they are, anything else as compact JSON). Dict keys are not
rendered. A path no batch of the listener's types can hold is refused at save (`why_no_hole`); one that
does not resolve in a given batch (or goes on through a null) raises TemplateError, which the engine records as
an `invocation_error`; one whose last step is a null that is there renders null. Text that merely looks like a
brace (`{{` with no closing `}}`) is left as it is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.core.envelope_paths import canonical_path, why_unresolvable
from orchestrator.core.events import POINTER_FIELDS
from orchestrator.core.paths import MISSING, resolve

_HOLE = r"\{\{\s*([^{}]*?)\s*\}\}"
_WHOLE = re.compile(rf"^{_HOLE}$")
_INLINE = re.compile(_HOLE)


class TemplateError(Exception):
    """A template names a path that is not in its context."""

    def __init__(self, path: str) -> None:
        super().__init__(f"unknown template path {path!r}")
        self.path = path


# The roots of a batch's context that are envelopes (the last event, and its item): judged by `envelope_paths`.
ENVELOPE_ROOTS = ("event", "item")
# Roots that are no field of the context: the seed's spellings of paths into the last event (`{{ object.alias }}`,
# `{{ execution.status }}`), as `where` takes them (SPEC section 2).
SEED_ROOTS = ("object", "execution")
# What each other root holds, and for each field whether paths go on below it.
CONTEXT_FIELDS: dict[str, dict[str, bool]] = {
    "batch": {
        "events": True,
        "messages": True,
        "first_id": False,
        "last_id": False,
        "count": False,
        "retry": False,
        "lane": False,
        "replay_of": False,
    },
    "listener": {"name": False, "version": False},
    "session": {"id": False, "alias": False},
}


# The fields of the context that hold a list (their items may be anything: `batch.events.0` is an envelope).
_LISTS = ("batch.events", "batch.messages")


def whole_hole(template: str) -> str | None:
    """The path of a string that is exactly one hole (it renders as the value there, keeping its type); None for
    any other string, which renders as text."""
    whole = _WHOLE.match(template)
    return None if whole is None else whole.group(1)


def never_an_object(path: str) -> bool:
    """Whether a hole's path names what is never a JSON object in any batch: one of the context's plain values
    (`batch.count`, `batch.lane`, `listener.name`, ...), a number or a text, or one of its lists."""
    root, _, rest = path.partition(".")
    field, _, below = rest.partition(".")
    return not below and (CONTEXT_FIELDS.get(root, {}).get(field) is False or path in _LISTS)


# The fields of the context that always hold a number.
_NUMBERS = ("batch.first_id", "batch.last_id", "batch.count", "batch.retry", "listener.version")


def never_text(path: str) -> bool:
    """Whether a hole's path names what is never a string, nor null, in any batch: one of the context's numbers
    or lists."""
    return path in _NUMBERS or path in _LISTS


def _in_context(path: str) -> str:
    """The context's path a hole's path stands for: a path into an event in the seed's spellings, as `where` takes
    them (`event.object.alias`, `batch.events.0.object.alias`, and at the root `object.alias`, `execution.status`,
    the last event's), as the envelope's own (`event.alias`), so a null that is there renders null either way."""
    root, _, rest = path.partition(".")
    if root in SEED_ROOTS:
        return f"event.{canonical_path(path)}"
    if root == "event" and rest:
        return f"event.{canonical_path(rest)}"
    field, _, below = rest.partition(".")
    index, _, inside = below.partition(".")
    if root == "batch" and field == "events" and index.isdigit() and inside:
        return f"batch.events.{index}.{canonical_path(inside)}"
    return path


def _found(context: dict[str, Any], path: str) -> Any:
    return resolve(context, path) if path else MISSING


def _lookup(context: dict[str, Any], hole: str) -> Any:
    path = _in_context(hole)
    value = _found(context, path)
    if value is MISSING:
        # A null that is there (`"note": null` in an event's data) is the JSON value at the path, kept as it
        # is; a path through it, or to nothing, is the batch's `invocation_error`.
        parent_path, _, last = path.rpartition(".")
        parent = _found(context, parent_path) if parent_path else MISSING
        if isinstance(parent, dict) and last in parent and parent[last] is None:
            return None
        if isinstance(parent, list) and last.isdigit() and int(last) < len(parent) and parent[int(last)] is None:
            return None
        raise TemplateError(hole)
    return value


def holes(template: Any) -> list[str]:
    """Every path a template's holes name, in order (dict keys are not rendered, so not looked at)."""
    if isinstance(template, str):
        return [hole.group(1) for hole in _INLINE.finditer(template)]
    if isinstance(template, dict):
        return [path for value in template.values() for path in holes(value)]
    if isinstance(template, list):
        return [path for value in template for path in holes(value)]
    return []


def why_no_hole(
    path: str, types: Sequence[str] | None, declared: Mapping[str, Mapping[str, Any]] | None = None
) -> str | None:
    """Why a template's `path` can never resolve in a batch of a listener on `types`, or None when it can."""
    root, _, rest = path.partition(".")
    if root == "event":
        return why_unresolvable(rest, types, declared) if rest else None
    if root == "item" or root in SEED_ROOTS:
        return why_unresolvable(path, types, declared)
    if root not in CONTEXT_FIELDS:
        return f"a template's root is one of {', '.join((*CONTEXT_FIELDS, *ENVELOPE_ROOTS, *SEED_ROOTS))}, not {root!r}"
    fields = CONTEXT_FIELDS[root]
    if not rest:
        return None
    field, _, below = rest.partition(".")
    if field not in fields:
        return f"{root!r} holds {', '.join(fields)}"
    if below and not fields[field]:
        return f"'{root}.{field}' is a plain value"
    if below and f"{root}.{field}" in _LISTS:
        return _why_not_in_list(f"{root}.{field}", below, types, declared)
    return None


def _why_not_in_list(
    name: str, below: str, types: Sequence[str] | None, declared: Mapping[str, Mapping[str, Any]] | None
) -> str | None:
    """Why `name.below` never resolves: a list is indexed (`batch.events.0`), and below an index is an envelope's
    path (for `batch.events`) or a pointer's field (for `batch.messages`)."""
    index, _, rest = below.partition(".")
    if not index.isdigit():
        return f"'{name}' is a list: a path into it is an index first ({name}.0)"
    if not rest:
        return None
    if name == "batch.events":
        return why_unresolvable(rest, types, declared)
    field, _, deeper = rest.partition(".")
    if field not in POINTER_FIELDS:
        return f"a pointer of '{name}' holds {', '.join(POINTER_FIELDS)}"
    if deeper and not POINTER_FIELDS[field]:
        return f"'{name}.{index}.{field}' is a plain value"
    return None


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def render(template: Any, context: dict[str, Any]) -> Any:
    """The template with every hole filled from `context`; raises TemplateError on an unknown path."""
    if isinstance(template, str):
        whole = _WHOLE.match(template)
        if whole is not None:
            return _lookup(context, whole.group(1))
        return _INLINE.sub(lambda hole: _as_text(_lookup(context, hole.group(1))), template)
    if isinstance(template, dict):
        return {key: render(value, context) for key, value in template.items()}
    if isinstance(template, list):
        return [render(value, context) for value in template]
    return template


def needs_envelopes(template: Any) -> bool:
    """Whether rendering `template` reads events whole (`batch.events`, the last `event`, its `item`, or the
    whole `batch`): a batch's envelopes are read from the store only for such a template; every other hole
    renders from the batch's pointers and numbers."""
    for path in holes(template):
        root, _, rest = path.partition(".")
        if root in (*ENVELOPE_ROOTS, *SEED_ROOTS) or (root == "batch" and (not rest or rest.split(".")[0] == "events")):
            return True
    return False


def needs_messages(template: Any) -> bool:
    """Whether `template` names the batch's pointers (`batch.messages`, or the whole `batch`): only then does a
    run's input carry them as `batch.messages`; any other run reads them when it wants them."""
    for path in holes(template):
        root, _, rest = path.partition(".")
        if root == "batch" and (not rest or rest.split(".")[0] == "messages"):
            return True
    return False


def batch_context(
    *,
    messages: Sequence[Mapping[str, Any]],
    events: Sequence[dict[str, Any]] | None,
    retry: int,
    lane: str,
    listener: dict[str, Any],
    session: dict[str, Any],
    consumed_ids: Sequence[int] | None = None,
    replay_of: int | None = None,
) -> dict[str, Any]:
    """The template context of a batch: roots `batch`, `event`, `item`, `listener` and `session`.

    `messages` are the entries' pointers, ordered by id; `events` their envelopes, read only for a template
    that names them (`needs_envelopes`): without them `batch.events`, `event` and `item` are left out. `event`
    is the last entry and `item` its item; when that event has no item, `item` is left out (a template naming
    it fails as an unknown path), which keeps the context plain JSON. `consumed_ids`, when given (the ids the
    cut consumed, superseded ones included), widen `first_id`/`last_id` to every event the batch consumed.
    """
    if not messages:
        raise ValueError("a batch has at least one entry")
    ids = [int(message["id"]) for message in messages] + list(consumed_ids or ())
    batch: dict[str, Any] = {}
    if events is not None:
        batch["events"] = list(events)
    batch |= {
        "messages": [dict(message) for message in messages],
        "first_id": min(ids),
        "last_id": max(ids),
        "count": len(messages),
        "retry": retry,
        "lane": lane,
        **({"replay_of": replay_of} if replay_of is not None else {}),
    }
    context: dict[str, Any] = {"batch": batch, "listener": listener, "session": session}
    if events:
        last = events[-1]
        context["event"] = last
        if last.get("item") is not None:
            context["item"] = last["item"]
    return context
