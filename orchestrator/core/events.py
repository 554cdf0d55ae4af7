"""The event envelope: an immutable fact in a session's stream.

Owns the envelope's shape (SPEC section 2) and its JSON form. An event says *something changed here*;
object values are never copied into it. Optional parts are left out of the JSON form rather than set to
null, so that a `where` condition on a missing path sees it as missing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, JsonValue, computed_field, field_validator
from pydantic_core import to_jsonable_python

# How much of a thread item's message an event carries: a preview, never the item.
MESSAGE_PREVIEW_CHARS = 200


class EventItem(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    type: str
    role: str | None = None
    # The stream shows a preview; the engine reads the whole message (a `json` item's may be any JSON).
    message: JsonValue = None


class EventExecution(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    workflow: str
    status: str
    # A failed run's end: its error's `type` and `message` (at most 2,000 characters).
    error: dict[str, Any] | None = None


class EventSource(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    client: str | None = None
    listener: str | None = None
    execution: str | None = None


class Event(BaseModel):
    """One event envelope, as stored, routed, batched and shown."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: int
    session_id: str
    type: str
    alias: str | None = None
    item: EventItem | None = None
    execution: EventExecution | None = None
    source: EventSource = EventSource()
    depth: int = 0
    created_at: datetime
    # Extra facts some event types carry (lane.idle: the lane and the last event id; listener.failed: the
    # batch and the error; an application's own event: its data, whole). Left out of the JSON form when empty.
    data: dict[str, Any] | None = None
    # What caused it (`orchestrator.causes`): the outside request, a run and its batch, a batch, a schedule.
    cause: dict[str, Any] | None = None
    # graph.changed: the ids of the nodes the update changed (stored as `{"nodes": [...]}`).
    graph: list[Any] | None = None

    @field_validator("graph", mode="before")
    @classmethod
    def _node_ids(cls, stored: Any) -> Any:
        return graph_nodes(stored)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def actor(self) -> dict[str, Any] | None:
        """Who did it (`actor_of`), from what the event records."""
        return actor_of(self.source.model_dump(exclude_none=True), self.cause)

    def envelope(self) -> dict[str, Any]:
        """The JSON form: what templates, `where` conditions and readers see."""
        return self.model_dump(mode="json", exclude_none=True)

    def message(self) -> dict[str, Any]:
        """The compact pointer a run gets in `batch.messages`: where to look, not what is there."""
        return message_of(self.envelope())


# The models' field orders: a template that interpolates an envelope shows its keys in this order.
_ITEM_KEYS = tuple(EventItem.model_fields)
_EXECUTION_KEYS = tuple(EventExecution.model_fields)
_SOURCE_KEYS = tuple(EventSource.model_fields)


def _present(found: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: found[k] for k in keys if found.get(k) is not None}


def envelope_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """`Event.envelope()` built straight from a stored event's columns (decoded JSON, `created_at` a datetime or
    ISO text, a thread item's `whole_message` beside its preview), key for key and in the same order: what
    the router and the lanes read a thousand at a time, without a model per event. The stored parts were
    validated when they were written."""
    get = row.get
    envelope: dict[str, Any] = {"id": row["id"], "session_id": row["session_id"], "type": row["type"]}
    alias = get("alias")
    if alias is not None:
        envelope["alias"] = alias
    item = get("item")
    if item is not None:
        whole = get("whole_message")
        envelope["item"] = _present(item if whole is None else {**item, "message": whole}, _ITEM_KEYS)
    execution = get("execution")
    if execution is not None:
        envelope["execution"] = _present(execution, _EXECUTION_KEYS)
    source = get("source")
    envelope["source"] = _present(source, _SOURCE_KEYS) if source else {}
    envelope["depth"] = get("depth") or 0
    envelope["created_at"] = created_text(row["created_at"])
    data, cause, graph = get("data"), get("cause"), get("graph")
    if data is not None:
        envelope["data"] = data
    if cause is not None:
        envelope["cause"] = cause
    if graph is not None:
        envelope["graph"] = graph_nodes(graph)
    actor = actor_of(envelope["source"], cause)
    if actor is not None:
        envelope["actor"] = actor
    return envelope


