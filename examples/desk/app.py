"""The desk (`orchestrator dev --app examples.desk.app`): an application whose own table drives a listener.

The application keeps its tickets in its own table, `public.tickets`, in the platform's database. The capture
below makes every insert, update and delete of a ticket an event in the commit of the change, and an escalation
also emits `ticket.escalated` in its transaction (docs/transactions.md). One listener, `desk`, gathers them for a
second and runs the `desk` workflow, which writes what the table now says under `desk/tickets/*`.

Try it. The table must exist before the app starts (the capture is a trigger on it), so the platform runs once
without the app to make it, as an application's own migrations would:

    orchestrator dev --data-dir .desk          # its banner prints the database URL; in another shell:
    export ORCHESTRATOR_DATABASE_URL='postgresql://postgres:@/postgres?host=.../.desk/postgres'
    python -m examples.desk.tables create      # then Ctrl-C the platform, and start it with the app:
    orchestrator dev --app examples.desk.app --data-dir .desk
    orchestrator call '{"command": "open_session", "alias": "desk"}'
    python -m examples.desk.tables write SESSION_ID
    orchestrator call '{"command": "list_objects", "session_id": "SESSION_ID", "prefix": "desk"}'
"""

from __future__ import annotations

from typing import Any

from examples.desk.workflows import Desk

workflows = [Desk]

event_types: list[dict[str, Any]] = [
    {
        "name": "ticket.escalated",
        "schema": {
            "type": "object",
            "properties": {"ticket": {"type": "integer"}, "reason": {"type": "string"}},
            "required": ["ticket"],
        },
        "description": "a ticket was escalated (emitted in the transaction that escalated it)",
    }
]

captures: list[dict[str, Any]] = [
    {"table": "tickets", "type_prefix": "ticket", "session_column": "session_id", "exclude": ["internal_notes"]}
]

DESK: dict[str, Any] = {
    "name": "desk",
    "description": "Keep desk/tickets/* as the tickets table says, a second after each burst of changes.",
    "filter": {"types": ["ticket.*"]},
    "batch": {"window_seconds": 1, "max_events": 500},
    "action": {"type": "workflow", "workflow": "desk"},
}

listeners = [DESK]
