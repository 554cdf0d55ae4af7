"""A listener whose workflow is not Python: `orchestrator dev --app examples.polyglot.app`, and the TypeScript worker
in `worker/` (`npm start` there) runs it. README.md beside this file shows both.

Orders come in as `order.placed` events; each batch starts `summarizeOrders` on the task queue `polyglot`, where
the TypeScript worker polls, and that workflow reads its batch's events and writes `summaries/orders` through
the platform's activities by name (`@orchestrator/client/workflow`). The platform's own worker runs no workflow
of this app: the list is empty, and the run's queue is the action's.
"""

from __future__ import annotations

from typing import Any

# The task queue the TypeScript worker polls (`worker/src/worker.ts` reads the same name).
TASK_QUEUE = "polyglot"

workflows: list[type] = []

event_types: list[dict[str, Any]] = [
    {
        "name": "order.placed",
        "description": "an order, as the shop's checkout places it",
        "schema": {
            "type": "object",
            "properties": {"order": {"type": "string"}, "amount": {"type": "number", "minimum": 0}},
            "required": ["order", "amount"],
        },
    }
]

listeners: list[dict[str, Any]] = [
    {
        "name": "order_summary",
        "description": "the orders of each batch summed up by a TypeScript workflow",
        "filter": {"types": ["order.placed"]},
        "batch": {"window_seconds": 0.5, "max_events": 100},
        "action": {
            "type": "workflow",
            "workflow": "summarizeOrders",
            "task_queue": TASK_QUEUE,
            "input": {"currency": "EUR"},
        },
        "owns": ["summaries/**"],
    }
]
