"""`orchestrator events --follow` rides out an API that answers `unavailable` (its database or Temporal out of
reach) as it rides out an API that is gone: it says so, asks again from the last event it printed, and goes on.
A refusal of the command itself (`not_found`) still ends it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from orchestrator.core.errors import CommandError
from orchestrator.dev import inspect
from orchestrator.dev.inspect import tail_events


class Flaky:
    """A client whose first two reads answer `error`, then the session's events from `after` on."""

    def __init__(self, error: str, events: list[dict[str, Any]]) -> None:
        self.error, self.events, self.asked = error, events, list[int]()

    async def list_session_events(self, session_id: str, *, after: int, limit: int, types: Any) -> dict[str, Any]:
        self.asked.append(after)
        if len(self.asked) <= 2:
            raise CommandError(self.error, "database: out of reach for now", retry_after=1)  # type: ignore[arg-type]
        page = [e for e in self.events if e["id"] > after]
        return {"events": page, "last_id": page[-1]["id"] if page else after}

    async def stream(
        self, session_id: str, *, after: int, filter: Any, on_trimmed: Any = None, on_closed: Any = None
    ) -> AsyncIterator[dict[str, Any]]:
        raise NotImplementedError
        yield {}  # pragma: no cover - makes this a generator


async def test_following_waits_out_unavailable_and_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inspect, "RECONNECT_SECONDS", (0.01,))
    events = [{"id": n} for n in (3, 4)]
    client, emitted, gaps = Flaky("unavailable", events), list[dict[str, Any]](), list[str]()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(1.0):
            await tail_events(
                client,  # type: ignore[arg-type]
                "ses_1",
                emitted.append,
                after=2,
                follow=True,
                on_gap=gaps.append,
                poll_seconds=0.01,
            )
    assert emitted == events, "every event once, after the outage"
    assert client.asked[:3] == [2, 2, 2], "asked again from the last event printed"
    assert gaps[0].startswith("the API answered unavailable: database: out of reach"), gaps
    assert gaps[1] == "reconnected; following from event 2", gaps


@pytest.mark.parametrize("follow", [True, False])
async def test_a_refusal_or_no_follow_ends_it(follow: bool) -> None:
    error = "not_found" if follow else "unavailable"
    with pytest.raises(CommandError) as ended:
        await tail_events(Flaky(error, []), "ses_1", print, follow=follow)  # type: ignore[arg-type]
    assert ended.value.code == error
