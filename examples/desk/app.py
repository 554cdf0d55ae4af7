"""The desk (`orchestrator dev --app examples.desk.app`): an application whose own table drives a listener.

The application keeps its tickets in its own table, `public.tickets`, in the platform's database; its `migrate`
makes the table before the app's declarations are applied. The capture below makes every insert, update and
delete of a ticket an event in the commit of the change, and an escalation also emits `ticket.escalated` in its
transaction (docs/transactions.md). One listener, `desk`, gathers them for a second and runs the `desk` workflow,
which writes what the table now says under `desk/tickets/*`.

Try it, from nothing: one command makes the table, captures it and runs the listener.

    orchestrator dev --app examples.desk.app --data-dir .desk   # its banner prints the database URL; in another shell:
    export ORCHESTRATOR_DATABASE_URL='postgresql://postgres:@/postgres?host=.../.desk/postgres'
    orchestrator call '{"command": "open_session", "alias": "desk"}'
    python -m examples.desk.tables write SESSION_ID
    orchestrator call '{"command": "list_objects", "session_id": "SESSION_ID", "prefix": "desk"}'
"""

from __future__ import annotations

from typing import Any

# The app's migration: run with the platform's database URL before the declarations below are planned (the
# capture is a trigger on the table it makes).
from examples.desk.tables import migrate as migrate
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
