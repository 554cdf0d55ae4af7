"""The inbound loop (`orchestrator dev --app examples.inbound.app`): an agent session that asks on its channels,
waits for a reply, resolves on an answer, and gives up after thirty minutes of silence.

One listener, `inbound`, sees every item posted on a channel (`channels/**`): the agent's questions arm its idle
timer, the replies are gathered for a second and read. After `QUIET_SECONDS` with nothing posted, the lane's own
`lane.idle` event arrives in the same lane, so a timeout never runs beside a reply being read. Its workflow,
`resolver`, resolves on an answer or closes the session on the silence, with a drain either way so that a reply
racing the close still reaches a run.
"""

from __future__ import annotations

from typing import Any

from examples.inbound.workflows import Resolver

QUIET_SECONDS = 30 * 60

workflows = [Resolver]

INBOUND: dict[str, Any] = {
    "name": "inbound",
    "description": "Read replies as they come; resolve on an answer, close after thirty quiet minutes.",
    "filter": {"types": ["thread.item_posted"], "aliases": ["channels/**"]},
    "batch": {"window_seconds": 1, "max_events": 50},
    "idle": {"after_seconds": QUIET_SECONDS},
    "action": {"type": "workflow", "workflow": "resolver"},
}

listeners = [INBOUND]
