"""Commands on objects: write (with if_rev), read, delete, list."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from orchestrator.commands.fields import (
    Alias,
    AliasPrefix,
    ClientId,
    IdempotencyKey,
    ObjectValue,
    SessionId,
    check_payload,
)
from orchestrator.commands.registry import Request, command
from orchestrator.telemetry import TRACER

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext


class WriteObject(Request):
    command: Literal["write_object"]
    session_id: SessionId
    alias: Alias
    value: ObjectValue
    if_rev: Annotated[int, Field(ge=0)] | None = None
    client: ClientId | None = None
    idempotency_key: IdempotencyKey | None = None
    # Answer, beside the write, what routing made of its event (waiting a few seconds for the router).
    explain: bool = False


class ObjectRef(Request):
    command: Literal["read_object", "delete_object"]
    session_id: SessionId
    alias: Alias
    client: ClientId | None = None


class ListObjects(Request):
    command: Literal["list_objects"]
    session_id: SessionId
    prefix: AliasPrefix | None = None


@command("write_object", WriteObject)
async def write_object(platform: CommandContext, req: WriteObject) -> dict[str, Any]:
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


@command("read_object", ObjectRef)
async def read_object(platform: CommandContext, req: ObjectRef) -> dict[str, Any]:
    return {"object": await platform.store.read_object(req.session_id, req.alias)}


@command("delete_object", ObjectRef)
async def delete_object(platform: CommandContext, req: ObjectRef) -> dict[str, Any]:
    obj, event_id = await platform.store.delete_object(req.session_id, req.alias, source={"client": req.client})
    return {"object": obj, "event_id": event_id}


@command("list_objects", ListObjects)
async def list_objects(platform: CommandContext, req: ListObjects) -> dict[str, Any]:
    return {"objects": await platform.store.list_objects(req.session_id, req.prefix)}
