"""An app's workflow that reads `run.batch.messages` or `run.batch.events` its listener's template did not name: the
run fails, and its `execution.ended` says which call reads them, rather than the run seeing an empty batch."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

from orchestrator.app_loader import UserApp
from orchestrator.testing import Harness

with workflow.unsafe.imports_passed_through():
    from orchestrator.sdk import RunInput, RunSession


@workflow.defn(name="batch_reader")
class BatchReader:
    """Counts what its batch holds the way its input says: `run.batch.messages`, `run.batch.events`, or the
    session's calls; writes the count."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        session = RunSession(run)
        read = run.input["read"]
        if read == "calls":
            count = len(await session.batch_messages()) + len(await session.batch_events())
        else:
            count = len(run.batch.messages) + len(run.batch.events) if read == "both" else len(getattr(run.batch, read))
        await session.write_object(f"counted/{run.listener}", {"type": "count", "count": count})


def reader(name: str, read: str, **template: Any) -> dict[str, Any]:
    return {
        "name": name,
        "filter": {"types": ["object.written"], "where": [{"path": "alias", "op": "prefix", "value": "tickets/"}]},
        "action": {"type": "workflow", "workflow": "batch_reader", "input": {"read": read, **template}},
    }


APP = UserApp(
    name="tests.kit_batch_not_carried",
    workflows=[BatchReader],
    listeners=[
        reader("messages", "messages"),
        reader("events", "events"),
        reader("calls", "calls"),
        reader("named", "both", m="{{ batch.messages }}", e="{{ batch.events }}"),
    ],
)


async def test_reading_what_did_not_come_fails_the_run_naming_the_call_that_reads_it() -> None:
    async with Harness(app=APP) as h:
        sid = (await h.client.open_session())["session"]["id"]
        await h.client.write_object(sid, "tickets/1", {"type": "ticket"})
        await h.settle()
        ended = (await h.client.list_session_events(sid, types=["execution.ended"]))["events"]
        by_listener = {e["source"]["listener"]: e["execution"] for e in ended}
        counted = {
            o["alias"]: o["value"]["count"] for o in (await h.client.list_objects(sid, prefix="counted/"))["objects"]
        }
    assert counted == {"counted/calls": 2, "counted/named": 2}, "read by the calls, or carried as named"
    assert by_listener["calls"]["status"] == by_listener["named"]["status"] == "completed"
    for listener, error_type, call in [
        ("messages", "BatchMessagesNotCarried", "batch_messages()"),
        ("events", "BatchEventsNotCarried", "batch_events()"),
    ]:
        failed = by_listener[listener]
        assert failed["status"] == "failed", failed
        assert failed["error"]["type"] == error_type, failed
        message = failed["error"]["message"]
        assert message.startswith(f"batch.{listener}: not carried") and call in message, message
