"""The kit tests an app that keeps its own tables: the harness runs the app's `migrate` before its declarations,
so the capture on the table it makes applies, and a test writes a captured row in the app's own transaction on
`harness.database_url` and sees the run that row causes. A `migrate` that fails stops the harness naming it,
with nothing of the app applied."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from orchestrator.app_loader import UserApp
from orchestrator.dev.app_migrate import MigrateFailed
from orchestrator.testing import Harness
from orchestrator.transactional import emit

DESK = "examples.desk.app"


async def test_a_ticket_written_in_the_apps_transaction_is_captured_and_run_by_the_desk() -> None:
    async with Harness(app=DESK) as h:
        sid = (await h.client.open_session(alias="desk"))["session"]["id"]
        conn = await asyncpg.connect(h.database_url)
        try:
            # The application's own write: the row and the escalation commit together, captured by the trigger.
            async with conn.transaction():
                insert = "INSERT INTO tickets (id, session_id, title, internal_notes) VALUES (1, $1, $2, 'vip')"
                await conn.execute(insert, sid, "printer jammed")
                await emit(conn, sid, "ticket.escalated", {"ticket": 1, "reason": "on fire"})
        finally:
            await conn.close()
        await h.settle()

        [run] = (await h.client.list_executions(sid, listener="desk"))["executions"]
        assert run["status"] == "completed", run
        events = (await h.client.list_session_events(sid))["events"]
        assert [e["type"] for e in events if e["type"].startswith("ticket.")] == ["ticket.created", "ticket.escalated"]
        ticket = (await h.client.read_object(sid, "desk/tickets/1"))["object"]["value"]
        assert (ticket["title"], ticket["session_id"]) == ("printer jammed", sid)
        assert "internal_notes" not in ticket, "a column the capture leaves out never reaches the run"
        escalations = (await h.client.read_object(sid, "desk/escalations"))["object"]["value"]
        assert escalations["tickets"] == ["1"]


def _broken(database_url: str) -> None:
    raise RuntimeError(f"no disk left for {database_url.split('?')[0]}")


async def test_a_migrate_that_fails_stops_the_harness_naming_it_with_nothing_applied() -> None:
    listener: dict[str, Any] = {
        "name": "never",
        "filter": {"types": ["object.written"]},
        "action": {"type": "object", "alias": "never", "value": {"type": "never"}},
    }
    broken = UserApp(name="tests.broken_migrate", listeners=[listener], migrate=_broken)
    with pytest.raises(MigrateFailed) as refused:
        async with Harness(app=broken):
            pytest.fail("the harness ran over a failed migrate")
    assert (
        str(refused.value)
        == "app tests.broken_migrate: migrate: RuntimeError: no disk left for postgresql://postgres:@/postgres"
    )
    assert isinstance(refused.value.__cause__, RuntimeError), "the app's own error, with its traceback"
