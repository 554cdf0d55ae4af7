"""The missions app (`orchestrator dev --app examples.missions.app`): the listeners of SPEC section 10.

- `orchestrate`: any change under `missions/**` (objects, thread items other than chatter, graph
  changes), a sweep request at `app/missions/sweep` or a clock tick at `ops/clock` (a schedule that writes
  it every 15 minutes: a time rule with no event of its own), one run at a time, a burst gathered for 2 s;
  the `orchestrator` workflow writes each changed mission's status to `views/missions/<id>/status`. Its
  `events` input is SPEC section 10's; as it names `batch.messages`, the run reads the same list there.
  A failed run is repeated twice, 30 s and then 60 s later.
- `respond`: each `request` item posted under `chats/**` starts `responder`, one at a time per thread,
  threads in parallel (its template names nothing: the run reads its pointers with `batch_messages()`);
  every batch leaves a receipt on `ops/receipts`.
- `inbox`: failed executions, gathered for 60 s, posted as one JSON item on `ops/inbox` for an agent.
- `status_view`: writes to any cell's `meta`, gathered for 2 s with only the newest per cell kept,
  written as one object at `views/cells/changed`.
"""

from __future__ import annotations

from typing import Any

from examples.missions.workflows import Orchestrator, Responder

workflows = [Orchestrator, Responder]
# The workflows reach the session through the platform's own `orchestrator.session` activity.
activities: list[Any] = []

ORCHESTRATE: dict[str, Any] = {
    "name": "orchestrate",
    "description": "Move every mission on any change, or on a sweep request.",
    "filter": {
        "types": ["object.**", "thread.item_posted", "graph.changed"],
        "aliases": ["missions/**", "app/missions/sweep", "ops/clock"],
        "where": [{"path": "item.type", "op": "not_in", "value": ["text", "thinking"]}],
    },
    "concurrency": {"mode": "serial"},
    "batch": {"window_seconds": 2, "max_events": 100},
    "action": {"type": "workflow", "workflow": "orchestrator", "input": {"events": "{{ batch.messages }}"}},
    "retry": {"attempts": 2, "delay_seconds": 30},
}

RESPOND: dict[str, Any] = {
    "name": "respond",
    "description": "Answer each request on its own thread.",
    "filter": {
        "types": ["thread.item_posted"],
        "aliases": ["chats/**"],
        "where": [{"path": "item.role", "op": "eq", "value": "request"}],
    },
    "concurrency": {"mode": "keyed", "key": "alias"},
    "batch": {"max_events": 1},
    "action": {"type": "workflow", "workflow": "responder"},
    "receipt": {"alias": "ops/receipts"},
}

INBOX: dict[str, Any] = {
    "name": "inbox",
    "description": "Hand failed runs to an agent.",
    "filter": {
        "types": ["execution.ended"],
        "where": [{"path": "execution.status", "op": "eq", "value": "failed"}],
    },
    "concurrency": {"mode": "parallel"},
    "batch": {"window_seconds": 60},
    "action": {
        "type": "thread_item",
        "alias": "ops/inbox",
        # The seed's agent inbox: the failures as a json block (a json item's message may be any JSON).
        "item": {"type": "json", "role": "system", "message": "{{ batch.events }}"},
    },
}

STATUS_VIEW: dict[str, Any] = {
    "name": "status_view",
    "description": "The latest state of every cell.",
    "filter": {"types": ["object.written"], "aliases": ["missions/*/cells/*/meta"]},
    "concurrency": {"mode": "serial"},
    "batch": {"window_seconds": 2, "distinct_by": "alias"},
    "action": {
        "type": "object",
        "alias": "views/cells/changed",
        "value": {"type": "json", "events": "{{ batch.events }}"},
    },
}

listeners = [ORCHESTRATE, RESPOND, INBOX, STATUS_VIEW]
