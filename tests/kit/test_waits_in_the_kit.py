"""Waits and `cancel_on` in the testing kit, on Temporal's time-skipping server: a day-long wait times out in a
moment when the test sleeps a day, an answer comes as soon as its event is written, and an event named by
`cancel_on` cancels the run it keys."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow

from orchestrator.app_loader import UserApp
from orchestrator.dev.inspect import format_status, session_status
from orchestrator.testing import Harness

with workflow.unsafe.imports_passed_through():
    from orchestrator.sdk import RunInput, RunSession

DAY = 24 * 3600.0


@workflow.defn(name="approval")
class Approval:
    """Waits a day for its ticket's approval; writes what it heard. Cancelled, it notes so first."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        session = RunSession(run)
        ticket = run.batch.lane
        try:
            heard = await session.wait_for_event(
                [{"types": ["object.written"], "aliases": [f"{ticket}/approval"]}], timeout_seconds=DAY
            )
        except asyncio.CancelledError:
            await session.write_object(f"{ticket}/outcome", {"type": "outcome", "cancelled": True})
            raise
        await session.write_object(
            f"{ticket}/outcome", {"type": "outcome", "matched": heard["matched"], "events": len(heard["events"])}
        )


APP = UserApp(
    name="tests.kit_waits",
    workflows=[Approval],
    listeners=[
        {
            "name": "approve",
            "filter": {"types": ["object.written"], "aliases": ["tickets/*"]},
            "concurrency": {"mode": "keyed", "key": "alias", "max_parallel": 4},
            "batch": {"max_events": 1},
            "action": {"type": "workflow", "workflow": "approval"},
            "cancel_on": [{"types": ["object.deleted"], "aliases": ["tickets/*"], "key": "alias"}],
        }
    ],
)


async def outcome(h: Harness, sid: str, ticket: str) -> dict[str, Any] | None:
    objects = (await h.client.list_objects(sid, prefix=f"{ticket}/outcome"))["objects"]
    return dict(objects[0]["value"]) if objects else None


async def test_a_day_long_wait_times_out_when_the_test_sleeps_a_day() -> None:
    async with Harness(app=APP) as h:
        sid = (await h.client.open_session())["session"]["id"]
        await h.client.write_object(sid, "tickets/1", {"type": "ticket"})
        await h.settle()
        assert await outcome(h, sid, "tickets/1") is None, "the run waits, and the kit is quiet meanwhile"
        await h.sleep(DAY - 60)
        await h.settle()
        assert await outcome(h, sid, "tickets/1") is None
        await h.sleep(120)
        await h.settle()
        assert await outcome(h, sid, "tickets/1") == {"type": "outcome", "matched": None, "events": 0}


async def test_an_approval_answers_the_wait_and_a_deletion_cancels_the_other_run() -> None:
    async with Harness(app=APP) as h:
        sid = (await h.client.open_session())["session"]["id"]
        for ticket in ("tickets/2", "tickets/3"):
            await h.client.write_object(sid, ticket, {"type": "ticket"})
        await h.settle()
        await h.client.write_object(sid, "tickets/2/approval", {"type": "approval"})
        await h.client.delete_object(sid, "tickets/3")
        await h.settle()
        assert await outcome(h, sid, "tickets/2") == {"type": "outcome", "matched": 0, "events": 1}
        assert await outcome(h, sid, "tickets/3") == {"type": "outcome", "cancelled": True}
        runs = {e["lane"]: e["status"] for e in (await h.client.list_executions(sid))["executions"]}
        assert runs == {"tickets/2": "completed", "tickets/3": "cancelled"}


async def test_status_shows_a_run_that_waits_and_on_what() -> None:
    """`orchestrator status`'s view of a session: the listener's runs that wait, each with its wait's number, its
    conditions, its position and its deadline."""
    async with Harness(app=APP) as h:
        sid = (await h.client.open_session())["session"]["id"]
        written = await h.client.write_object(sid, "tickets/9", {"type": "ticket"})
        await h.settle()
        status = await session_status(h.client, sid)
        [approve] = status["listeners"]
        [waiting] = approve["waiting_runs"]
        assert (waiting["lane"], waiting["seq"], waiting["after"]) == ("tickets/9", 1, written["event_id"])
        assert waiting["conditions"] == [{"types": ["object.written"], "aliases": ["tickets/9/approval"]}]
        table = format_status(status)
        assert "runs waiting for events:" in table
        assert "object.written on tickets/9/approval" in table
