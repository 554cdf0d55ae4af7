"""The desk's workflow: look at what changed on the tickets, write the board that should follow.

A batch holds `ticket.created`, `ticket.updated` and `ticket.deleted` events (the capture of the application's
`tickets` table) and `ticket.escalated` (emitted beside an escalation, in its transaction). The run keeps one
object per ticket under `desk/tickets/<id>` and a board of the open ones, so what it writes is always what the
table says, however the changes were batched.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from orchestrator.sdk import RunInput, RunSession


def board_changes(events: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any] | None], list[str]]:
    """Each ticket's latest row by its id (None: deleted), and the ids escalated in this batch."""
    latest: dict[str, dict[str, Any] | None] = {}
    escalated: list[str] = []
    for event in events:
        data = event.get("data") or {}
        if event["type"] == "ticket.escalated":
            escalated.append(str(data["ticket"]))
        elif event["type"].startswith("ticket."):
            latest[str(data["_id"])] = None if event["type"] == "ticket.deleted" else data["doc"]
    return latest, escalated


@workflow.defn(name="desk")
class Desk:
    @workflow.run
    async def run(self, run: RunInput) -> dict[str, Any]:
        session = RunSession(run)
        latest, escalated = board_changes(await session.batch_events(limit=1000))
        for ticket, row in sorted(latest.items()):
            value = {"type": "ticket", "deleted": True} if row is None else {"type": "ticket", **row}
            await session.write_object(f"desk/tickets/{ticket}", value)
        if escalated:
            await session.write_object("desk/escalations", {"type": "escalations", "tickets": escalated})
        return {"tickets": sorted(latest), "escalated": escalated}
