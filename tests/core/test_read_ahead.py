"""`with_read_ahead`: a lane's waiting events read ahead of its run's end stand in for a full read only when
they are exactly what a full read would hold now."""

from __future__ import annotations

from dataclasses import replace

from orchestrator.core.declaration import ListenerDeclaration
from orchestrator.core.lane_snapshot import (
    LaneAddress,
    LaneSnapshot,
    ListenerNow,
    Queued,
    Replay,
    fetch_limit,
    with_read_ahead,
)

ADDRESS = LaneAddress("ses_1", "l", "_", "lane:ses_1:l:_")


def listener(version: int = 1, max_events: int = 3, distinct_by: str | None = None) -> ListenerNow:
    body = {
        "name": "l",
        "filter": {"types": ["object.written"]},
        "batch": {"window_seconds": 0, "max_events": max_events, "distinct_by": distinct_by},
        "action": {"type": "workflow", "workflow": "w"},
    }
    return ListenerNow(version=version, declaration=ListenerDeclaration.model_validate(body))


def queued(*ids: int) -> tuple[Queued, ...]:
    return tuple(Queued(i, 1.0) for i in ids)


def ahead(waiting: tuple[Queued, ...], routed_through: int, now_listener: ListenerNow | None = None) -> LaneSnapshot:
    return LaneSnapshot(
        address=ADDRESS,
        lane_id=1,
        seq=4,
        fired_through=10,
        now=100.0,
        session_status="open",
        session_alias=None,
        listener=now_listener or listener(),
        pending=len(waiting),
        waiting=waiting,
        oldest_at=1.0,
        routed_through=routed_through,
    )


def fresh_of(earlier: LaneSnapshot, **changes: object) -> LaneSnapshot:
    """The lane read again without envelopes, as the store answers such a read."""
    base = replace(earlier, waiting=(), pending=1, complete=False, now=101.0)
    return replace(base, **changes)  # type: ignore[arg-type]


def test_a_full_read_ahead_holds_though_events_were_queued_since() -> None:
    earlier = ahead(queued(11, 12, 13), routed_through=13)
    now = with_read_ahead(fresh_of(earlier, routed_through=20), earlier)
    assert now is not None and now.complete
    assert [q.id for q in now.waiting] == [11, 12, 13]
    assert now.now == 101.0 and now.pending == 3


def test_a_short_read_ahead_holds_only_while_nothing_was_queued_since() -> None:
    earlier = ahead(queued(11, 12), routed_through=12)
    assert with_read_ahead(fresh_of(earlier), earlier) is not None
    assert with_read_ahead(fresh_of(earlier, routed_through=13), earlier) is None


def test_a_batch_taken_since_makes_it_stale() -> None:
    earlier = ahead(queued(11, 12, 13), routed_through=13)
    assert with_read_ahead(fresh_of(earlier, seq=5, fired_through=13), earlier) is None


def test_a_session_deleted_since_makes_it_stale() -> None:
    # A deletion empties the lane's queue (fired_through moves to routed_through) without a record.
    earlier = ahead(queued(11, 12, 13), routed_through=13)
    assert with_read_ahead(fresh_of(earlier, fired_through=13, pending=0, oldest_at=None), earlier) is None
    assert with_read_ahead(fresh_of(earlier, session_status="deleting"), earlier) is None


def test_a_new_listener_version_makes_it_stale() -> None:
    earlier = ahead(queued(11, 12, 13), routed_through=13)
    assert with_read_ahead(fresh_of(earlier, listener=listener(version=2)), earlier) is None
    assert with_read_ahead(fresh_of(earlier, listener=None), earlier) is None


def test_a_replay_waiting_is_read_in_full() -> None:
    earlier = ahead(queued(11, 12, 13), routed_through=13)
    assert with_read_ahead(fresh_of(earlier, replay=Replay(1, (), None, 1)), earlier) is None


def test_distinct_by_reads_more_than_max_events() -> None:
    # With distinct_by a batch may consume many events per entry: a read of max_events is not a full one.
    keyed = listener(distinct_by="alias")
    assert fetch_limit(keyed) > 3 and fetch_limit(listener()) == 3
    earlier = ahead(queued(11, 12, 13), routed_through=13, now_listener=keyed)
    assert with_read_ahead(fresh_of(earlier, routed_through=14), earlier) is None
