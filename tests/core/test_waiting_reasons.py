"""Why a lane waits, as `orchestrator status` and the dashboard say it: a keyed lane behind taken key slots."""

from __future__ import annotations

from typing import Any

from orchestrator.commands.runs import Standing, waiting_text, why_waiting
from orchestrator.core.declaration import ListenerDeclaration
from orchestrator.core.lane_snapshot import ListenerNow
from orchestrator.core.limits import Limits


def keyed(max_parallel: int = 1) -> ListenerNow:
    body = {
        "name": "l",
        "filter": {"types": ["object.written"]},
        "concurrency": {"mode": "keyed", "key": "alias", "max_parallel": max_parallel},
        "batch": {"window_seconds": 1},
        "action": {"type": "workflow", "workflow": "w"},
    }
    return ListenerNow(version=1, declaration=ListenerDeclaration.model_validate(body))


def lane_row(key_slot: str | None, place: int | None) -> dict[str, Any]:
    """A `lanes_of` row: one event waiting in key b's lane while key a's run holds the only slot."""
    return {
        "id": 2,
        "listener": "l",
        "lane": "missions/b",
        "workflow_id": "lane-b",
        "seq": 1,
        "fired_through": 0,
        "now": 100.0,
        "pending": 1,
        "oldest_at": 99.5,
        "newest_at": 99.5,
        "newest_id": 7,
        "runs": [],
        "claimed": False,
        "replay": False,
        "key_slot": key_slot,
        "keys_held": 1,
        "key_slot_place": place,
    }


STANDING = Standing(keyed(), "open", None, fires=0, oldest_fire=None, running=1, failing_runs={})


def test_a_lane_in_the_key_slot_queue_says_its_place() -> None:
    waiting = why_waiting(lane_row("queued", 2), STANDING, Limits())
    assert waiting == {"reason": "queued_for_key_slot", "place": 2}
    assert waiting_text(waiting) == "queued for a key slot (place 2)"


def test_a_lane_not_yet_in_the_queue_has_no_place() -> None:
    waiting = why_waiting(lane_row(None, None), STANDING, Limits())
    assert waiting == {"reason": "queued_for_key_slot", "place": None}
    assert "place" not in waiting_text(waiting) and "joins the queue" in waiting_text(waiting)
