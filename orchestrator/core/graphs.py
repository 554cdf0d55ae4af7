"""A session's graph: nodes (JSON objects with a `type`, by id) and edges between them, patched all or none.

Owns applying a patch (SPEC section 2): `nodes` sets a node (a value) or removes it (null, with its edges),
`edges` adds and removes `{from, to, type?}`; an edge must join nodes that exist once the patch is applied.
Answers the graph after it and the ids of the nodes it changed (set, removed, or an edge of theirs added or
removed), which `graph.changed` names. Revisions and the event are the store's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

NodeId = Annotated[str, StringConstraints(min_length=1, max_length=200)]
MAX_PATCH_NODES = 1000


class Edge(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, serialize_by_alias=True)

    from_: NodeId = Field(alias="from", description="the id of the node it leaves")
    to: NodeId = Field(description="the id of the node it reaches")
    type: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = Field(
        default=None, description="what the edge means; two edges between the same nodes differ by it"
    )

    def key(self) -> tuple[str, str, str | None]:
        return (self.from_, self.to, self.type)

    def body(self) -> dict[str, Any]:
        found: dict[str, Any] = {"from": self.from_, "to": self.to}
        if self.type is not None:
            found["type"] = self.type
        return found


class EdgePatch(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    add: Annotated[list[Edge], Field(max_length=MAX_PATCH_NODES, description="edges to add")] = []
    remove: Annotated[list[Edge], Field(max_length=MAX_PATCH_NODES, description="edges to remove")] = []


class GraphPatch(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    nodes: Annotated[
        dict[NodeId, dict[str, Any] | None],
        Field(max_length=MAX_PATCH_NODES, description="by node id: its new value (an object with a `type`), or null"),
    ] = {}
    edges: EdgePatch = Field(default=EdgePatch(), description="edges to add and to remove")


def apply_patch(
    nodes: Mapping[str, Any], edges: Sequence[Mapping[str, Any]], patch: GraphPatch
) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """The graph's nodes and edges after `patch`, and the changed node ids (sorted). Raises ValueError naming
    the field at fault: a node value that is not an object with a `type`, an edge to a node not there."""
    after = dict(nodes)
    changed: set[str] = set()
    for node_id, value in patch.nodes.items():
        if value is None:
            if node_id in after:
                del after[node_id]
                changed.add(node_id)
            continue
        if not isinstance(value.get("type"), str) or not value["type"]:
            raise ValueError(f"patch.nodes.{node_id}: must be a JSON object with a non-empty string field 'type'")
        if after.get(node_id) != value:
            after[node_id] = value
            changed.add(node_id)
    kept = {(e["from"], e["to"], e.get("type")): dict(e) for e in edges}
    before = set(kept)
    # A removed node takes its edges with it: the node at each edge's other end is changed too.
    kept = {k: e for k, e in kept.items() if k[0] in after and k[1] in after}
    for edge in patch.edges.remove:
        kept.pop(edge.key(), None)
    for index, edge in enumerate(patch.edges.add):
        for end, node_id in (("from", edge.from_), ("to", edge.to)):
            if node_id not in after:
                raise ValueError(f"patch.edges.add.{index}.{end}: no node {node_id!r}")
        kept.setdefault(edge.key(), edge.body())
    # An edge removed and added again by one patch is no change (an edge is its ends and type, nothing more).
    for from_, to, _ in before.symmetric_difference(kept):
        changed.update((from_, to))
    return after, sorted(kept.values(), key=lambda e: (e["from"], e["to"], e.get("type") or "")), sorted(changed)
