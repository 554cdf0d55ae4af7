"""The door's deadline on its own: work done in time answers as it would (its result, or its error), work that is
not is answered `Missed` at the deadline and let go behind the answer, cancelled."""

from __future__ import annotations

import asyncio
import time

import pytest

from orchestrator.door.deadlines import Deadlines, Missed
from orchestrator.store.held_connections import note_lent


async def test_work_done_in_time_answers_as_it_would() -> None:
    async def answer() -> str:
        return "done"

    async def fail() -> str:
        raise ValueError("its own")

    deadlines = Deadlines()
    assert await deadlines.run(answer(), 5.0) == "done"
    assert await deadlines.run(answer(), None) == "done", "no deadline: awaited as it is"
    with pytest.raises(ValueError, match="its own"):
        await deadlines.run(fail(), 5.0)


async def test_work_past_its_deadline_is_answered_then_and_cancelled_behind_the_answer() -> None:
    cancelled = asyncio.Event()

    async def hang() -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    deadlines = Deadlines()
    began = time.monotonic()
    missed = await deadlines.run(hang(), 0.2)
    assert isinstance(missed, Missed) and time.monotonic() - began < 2.0
    assert missed == Missed(0.2, reached=False, on_database=True), "took no connection: waiting for its first"
    async with asyncio.timeout(5):
        await cancelled.wait()
        await deadlines.close()
    assert deadlines.unfinished == 0


class _Lent:
    """A connection as the pool lends it, open."""

    def is_closed(self) -> bool:
        return False

    def terminate(self) -> None:
        raise AssertionError("a connection of work that ended whole is not closed")


async def test_work_on_the_database_past_its_deadline_is_left_as_long_again_to_end_whole() -> None:
    """A command of several steps on a slow database (not a gone one) ends whole behind the answer, not cut between
    two of its steps (a replay asked of some lanes and not recorded)."""
    steps: list[str] = []
    ended = asyncio.Event()

    async def two_steps() -> str:
        await note_lent(_Lent())  # as the pool's setup notes a connection lent to this work
        steps.append("first")
        await asyncio.sleep(0.3)
        steps.append("second")
        ended.set()
        return "done"

    deadlines = Deadlines()
    missed = await deadlines.run(two_steps(), 0.2)
    assert missed == Missed(0.2, reached=True, on_database=True)
    async with asyncio.timeout(5):
        await ended.wait()
    assert steps == ["first", "second"], "it ended whole"
