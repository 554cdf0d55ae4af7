"""The inbound example, tested the way its author would: through the testing kit, on Temporal's clock."""

from __future__ import annotations

from examples.inbound.app import QUIET_SECONDS
from orchestrator.core.errors import CommandError
from orchestrator.testing import Harness

APP = "examples.inbound.app"


async def post(h: Harness, sid: str, alias: str, role: str, message: str) -> int:
    reply = await h.client.post_thread_item(sid, alias, {"type": "message", "role": role, "message": message})
    return int(reply["event_id"])


async def resolution_of(h: Harness, sid: str) -> dict[str, object] | None:
    try:
        return dict((await h.client.read_object(sid, "agent/resolution"))["object"]["value"])
    except CommandError as error:
        assert error.code == "not_found"
        return None


async def status(h: Harness, sid: str) -> str:
    sessions = (await h.client.command({"command": "list_sessions"}))["sessions"]
    return str(next(s["status"] for s in sessions if s["id"] == sid))


async def test_an_answer_resolves_and_closes_the_session_after_the_drain() -> None:
    async with Harness(app=APP) as h:
        sid = (await h.client.open_session())["session"]["id"]
        await post(h, sid, "channels/email", "question", "Which plan do you want?")
        await h.settle()
        assert await resolution_of(h, sid) is None
        answered = await post(h, sid, "channels/email", "reply", "Answer: the yearly one")
        await h.settle()
        resolution = await resolution_of(h, sid)
        assert resolution == {
            "type": "resolution",
            "answer": "the yearly one",
            "channel": "channels/email",
            "event_id": answered,
        }
        assert await status(h, sid) == "closed"


async def test_thirty_quiet_minutes_close_the_session_as_a_timeout() -> None:
    async with Harness(app=APP) as h:
        sid = (await h.client.open_session())["session"]["id"]
        await post(h, sid, "channels/sms", "question", "Still there?")
        await h.settle()
        await h.sleep(QUIET_SECONDS - 60)
        await post(h, sid, "channels/sms", "reply", "thinking about it")  # a reply, not an answer: the clock restarts
        await h.settle()
        await h.sleep(QUIET_SECONDS - 60)
        await h.settle()
        assert await resolution_of(h, sid) is None, "the reply restarted the clock"
        await h.sleep(120)
        await h.settle()
        resolution = await resolution_of(h, sid)
        assert resolution == {"type": "timeout", "after_seconds": float(QUIET_SECONDS)}
        assert await status(h, sid) == "closed"
