"""Commands on a session's graph: `update_graph` (a patch, all or none, guarded by `if_rev`) and `read_graph`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from orchestrator.commands.fields import ClientId, IdempotencyKey, SessionId, check_payload
from orchestrator.commands.registry import Request, command
from orchestrator.core.graphs import MAX_PATCH_NODES, GraphPatch, NodeId

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext


class UpdateGraph(Request):
    command: Literal["update_graph"]
    session_id: SessionId
    patch: GraphPatch
    if_rev: Annotated[int, Field(ge=0)] | None = None
    client: ClientId | None = None
    idempotency_key: IdempotencyKey | None = None


class ReadGraph(Request):
    command: Literal["read_graph"]
    session_id: SessionId
    nodes: Annotated[list[NodeId], Field(max_length=MAX_PATCH_NODES)] | None = None


@command("update_graph", UpdateGraph)
async def update_graph(platform: CommandContext, req: UpdateGraph) -> dict[str, Any]:
    check_payload("patch", req.patch.model_dump(mode="json", by_alias=True), platform.settings.limits.max_payload_bytes)
    graph, event_id = await platform.store.update_graph(
        req.session_id,
        req.patch,
        if_rev=req.if_rev,
        source={"client": req.client},
        idempotency_key=req.idempotency_key,
    )
    return {"graph": graph, "event_id": event_id}


@command("read_graph", ReadGraph)
async def read_graph(platform: CommandContext, req: ReadGraph) -> dict[str, Any]:
    return {"graph": await platform.store.read_graph(req.session_id, req.nodes)}
