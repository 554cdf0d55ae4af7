"""The inbound loop as one waiting run (`examples.inbound.loop_app`), tested through the kit on Temporal's clock:
replies are appended to the transcript turn after turn, an answer resolves, a resolution asked from outside
resolves even when it comes with replies (the replies win that turn), and thirty quiet minutes time out."""

from __future__ import annotations

from typing import Any

from examples.inbound.loop import QUIET_SECONDS
from orchestrator.core.errors import CommandError
from orchestrator.testing import Harness

APP = "examples.inbound.loop_app"


async def post(h: Harness, sid: str, alias: str, role: str, message: str) -> int:
    reply = await h.client.post_thread_item(sid, alias, {"type": "message", "role": role, "message": message})
    return int(reply["event_id"])


async def value(h: Harness, sid: str, alias: str) -> dict[str, Any] | None:
    try:
        return dict((await h.client.read_object(sid, alias))["object"]["value"])
    except CommandError as error:
        assert error.code == "not_found"
        return None


async def waiting(h: Harness, sid: str) -> list[dict[str, Any]]:
    executions = (await h.client.command({"command": "list_executions", "session_id": sid}))["executions"]
    return [e["waiting"] for e in executions if e.get("waiting")]


async def test_replies_fill_the_transcript_turn_after_turn_and_an_answer_resolves() -> None:
    async with Harness(app=APP) as h:
        sid = (await h.client.open_session())["session"]["id"]
        await post(h, sid, "channels/email", "question", "Which plan do you want?")
        await h.settle()
        [wait] = await waiting(h, sid)
        assert wait["seq"] == 1 and [c["types"] for c in wait["conditions"]] == [
            ["thread.item_posted"],
            ["object.written"],
        ]
        first = await post(h, sid, "channels/email", "reply", "let me think")
        await h.settle()
        assert (await value(h, sid, "agent/transcript")) == {
            "type": "transcript",
            "replies": [{"id": first, "channel": "channels/email", "message": "let me think"}],
        }
        assert [w["seq"] for w in await waiting(h, sid)] == [2], "the run waits again"
        answered = await post(h, sid, "channels/sms", "reply", "Answer: the yearly one")
        await h.settle()
        assert await value(h, sid, "agent/resolution") == {
            "type": "resolution",
            "answer": "the yearly one",
            "channel": "channels/sms",
            "event_id": answered,
        }
        transcript = await value(h, sid, "agent/transcript")
        assert transcript is not None and [r["id"] for r in transcript["replies"]] == [first, answered]
        sessions = (await h.client.command({"command": "list_sessions"}))["sessions"]
        assert next(s["status"] for s in sessions if s["id"] == sid) == "closed"


async def test_thirty_quiet_minutes_time_the_loop_out_in_a_moment() -> None:
    async with Harness(app=APP) as h:
        sid = (await h.client.open_session())["session"]["id"]
        await post(h, sid, "channels/sms", "question", "Still there?")
        await h.settle()
        await h.sleep(QUIET_SECONDS - 60)
        await h.settle()
        assert await value(h, sid, "agent/resolution") is None, "not yet"
        await h.sleep(120)
        await h.settle()
        assert await value(h, sid, "agent/resolution") == {"type": "timeout", "after_seconds": float(QUIET_SECONDS)}


async def test_a_resolution_that_comes_with_replies_waits_for_the_next_turn() -> None:
    async with Harness(app=APP) as h:
        sid = (await h.client.open_session())["session"]["id"]
        # Everything arrives before the run's first wait: the replies win the first turn, the resolution the next.
        await post(h, sid, "channels/email", "question", "Ready?")
        reply = await post(h, sid, "channels/email", "reply", "almost")
        resolve = await h.client.write_object(sid, "agent/resolve", {"type": "resolve", "answer": "closed by an agent"})
        await h.settle()
        transcript = await value(h, sid, "agent/transcript")
        assert transcript is not None and [r["id"] for r in transcript["replies"]] == [reply]
        assert await value(h, sid, "agent/resolution") == {
            "type": "resolution",
            "answer": "closed by an agent",
            "event_id": resolve["event_id"],
        }
