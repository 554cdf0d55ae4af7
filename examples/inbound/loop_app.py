"""The inbound loop as one run (`orchestrator dev --app examples.inbound.loop_app`): the agent's first question on a
channel starts one run per session, which waits for replies, a resolution or a silence, turn after turn
(`loop.py`). Compare `app.py`, the same loop built from a listener and its idle timer (docs/waits.md says when to
use which).
"""

from __future__ import annotations

from typing import Any

from examples.inbound.loop import InboundLoop

workflows = [InboundLoop]

INBOUND_LOOP: dict[str, Any] = {
    "name": "inbound-loop",
    "description": "The agent's first question starts the conversation's one run; it hears the rest by waiting.",
    "filter": {
        "types": ["thread.item_posted"],
        "aliases": ["channels/**"],
        "where": [{"path": "item.role", "op": "eq", "value": "question"}],
    },
    "batch": {"window_seconds": 0, "max_events": 1},
    "action": {"type": "workflow", "workflow": "inbound_loop"},
}

listeners = [INBOUND_LOOP]
