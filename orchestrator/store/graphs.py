"""A session's graph in PostgreSQL: read it, and patch it all or none with its `graph.changed` event.

Owns the statements of `update_graph` and `read_graph`. An update holds the session's lock (its event's id in
commit order) and the graph's row, checks `if_rev`, applies the core's patch and writes one `graph.changed`
naming the changed nodes, in one transaction; a patch that changes nothing writes nothing and keeps the rev.
"""

from __future__ import annotations

from typing import Any

from orchestrator.core.errors import KEY_REUSED, CommandError
from orchestrator.core.graphs import GraphPatch, apply_patch
from orchestrator.store.connection import Connection
from orchestrator.store.postgres import PostgresStore


class Graphs(PostgresStore):
    """The graph's statements, on the store's transactions and appends."""

    async def update_graph(
        self,
        session_id: str,
        patch: GraphPatch,
        *,
        if_rev: int | None = None,
        source: dict[str, Any] | None = None,
        depth: int = 0,
        idempotency_key: str | None = None,
    ) -> tuple[dict[str, Any], int | None]:
        """Apply the patch; answer the graph's new rev (and its changed nodes) and the event's id (None: no change)."""
        async with self.transaction() as conn:
            await self._locked_session(conn, session_id, require_open=True)
            replayed = await self._replayed(conn, session_id, idempotency_key)
            if replayed is not None:
                if replayed.type != "graph.changed":
                    raise CommandError("invalid_request", KEY_REUSED)
                changed = list(replayed.graph or [])
                return {"rev": (replayed.data or {}).get("rev"), "changed": changed}, replayed.id
            row = await _graph_row(conn, session_id)
            rev = int(row["rev"])
            if if_rev is not None and if_rev != rev:
                raise CommandError("rev_conflict", f"if_rev: the graph's rev is {rev}")
            try:
                nodes, edges, changed = apply_patch(row["nodes"], row["edges"], patch)
            except ValueError as err:
                raise CommandError("invalid_request", str(err)) from None
            if not changed:
                return {"rev": rev, "changed": []}, None
            await conn.execute(
                "UPDATE orchestrator.graphs SET rev = rev + 1, nodes = $2, edges = $3 WHERE session_id = $1",
                session_id,
                nodes,
                edges,
            )
            event = await self._append(
                conn,
                session_id,
                "graph.changed",
                source=source,
                depth=depth,
                data={"rev": rev + 1},
                graph={"nodes": changed},
                idempotency_key=idempotency_key,
            )
            return {"rev": rev + 1, "changed": changed}, int(event.id)

    async def read_graph(self, session_id: str, nodes: list[str] | None = None) -> dict[str, Any]:
        """The graph (or only `nodes` and the edges between them and anything), with its rev."""
        await self.get_session(session_id)
        row = await self.pool.fetchrow(
            "SELECT rev, nodes, edges FROM orchestrator.graphs WHERE session_id = $1", session_id
        )
        rev: int = 0 if row is None else int(row["rev"])
        all_nodes: dict[str, Any] = {} if row is None else dict(row["nodes"])
        all_edges: list[dict[str, Any]] = [] if row is None else list(row["edges"])
        if nodes is None:
            return {"rev": rev, "nodes": all_nodes, "edges": all_edges}
        wanted = set(nodes)
        return {
            "rev": rev,
            "nodes": {k: v for k, v in all_nodes.items() if k in wanted},
            "edges": [e for e in all_edges if e["from"] in wanted or e["to"] in wanted],
        }


async def _graph_row(conn: Connection, session_id: str) -> dict[str, Any]:
    await conn.execute("INSERT INTO orchestrator.graphs (session_id) VALUES ($1) ON CONFLICT DO NOTHING", session_id)
    row = await conn.fetchrow(
        "SELECT rev, nodes, edges FROM orchestrator.graphs WHERE session_id = $1 FOR UPDATE", session_id
    )
    assert row is not None
    return dict(row)
