"""What an event weighs in its batch, which stops before 512 KiB as its run's input would when the action carries
the entries whole or its run reads them (`orchestrator_queued`): a thread item by its whole message, not the preview
its event keeps; data PostgreSQL keeps compressed by its text."""

from __future__ import annotations

from typing import Any

from orchestrator.core.lane_keys import lane_workflow_id
from orchestrator.core.lane_snapshot import LaneAddress, Take
from orchestrator.core.lane_step import step
from orchestrator.core.limits import Limits
from orchestrator.platform import Platform

BIG = 200_000


async def taken_of(
    platform: Platform,
    writes: list[dict[str, Any]],
    types: tuple[str, ...] = ("thread.item_posted",),
    carried: str = "{{ batch.events }}",
) -> tuple[list[int], int]:
    """Save a listener taking every event, make the writes, route them: the sizes of the waiting events, and how
    many the lane's first batch takes."""
    listener = {
        "name": "heavy",
        "filter": {"types": list(types)},
        "batch": {"window_seconds": 0, "max_events": 100},
        "action": {"type": "workflow", "workflow": "w", "input": {"batch": carried}},
    }
    assert (await platform.command({"command": "save_listener", "listener": listener}))["status"] == "success"
    sid = (await platform.command({"command": "open_session"}))["session"]["id"]
    for write in writes:
        reply = await platform.command({**write, "session_id": sid})
        assert reply["status"] == "success", reply
    await platform.store.lanes.route_page(sid, 1000, 16)
    snap = await platform.store.lanes.snapshot(LaneAddress(sid, "heavy", "_", lane_workflow_id(sid, "heavy", "_")))
    assert snap is not None
    decision = step(snap, snap.now + 1, Limits())
    assert isinstance(decision, Take), decision
    return [q.size for q in snap.waiting], len(decision.consumed)


async def test_a_thread_item_weighs_its_whole_message(platform: Platform) -> None:
    post = {"command": "post_thread_item", "alias": "chats/1", "item": {"type": "text", "message": "x" * BIG}}
    sizes, taken = await taken_of(platform, [post, post, post])
    assert all(size > BIG for size in sizes), sizes
    assert taken == 2, "three of 200 KB pass 512 KiB: the batch stops at two"


async def test_data_kept_compressed_weighs_what_its_run_reads(platform: Platform) -> None:
    """200 KB of one letter is a row of about 2.4 KB as PostgreSQL keeps it (compressed): weighed so, twenty such
    events made one batch of 4 MB, which Temporal refuses."""
    schema = {"type": "object"}
    assert (await platform.command({"command": "save_event_type", "name": "app.note", "schema": schema}))["status"]
    emit = {"command": "emit_event", "type": "app.note", "data": {"text": "x" * BIG}}
    sizes, taken = await taken_of(platform, [emit, emit, emit], types=("app.note",))
    assert all(size > BIG for size in sizes), sizes
    assert taken == 2, "three of 200 KB pass 512 KiB: the batch stops at two"
