"""The inbound loop's workflow: read what a batch points at, resolve on an answer, close on a silence.

A batch holds posts on the channels (the agent's questions, the replies) and, after thirty quiet minutes, the
lane's `lane.idle` event. The first reply that answers (`answer: ...`) is written as the resolution; a silence
with no resolution is written as a timeout. Either closes the session with a drain, so replies that arrive
around the close are still read, and kept as late replies.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from orchestrator.sdk import RunInput, RunSession

ANSWER_PREFIX = "answer:"


def first_answer(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    for event in events:
        item = event.get("item") or {}
        message = item.get("message")
        if item.get("role") == "reply" and isinstance(message, str) and message.lower().startswith(ANSWER_PREFIX):
            return {
                "type": "resolution",
                "answer": message[len(ANSWER_PREFIX) :].strip(),
                "channel": event["alias"],
                "event_id": event["id"],
            }
    return None


@workflow.defn(name="resolver")
class Resolver:
    @workflow.run
    async def run(self, run: RunInput) -> dict[str, Any] | None:
        session = RunSession(run)
        # The batch says where to look; the replies' whole messages are read by their ids.
        events = await session.batch_events(limit=1000)
        if await session.read_object("agent/resolution") is not None:
            replies = [e["id"] for e in events if (e.get("item") or {}).get("role") == "reply"]
            if replies:
                await session.write_object("agent/late-replies", {"type": "late", "events": replies})
            return None
        answer = first_answer(events)
        if answer is not None:
            await session.write_object("agent/resolution", answer)
            await session.close_session(drain=True)
            return answer
        silence = next((e for e in events if e["type"] == "lane.idle"), None)
        if silence is not None:
            timeout = {"type": "timeout", "after_seconds": silence["data"]["after_seconds"]}
            await session.write_object("agent/resolution", timeout)
            await session.close_session(drain=True)
            return timeout
        return None
