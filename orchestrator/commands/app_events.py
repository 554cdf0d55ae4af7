"""The application's own events: declaring a type, emitting one or many.

`save_event_type` keeps a type's JSON Schema (checked as a schema when saved); `emit_event` and `emit_events`
refuse an undeclared type or `data` that fails its schema with `invalid_request` naming the field (its
JSON Schema path, and for `emit_events` the failing event's index), and write nothing then: `emit_events`
takes up to `max_writes_per_request` events in one transaction, all or none.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from orchestrator.commands.fields import BULK, ClientId, IdempotencyKey, SchemaOf, SessionId, check_payload
from orchestrator.commands.registry import Request, command
from orchestrator.commands.replies import Reply, Shape
from orchestrator.core.declaration import stranded_by, stranded_by_schemas, type_hint
from orchestrator.core.errors import CommandError
from orchestrator.core.event_types import HELD, DataCheck, EventTypeDeclaration, data_check
from orchestrator.core.limits import MAX_WRITES_PER_REQUEST
from orchestrator.core.validation import field_errors_message
from orchestrator.store.app_events import CAPTURED_SCHEMA, captured_refusal
from orchestrator.telemetry import TRACER

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext

TypeName = Annotated[str, StringConstraints(min_length=1, max_length=128)]


class SaveEventType(Request):
    """Its fields are checked by `EventTypeDeclaration`, whose errors name them; the schema says what it takes."""

    model_config = ConfigDict(json_schema_extra={"required": ["command", "name", "schema"]})

    command: Literal["save_event_type"]
    name: Annotated[Any, SchemaOf(TypeName), Field(description="the type's name, dotted (`ticket.escalated`)")] = None
    schema_: Annotated[Any, SchemaOf(dict[str, Any])] = Field(
        default=None,
        alias="schema",
        description="a JSON Schema for the events' `data` (a JSON object: a `type` must take `object`); its"
        " patterns are matched in linear time (RE2: no backreferences or lookaround)",
    )
    allow: Annotated[Any, SchemaOf(list[str] | None)] = Field(
        default=None, description="the scopes that may emit it from outside; none: whoever may write to the session"
    )
    description: Annotated[Any, SchemaOf(str | None)] = Field(default=None, description="what the type means")


class EventTypeRef(Request):
    command: Literal["get_event_type", "delete_event_type"]
    name: TypeName = Field(description="the event type's name (`ticket.escalated`)")


class ListEventTypes(Request):
    command: Literal["list_event_types"]


class Emitted(BaseModel):
    """One event of `emit_events`."""

    model_config = ConfigDict(extra="forbid", strict=True)

    type: TypeName = Field(description="a declared event type")
    data: dict[str, Any] = Field(description="the event's data, checked against its type's schema")
    client: ClientId | None = None
    idempotency_key: IdempotencyKey | None = None


class EmitEvent(Request):
    command: Literal["emit_event"]
    session_id: SessionId
    type: TypeName = Field(description="a declared event type")
    data: dict[str, Any] = Field(description="the event's data, checked against its type's schema")
    client: ClientId | None = None
    idempotency_key: IdempotencyKey | None = None


class EmitEvents(Request):
    command: Literal["emit_events"]
    session_id: SessionId
    events: Annotated[list[Emitted], Field(min_length=1, max_length=MAX_WRITES_PER_REQUEST, description=BULK)]
    client: ClientId | None = None


class EventTypeView(Shape):
    """A declared event type."""

    name: str
    schema_: dict[str, Any] = Field(alias="schema", description="the JSON Schema of its events' `data`")
    allow: list[str] | None = Field(default=None, description="the scopes that may emit it from outside")
    description: str | None = None
    saved_at: datetime


class EventTypeReply(Reply):
    event_type: EventTypeView


class DeletedEventTypeReply(EventTypeReply):
    """The type as it was."""


class ListEventTypesReply(Reply):
    event_types: list[EventTypeView]


class EmitEventReply(Reply):
    event_id: int


class EmitEventsReply(Reply):
    event_ids: list[int] = Field(description="in the order given")


@command(
    "save_event_type",
    SaveEventType,
    reply=EventTypeReply,
    example={
        "command": "save_event_type",
        "name": "ticket.closed",
        "schema": {"type": "object", "properties": {"reason": {"type": "string"}}, "required": ["reason"]},
        "description": "A ticket was closed, and why.",
    },
)
async def save_event_type(platform: CommandContext, req: SaveEventType) -> dict[str, Any]:
    """Declare an event type of the application's own, or replace its declaration: every `emit_event` of it is
    checked against `schema` (a JSON Schema for its `data`). A type a capture declares is the capture's, refused
    while the capture lasts. A new schema that would leave a saved listener reading
    a path no event of its types has (it could never fire) is refused, naming each; change or delete them first."""
    body = {"name": req.name, "schema": req.schema_, "allow": req.allow, "description": req.description}
    schemas = await platform.store.event_schemas()
    held = {HELD: schemas.get(req.name)} if isinstance(req.name, str) else None
    try:
        declared = EventTypeDeclaration.model_validate({k: v for k, v in body.items() if v is not None}, context=held)
    except pydantic.ValidationError as err:
        raise CommandError("invalid_request", field_errors_message(err, "")) from None
    table = await platform.store.capture_of_type(declared.name)
    if table is not None:
        raise CommandError("invalid_request", captured_refusal(declared.name, table, CAPTURED_SCHEMA))
    if declared.name in schemas:
        listeners = {found["name"]: found["body"] for found in await platform.store.list_listeners()}
        after = {**schemas, declared.name: declared.schema_}
        stranded = stranded_by_schemas(listeners, platform.settings.limits, schemas, after)
        if stranded:
            raise CommandError(
                "invalid_request",
                f"schema: listener {', '.join(stranded)} would then read a path no event of its types has (it could"
                " never fire); change or delete those listeners first",
            )
    saved = await platform.store.save_event_type(declared.name, declared.schema_, declared.allow, declared.description)
    return {"event_type": saved}


@command(
    "get_event_type",
    EventTypeRef,
    reply=EventTypeReply,
    errors=("not_found",),
    example={"command": "get_event_type", "name": "ticket.escalated"},
)
async def get_event_type(platform: CommandContext, req: EventTypeRef) -> dict[str, Any]:
    """A declared event type."""
    return {"event_type": await platform.store.get_event_type(req.name)}


@command(
    "delete_event_type",
    EventTypeRef,
    reply=DeletedEventTypeReply,
    errors=("not_found",),
    example={"command": "delete_event_type", "name": "ticket.escalated"},
)
async def delete_event_type(platform: CommandContext, req: EventTypeRef) -> dict[str, Any]:
    """Delete a declared event type: its events already in the streams stay; new ones of it are refused. Refused
    while a listener's `filter.types` would then match no type at all (it could never fire again): the reply
    names each such listener; change or delete them first."""
    schemas = await platform.store.event_schemas()
    if req.name not in schemas:
        raise CommandError("not_found", f"name: no event type {req.name!r}")
    # The store refuses it too (an app's plan deletes through it); said here before the listeners it strands.
    table = await platform.store.capture_of_type(req.name)
    if table is not None:
        raise CommandError("invalid_request", captured_refusal(req.name, table, "uncapture_table it first"))
    remaining = [name for name in schemas if name != req.name]
    stranded = []
    for listener in await platform.store.list_listeners():
        stranded += [
            f"{listener['name']!r} ({where})" for where, _ in stranded_by(listener["body"], schemas, remaining)
        ]
    if stranded:
        raise CommandError(
            "invalid_request",
            f"name: {req.name!r} is the only type these type globs match, of listener {', '.join(stranded)};"
            " change or delete those listeners first",
        )
    return {"event_type": await platform.store.delete_event_type(req.name)}


@command("list_event_types", ListEventTypes, reply=ListEventTypesReply, example={"command": "list_event_types"})
async def list_event_types(platform: CommandContext, req: ListEventTypes) -> dict[str, Any]:
    """Every declared event type."""
    return {"event_types": await platform.store.list_event_types()}


async def checked(platform: CommandContext, events: list[Emitted], field: str) -> list[dict[str, Any]]:
    """The events as the store appends them, each checked against its declared type (`field` names where
    the first that fails is, `events.3`), or the refusal naming it."""
    limits = platform.settings.limits
    if len(events) > limits.max_writes_per_request:
        raise CommandError(
            "limit_exceeded", f"events: {len(events)} events is over the limit of {limits.max_writes_per_request}"
        )
    schemas = await platform.store.event_schemas({event.type for event in events})
    checks: dict[str, DataCheck] = {}
    rows = []
    for index, event in enumerate(events):
        where = field.format(index=index)
        check = checks.get(event.type)
        if check is None:
            schema = schemas.get(event.type)
            if schema is None:
                hint = await _closest_type(platform, event.type)
                raise CommandError("invalid_request", f"{where}type: {event.type!r} is not a declared event type{hint}")
            check = checks[event.type] = data_check(schema)
        check_payload(f"{where}data", event.data, limits.max_payload_bytes)
        problems = check(event.data, f"{where}data")
        if problems:
            raise CommandError("invalid_request", "; ".join(problems))
        row: dict[str, Any] = {"type": event.type, "data": event.data}
        if event.client is not None:
            row["client"] = event.client
        if event.idempotency_key is not None:
            row["key"] = event.idempotency_key
        rows.append(row)
    return rows


@command(
    "emit_event",
    EmitEvent,
    reply=EmitEventReply,
    errors=("not_found", "session_not_open", "limit_exceeded"),
    example={
        "command": "emit_event",
        "session_id": "ses_...",
        "type": "ticket.escalated",
        "data": {"priority": 1},
        "idempotency_key": "esc-42",
    },
)
async def emit_event(platform: CommandContext, req: EmitEvent) -> dict[str, Any]:
    """Append an event of a declared type to the session's stream; `data` must fit the type's schema."""
    one = Emitted(type=req.type, data=req.data, idempotency_key=req.idempotency_key)
    rows = await checked(platform, [one], "")
    with TRACER.start_as_current_span("emit_event", attributes={"orchestrator.session": req.session_id}):
        [event_id] = await platform.store.emit(req.session_id, rows, source={"client": req.client}, field=None)
    return {"event_id": event_id}


@command(
    "emit_events",
    EmitEvents,
    reply=EmitEventsReply,
    errors=("not_found", "session_not_open", "limit_exceeded"),
    example={
        "command": "emit_events",
        "session_id": "ses_...",
        "events": [
            {"type": "ticket.escalated", "data": {"priority": 1}, "idempotency_key": "esc-42"},
            {"type": "ticket.escalated", "data": {"priority": 2}, "idempotency_key": "esc-43"},
        ],
    },
)
async def emit_events(platform: CommandContext, req: EmitEvents) -> dict[str, Any]:
    """Append many events of declared types in one transaction, all or none; the first refused is named."""
    rows = await checked(platform, req.events, "events.{index}.")
    attributes: dict[str, str | int] = {"orchestrator.session": req.session_id, "orchestrator.events": len(rows)}
    with TRACER.start_as_current_span("emit_events", attributes=attributes):
        ids = await platform.store.emit(req.session_id, rows, source={"client": req.client})
    return {"event_ids": ids}


async def _closest_type(platform: CommandContext, name: str) -> str:
    """A did-you-mean for an emit of a type nobody declared (a typo), as a save's refusal says it."""
    return type_hint(name, [t["name"] for t in await platform.store.list_event_types()])
