"""list_session_events pages the stream by id, filters by type, and never skips a late commit."""

from __future__ import annotations

import asyncio
import random

from orchestrator.platform import Platform
from orchestrator.store.postgres import PostgresStore
from tests.store.helpers import ok, write_held_open


async def _session(platform: Platform) -> str:
    return str((await ok(platform, "open_session"))["session"]["id"])


async def test_paging_with_after_before_limit_and_types(platform: Platform) -> None:
    sid = await _session(platform)
    ids = []
    for n in range(25):
        if n % 5 == 0:
            reply = await ok(
                platform,
                "post_thread_item",
                session_id=sid,
                alias="chats/1",
                item={"type": "text", "message": str(n)},
            )
        else:
            reply = await ok(platform, "write_object", session_id=sid, alias=f"o/{n}", value={"type": "t"})
        ids.append(reply["event_id"])

    pages, after = [], 0
    while True:
        page = await ok(platform, "list_session_events", session_id=sid, after=after, limit=7)
        if not page["events"]:
            assert page["last_id"] == after
            break
        pages.append([e["id"] for e in page["events"]])
        after = page["last_id"]
    assert [len(p) for p in pages] == [7, 7, 7, 4]
    assert [i for p in pages for i in p] == ids

    window = await ok(platform, "list_session_events", session_id=sid, after=ids[2], before=ids[6])
    assert [e["id"] for e in window["events"]] == ids[3:6]

    posted = await ok(platform, "list_session_events", session_id=sid, types=["thread.*"])
    assert [e["id"] for e in posted["events"]] == ids[0::5]
    objects = await ok(platform, "list_session_events", session_id=sid, types=["object.**"], limit=3)
    assert all(e["type"] == "object.written" for e in objects["events"])
    assert len(objects["events"]) == 3
    assert "warnings" not in posted and "warnings" not in objects


async def test_types_that_match_no_event_type_answer_no_events_with_a_warning_that_names_them(
    platform: Platform,
) -> None:
    """A typo in `types` reads nothing, as the stream holds nothing of it, and the reply says why; events of a type
    deleted since are still read (so it is not refused)."""
    sid = await _session(platform)
    await ok(platform, "save_event_type", name="ticket.escalated", schema={"type": "object"})
    await ok(platform, "emit_event", session_id=sid, type="ticket.escalated", data={})
    await ok(platform, "write_object", session_id=sid, alias="o/1", value={"type": "t"})

    typo = await ok(platform, "list_session_events", session_id=sid, types=["object.writen", "thread.*"])
    assert typo["events"] == []
    assert typo["warnings"] == [
        "types.0: 'object.writen' matches no event type, the platform's nor the app's; did you mean 'object.written'?"
    ]
    await ok(platform, "delete_event_type", name="ticket.escalated")
    kept = await ok(platform, "list_session_events", session_id=sid, types=["ticket.*"])
    assert [e["type"] for e in kept["events"]] == ["ticket.escalated"] and "warnings" not in kept


async def test_a_transaction_held_open_is_never_skipped(platform: Platform) -> None:
    """One writer holds its transaction open; others commit; a reader paging by id misses nothing."""
    sid, other = await _session(platform), await _session(platform)
    seen: list[int] = []

    async def read_new() -> None:
        after = seen[-1] if seen else 0
        page = await ok(platform, "list_session_events", session_id=sid, after=after)
        seen.extend(e["id"] for e in page["events"])

    await ok(platform, "write_object", session_id=sid, alias="before", value={"type": "t"})
    async with write_held_open(platform, sid, "held") as held_id:
        # Writers in the same session queue behind the open transaction; another session commits freely.
        blocked = [
            asyncio.create_task(ok(platform, "write_object", session_id=sid, alias=f"late/{n}", value={"type": "t"}))
            for n in range(3)
        ]
        free = await ok(platform, "write_object", session_id=other, alias="free", value={"type": "t"})
        assert free["event_id"] > held_id, "the other session drew a later id and committed first"
        await asyncio.sleep(0.2)
        await read_new()
        assert held_id not in seen
        assert not any(t.done() for t in blocked)

    late = [(await t)["event_id"] for t in blocked]
    await read_new()
    assert held_id in seen
    assert all(i in seen for i in late)
    assert seen == sorted(seen)
    assert min(late) > held_id


async def test_concurrent_writers_and_a_tailing_reader_agree(platform: Platform) -> None:
    """Many writers with random pauses inside their transactions; a reader tailing by id sees every event."""
    store = platform.store
    assert isinstance(store, PostgresStore)
    sid = await _session(platform)
    rng = random.Random(7)
    written: list[int] = []
    done = asyncio.Event()

    async def writer(n: int) -> None:
        async with store.transaction() as conn:
            await store._locked_session(conn, sid, require_open=True)
            event = await store._append(conn, sid, "object.written", alias=f"w/{n}")
            await asyncio.sleep(rng.random() * 0.01)
        written.append(event.id)

    seen: list[int] = []

    async def reader() -> None:
        while True:
            finished = done.is_set()
            after = seen[-1] if seen else 0
            page = await ok(platform, "list_session_events", session_id=sid, after=after, limit=1000)
            seen.extend(e["id"] for e in page["events"])
            if finished and not page["events"]:
                return
            await asyncio.sleep(0.002)

    tail = asyncio.create_task(reader())
    await asyncio.gather(*(writer(n) for n in range(60)))
    done.set()
    await tail
    assert sorted(written) == seen
