"""Commands on objects: write (with if_rev), read, delete, list."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.commands.explanation import Explanation
from orchestrator.commands.fields import (
    BULK,
    BULK_KEY,
    Alias,
    AliasPrefix,
    ClientId,
    IdempotencyKey,
    Rev,
    SessionId,
    check_payload,
)
from orchestrator.commands.registry import Request, command
from orchestrator.commands.replies import Reply, Shape
from orchestrator.core.errors import CommandError
from orchestrator.core.limits import MAX_WRITES_PER_REQUEST
from orchestrator.core.written import ObjectValue
from orchestrator.telemetry import TRACER

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext


IF_REV = "write only when the stored rev is this one (0: only when there is none), else `rev_conflict`"


class WriteObject(Request):
    command: Literal["write_object"]
    session_id: SessionId
    alias: Alias
    value: ObjectValue
    if_rev: Rev | None = Field(default=None, description=IF_REV)
    client: ClientId | None = None
    idempotency_key: IdempotencyKey | None = None
    # Waits a few seconds for the router at most.
    explain: bool = Field(default=False, description="answer, beside the write, what routing made of its event")


class ObjectWrite(BaseModel):
    """One object of `write_objects`."""

    model_config = ConfigDict(extra="forbid", strict=True)

    alias: Alias
    value: ObjectValue
    if_rev: Rev | None = Field(default=None, description=IF_REV)


class WriteObjects(Request):
    command: Literal["write_objects"]
    session_id: SessionId
    objects: Annotated[list[ObjectWrite], Field(min_length=1, max_length=MAX_WRITES_PER_REQUEST, description=BULK)]
    client: ClientId | None = None
    idempotency_key: IdempotencyKey | None = Field(default=None, description=BULK_KEY)


class ObjectRef(Request):
    command: Literal["read_object", "delete_object"]
    session_id: SessionId
    alias: Alias
    client: ClientId | None = None


class ListObjects(Request):
    command: Literal["list_objects"]
    session_id: SessionId
    prefix: AliasPrefix | None = Field(default=None, description="only the aliases that start with this")


class ObjectRevision(Shape):
    """An object as a write left it."""

    alias: str
    rev: int


class ObjectView(Shape):
    """An object: its value and rev."""

    alias: str
    value: dict[str, Any]
    rev: int
    updated_at: datetime


class WriteObjectReply(Reply):
    object: ObjectRevision
    event_id: int = Field(description="its `object.written` event")
    explain: Explanation | None = Field(default=None, description="with `explain`: as `explain_event` answers")


class WriteObjectsReply(Reply):
    objects: list[ObjectRevision] = Field(description="in the order given")
    event_ids: list[int]


class ReadObjectReply(Reply):
    object: ObjectView


class DeletedObject(Shape):
    alias: str
    rev: int | None
    deleted: bool | None = Field(default=None, description="true; left out when a retry's key answers the first delete")


class DeleteObjectReply(Reply):
    object: DeletedObject
    event_id: int = Field(description="its `object.deleted` event")


class ListObjectsReply(Reply):
    objects: list[ObjectView] = Field(description="by alias")


@command(
    "write_object",
    WriteObject,
    reply=WriteObjectReply,
    errors=("not_found", "session_not_open", "rev_conflict", "limit_exceeded"),
    example={
        "command": "write_object",
        "session_id": "ses_...",
        "alias": "tickets/42/meta",
        "value": {"type": "ticket", "state": "escalated"},
        "if_rev": 1,
        "client": "web",
    },
)
async def write_object(platform: CommandContext, req: WriteObject) -> dict[str, Any]:
    """Replace the value at `alias` and raise its `rev` by one, with an `object.written` event in the same
    transaction; `if_rev` refuses the write when the stored rev differs (0: only when there is none)."""
    check_payload("value", req.value, platform.settings.limits.max_payload_bytes)
    # Under the caller's span when there is one, else a new trace: the event keeps this span's traceparent.
    attributes = {"orchestrator.session": req.session_id, "orchestrator.alias": req.alias}
    with TRACER.start_as_current_span("write_object", attributes=attributes) as span:
        obj, event_id = await platform.store.write_object(
            req.session_id,
            req.alias,
            req.value,
            if_rev=req.if_rev,
            source={"client": req.client},
            idempotency_key=req.idempotency_key,
        )
        span.set_attribute("orchestrator.event_id", event_id)
    reply: dict[str, Any] = {"object": obj, "event_id": event_id}
    if req.explain:
        from orchestrator.commands.explain import explained_once_routed

        reply["explain"] = await explained_once_routed(platform, req.session_id, event_id)
    return reply


@command(
    "write_objects",
    WriteObjects,
    reply=WriteObjectsReply,
    errors=("not_found", "session_not_open", "rev_conflict", "limit_exceeded"),
    example={
        "command": "write_objects",
        "session_id": "ses_...",
        "objects": [
            {"alias": "tickets/43/meta", "value": {"type": "ticket", "state": "new"}},
            {"alias": "tickets/44/meta", "value": {"type": "ticket", "state": "new"}},
        ],
        "idempotency_key": "import-1201",
    },
)
async def write_objects(platform: CommandContext, req: WriteObjects) -> dict[str, Any]:
    """Many objects in one transaction, all or none: the first one refused is named, and nothing is written."""
    limits = platform.settings.limits
    if len(req.objects) > limits.max_writes_per_request:
        raise CommandError(
            "limit_exceeded",
            f"objects: {len(req.objects)} objects is over the limit of {limits.max_writes_per_request}",
        )
    for index, obj in enumerate(req.objects):
        check_payload(f"objects.{index}.value", obj.value, limits.max_payload_bytes)
    rows = [{"alias": obj.alias, "value": obj.value, "if_rev": obj.if_rev} for obj in req.objects]
    attributes: dict[str, str | int] = {"orchestrator.session": req.session_id, "orchestrator.objects": len(rows)}
    with TRACER.start_as_current_span("write_objects", attributes=attributes):
        written = await platform.store.write_objects(
            req.session_id, rows, source={"client": req.client}, idempotency_key=req.idempotency_key
        )
    return {"objects": [obj for obj, _ in written], "event_ids": [event_id for _, event_id in written]}


@command(
    "read_object",
    ObjectRef,
    reply=ReadObjectReply,
    errors=("not_found",),
    example={"command": "read_object", "session_id": "ses_...", "alias": "tickets/42/meta"},
)
async def read_object(platform: CommandContext, req: ObjectRef) -> dict[str, Any]:
    """An object's current value and rev."""
    return {"object": await platform.store.read_object(req.session_id, req.alias)}


@command(
    "delete_object",
    ObjectRef,
    reply=DeleteObjectReply,
    errors=("not_found", "session_not_open"),
    example={"command": "delete_object", "session_id": "ses_...", "alias": "tickets/42/meta"},
)
async def delete_object(platform: CommandContext, req: ObjectRef) -> dict[str, Any]:
    """Delete an object, with an `object.deleted` event."""
    obj, event_id = await platform.store.delete_object(req.session_id, req.alias, source={"client": req.client})
    return {"object": obj, "event_id": event_id}


@command(
    "list_objects",
    ListObjects,
    reply=ListObjectsReply,
    errors=("not_found",),
    example={"command": "list_objects", "session_id": "ses_...", "prefix": "tickets/"},
)
async def list_objects(platform: CommandContext, req: ListObjects) -> dict[str, Any]:
    """The session's objects, values included, by alias; with `prefix`, only the aliases that start with it."""
    return {"objects": await platform.store.list_objects(req.session_id, req.prefix)}