def created_text(created: datetime | str) -> str:
    """A commit time as the envelope's JSON writes it, in UTC (pydantic's form: `...:SS.ffffffZ`, `...:SSZ`
    without microseconds), from a datetime or PostgreSQL's ISO text, whatever the database's zone. UTC text
    is cut to form directly: parsing and formatting took a fifth of the time to read an event."""
    if isinstance(created, str):
        if len(created) == _UTC_MICROS_TEXT and created.endswith("+00:00"):
            return created[:-6] + "Z"
        created = datetime.fromisoformat(created)
    if created.tzinfo is None:
        return str(to_jsonable_python(created))
    return created.astimezone(UTC).isoformat()[:-6] + "Z"


# `YYYY-MM-DDTHH:MM:SS.ffffff+00:00`: PostgreSQL leaves out trailing zeros of the fraction, pydantic does not.
_UTC_MICROS_TEXT = 32


def actor_of(source: Mapping[str, Any], cause: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Who did it (SPEC section 13), from what every write records: the key an outside request's cause names
    (`causes.request_cause`), the schedule of a firing, the database role of the application's own transaction
    (`orchestrator_transaction_cause`), else the listener and run of its source (a run's writes,
    and the engine's for a listener: its action, receipt, run start and end, failure, idle). Derived rather
    than stored, so no writer can leave it out and a bulk write pays nothing for it."""
    request = (cause or {}).get("request")
    if isinstance(request, Mapping) and request.get("key") is not None:
        return {"key": request["key"]}
    schedule = (cause or {}).get("schedule")
    if isinstance(schedule, Mapping) and schedule.get("alias") is not None:
        return {"schedule": schedule["alias"]}
    transaction = (cause or {}).get("transaction")
    if isinstance(transaction, Mapping) and transaction.get("role") is not None:
        return {"role": transaction["role"]}
    found = {k: source[k] for k in ("listener", "execution") if source.get(k) is not None}
    return found or None


@dataclass(frozen=True)
class Committed:
    """An event as the router reads it: its JSON form and when it committed; `tx` names its transaction where the
    reader knows it (the events of one commit become visible, and are routed, together)."""

    envelope: dict[str, Any]
    created_at: datetime
    tx: str | None = None

    @property
    def id(self) -> int:
        return int(self.envelope["id"])

    @property
    def type(self) -> str:
        return str(self.envelope["type"])


def message_of(envelope: dict[str, Any]) -> dict[str, Any]:
    """The compact pointer of an envelope, where to look, not what is there."""
    item, execution, graph = envelope.get("item"), envelope.get("execution"), envelope.get("graph")
    return pointer(
        envelope["id"],
        envelope["type"],
        envelope.get("alias"),
        item.get("id") if isinstance(item, dict) else None,
        execution.get("id") if isinstance(execution, dict) else None,
        graph if isinstance(graph, list) else None,
    )


def graph_nodes(stored: Any) -> Any:
    """A `graph.changed`'s `graph` as the envelope has it, the list of node ids, from the row's `{"nodes": [...]}`
    (anything else as it is)."""
    if isinstance(stored, dict) and isinstance(stored.get("nodes"), list):
        return stored["nodes"]
    return stored


# The fields `pointer` may make (`batch.messages.N` in a template), each with whether a path goes on below it.
POINTER_FIELDS = {"id": False, "type": False, "alias": False, "item_id": False, "execution_id": False, "nodes": True}


def pointer(
    event_id: int, type_: str, alias: str | None, item_id: Any, execution_id: Any, nodes: list[Any] | None
) -> dict[str, Any]:
    """A pointer (`batch.messages`' form) from its parts, in its key order: `alias` always (null for an event about
    no alias, as the specification's `{id, type, alias, item_id?, execution_id?}` says), the rest when there."""
    message: dict[str, Any] = {"id": event_id, "type": type_, "alias": alias}
    if item_id is not None:
        message["item_id"] = item_id
    if execution_id is not None:
        message["execution_id"] = execution_id
    if nodes is not None:
        message["nodes"] = nodes
    return message


def preview(message: Any) -> str | None:
    """The short preview of a thread item's message that its event carries (a JSON message as JSON text)."""
    if message is None:
        return None
    text = message if isinstance(message, str) else json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    if len(text) <= MESSAGE_PREVIEW_CHARS:
        return text
    return text[: MESSAGE_PREVIEW_CHARS - 1] + "…"
