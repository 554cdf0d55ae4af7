"""Why a lane waits, as `orchestrator status` and the dashboard say it: a keyed lane behind taken key slots, one its
listener's throttle holds, one past the deployment's fires per minute."""

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


def throttled() -> ListenerNow:
    """`keyed()`, its runs throttled to two a minute per alias."""
    body = keyed().declaration.model_dump(mode="json", exclude_unset=True)
    body["throttle"] = {"per_seconds": 60, "runs": 2, "key": "alias"}
    return ListenerNow(version=1, declaration=ListenerDeclaration.model_validate(body))


def test_a_lane_its_throttle_holds_says_until_when_and_by_what() -> None:
    # Its step said it would step again at 130 (`throttled_until`): status says so, with the throttle as declared,
    # where the step judges the throttle (before a key slot).
    standing = Standing(throttled(), "open", None, fires=0, oldest_fire=None, running=1, failing_runs={})
    waiting = why_waiting({**lane_row("queued", 2), "throttled_until": 130.0}, standing, Limits())
    assert waiting == {
        "reason": "throttled",
        "until": "1970-01-01T00:02:10+00:00",
        "limit": "throttle",
        "throttle": {"per_seconds": 60.0, "runs": 2, "key": "alias"},
    }
    assert waiting_text(waiting) == "held by its throttle (2 per 60 s per alias) until 1970-01-01T00:02:10+00:00"
    # Once past that time, or with a key slot free and nothing held, the lane says what else it waits for.
    assert why_waiting({**lane_row("queued", 2), "throttled_until": 90.0}, standing, Limits()) == {
        "reason": "queued_for_key_slot",
        "place": 2,
    }


def test_a_lane_past_the_deployments_fires_per_minute_says_what_comes_due_is_dropped() -> None:
    standing = Standing(keyed(2), "open", None, fires=120, oldest_fire=None, running=0, failing_runs={})
    waiting = why_waiting({**lane_row(None, None), "keys_held": 0, "oldest_at": 98.0}, standing, Limits())
    assert waiting == {"reason": "throttled", "until": None, "limit": "listener_fires_per_minute"}
    assert "dropped" in waiting_text(waiting)
