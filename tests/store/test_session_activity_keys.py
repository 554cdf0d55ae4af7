"""`orchestrator.session` as a worker of another language calls it (docs/polyglot.md): a write with a key finds
the first one's when retried; one with no key writes anew each time, never taken for another keyless one."""

from __future__ import annotations

from typing import Any

from temporalio.testing import ActivityEnvironment

from activities.session import SessionActivities, SessionCall
from orchestrator.platform import Platform
from tests.store.helpers import ok


async def _emit(platform: Platform, session_id: str, key: str | None, n: int) -> Any:
    activities = SessionActivities(platform.store, platform.settings, None)
    call = SessionCall(
        op="emit_events",
        args={"events": [{"type": "ticket.escalated", "data": {"n": n}}]},
        session_id=session_id,
        idempotency_key=key,
    )
    return await ActivityEnvironment().run(activities.session_call, call)


async def test_an_emit_with_no_key_writes_each_time_and_one_with_a_key_once(platform: Platform) -> None:
    await ok(platform, "save_event_type", name="ticket.escalated", schema={"type": "object"})
    sid = (await ok(platform, "open_session"))["session"]["id"]

    first, second = await _emit(platform, sid, None, 1), await _emit(platform, sid, None, 2)
    assert first != second, "two keyless emits are two events"
    keyed = await _emit(platform, sid, "exe:1:3:abc", 3)
    assert await _emit(platform, sid, "exe:1:3:abc", 3) == keyed, "a retried call finds the first one's event"

    events = (await ok(platform, "list_session_events", session_id=sid, types=["ticket.escalated"]))["events"]
    assert [e["data"]["n"] for e in events] == [1, 2, 3]
