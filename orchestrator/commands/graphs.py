"""Commands on a session's graph: `update_graph` (a patch, all or none, guarded by `if_rev`) and `read_graph`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from orchestrator.commands.fields import ClientId, IdempotencyKey, Rev, SessionId, check_payload
from orchestrator.commands.registry import Request, command
from orchestrator.commands.replies import Reply, Shape
from orchestrator.core.graphs import MAX_PATCH_NODES, Edge, GraphPatch, NodeId

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext


class UpdateGraph(Request):
    command: Literal["update_graph"]
    session_id: SessionId
    patch: GraphPatch = Field(description="nodes to set (a JSON object each) or remove (null), edges to add or remove")
    if_rev: Rev | None = Field(
        default=None, description="apply only when the graph's rev is this one, else `rev_conflict`"
    )
    client: ClientId | None = None
    idempotency_key: IdempotencyKey | None = None


class ReadGraph(Request):
    command: Literal["read_graph"]
    session_id: SessionId
    nodes: Annotated[list[NodeId], Field(max_length=MAX_PATCH_NODES)] | None = Field(
        default=None, description="only these nodes, and the edges that touch them"
    )


class GraphChange(Shape):
    rev: int = Field(description="the graph's rev after the update")
    changed: list[str] = Field(description="the nodes whose edges or values it changed")


class UpdateGraphReply(Reply):
    graph: GraphChange
    event_id: int | None = Field(description="its `graph.changed` event; null when it changed nothing")


class GraphView(Shape):
    rev: int
    nodes: dict[str, dict[str, Any]] = Field(description="each node's value, by its id")
    edges: list[Edge]


class ReadGraphReply(Reply):
    graph: GraphView


@command(
    "update_graph",
    UpdateGraph,
    reply=UpdateGraphReply,
    errors=("not_found", "session_not_open", "rev_conflict", "limit_exceeded"),
    example={
        "command": "update_graph",
        "session_id": "ses_...",
        "patch": {
            "nodes": {"missions/7": {"type": "mission"}, "missions/7/cells/3": {"type": "cell"}},
            "edges": {"add": [{"from": "missions/7", "to": "missions/7/cells/3", "type": "holds"}]},
        },
        "if_rev": 0,
    },
)
async def update_graph(platform: CommandContext, req: UpdateGraph) -> dict[str, Any]:
    """Apply a patch to the session's graph, all or none, guarded by `if_rev`, with one `graph.changed` event
    naming the nodes it changed."""
    check_payload(
        "patch",
        req.patch.model_dump(mode="json", by_alias=True),
        platform.settings.limits.max_payload_bytes,
        in_body=False,  # dumped with its defaults: more than was sent
    )
    graph, event_id = await platform.store.update_graph(
        req.session_id,
        req.patch,
        if_rev=req.if_rev,
        source={"client": req.client},
        idempotency_key=req.idempotency_key,
    )
    return {"graph": graph, "event_id": event_id}


@command(
    "read_graph",
    ReadGraph,
    reply=ReadGraphReply,
    errors=("not_found",),
    example={"command": "read_graph", "session_id": "ses_...", "nodes": ["missions/7"]},
)
async def read_graph(platform: CommandContext, req: ReadGraph) -> dict[str, Any]:
    """The session's graph with its rev; with `nodes`, only those nodes and the edges that touch them."""
    return {"graph": await platform.store.read_graph(req.session_id, req.nodes)}
