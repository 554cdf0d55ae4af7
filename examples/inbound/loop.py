"""The inbound loop as one run: the seed's waiting step, `AnyOf(Replies.AtLeast(1), Resolutions.ForOne(),
Timer(inactivity))`, written as a loop around `RunSession.wait_for_event`.

The agent's first question starts the run. It then waits for replies on the channels (at least one, up to fifty
at a time), a resolution written from outside (`agent/resolve`), or thirty quiet minutes: the first declared
condition wins when several are ready, and only its events are taken, so a resolution that comes with replies
waits for the next turn. Each turn appends what it heard to the transcript (`agent/transcript`); an answering
reply (`answer: ...`), a resolution or the silence ends the loop with the session's resolution, and the session
closes with a drain. A reply that comes while the run writes is not lost: the next wait counts from where the
last one left off.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from examples.inbound.workflows import first_answer
    from orchestrator.sdk import RunInput, RunSession

QUIET_SECONDS = 30 * 60
REPLIES: dict[str, Any] = {
    "types": ["thread.item_posted"],
    "aliases": ["channels/**"],
    "where": [{"path": "item.role", "op": "eq", "value": "reply"}],
}
RESOLUTIONS: dict[str, Any] = {"types": ["object.written"], "aliases": ["agent/resolve"]}


@workflow.defn(name="inbound_loop")
class InboundLoop:
    @workflow.run
    async def run(self, run: RunInput) -> dict[str, Any]:
        session = RunSession(run)
        transcript: list[dict[str, Any]] = []
        while True:
            heard = await session.wait_for_event([REPLIES, RESOLUTIONS], timeout_seconds=QUIET_SECONDS, max_events=50)
            if heard["matched"] is None:
                resolution: dict[str, Any] | None = {"type": "timeout", "after_seconds": float(QUIET_SECONDS)}
            elif heard["matched"] == 1:
                asked = await session.read_object("agent/resolve")
                value = (asked or {}).get("value") or {}
                resolution = {"type": "resolution", "answer": value.get("answer"), "event_id": heard["events"][0]["id"]}
            else:
                transcript += [
                    {"id": e["id"], "channel": e["alias"], "message": (e.get("item") or {}).get("message")}
                    for e in heard["events"]
                ]
                await session.write_object("agent/transcript", {"type": "transcript", "replies": transcript})
                resolution = first_answer(heard["events"])
            if resolution is not None:
                await session.write_object("agent/resolution", resolution)
                await session.close_session(drain=True)
                return resolution
