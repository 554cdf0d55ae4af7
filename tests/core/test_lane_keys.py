"""Lane keys: one lane for serial and parallel, a lane per key value for keyed, readable workflow ids."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.core.declaration import Concurrency
from orchestrator.core.lane_keys import (
    MAX_READABLE_KEY_CHARS,
    ONLY_LANE_KEY,
    SHARED_LANE_KEY,
    lane_key,
    lane_workflow_id,
)

ENVELOPE: dict[str, Any] = {
    "id": 1,
    "type": "thread.item_posted",
    "alias": "chats/7/thread",
    "item": {"id": "i1", "type": "request"},
    "depth": 2,
    "data": {"tags": {"b": 1, "a": [True, None]}},
}


@pytest.mark.parametrize("mode", ["serial", "parallel"])
def test_serial_and_parallel_have_one_lane(mode: str) -> None:
    concurrency = Concurrency.model_validate({"mode": mode})
    assert lane_key(concurrency, ENVELOPE) == ONLY_LANE_KEY


@pytest.mark.parametrize(
    ("key", "segments", "expected"),
    [
        ("alias", None, "chats/7/thread"),
        ("alias", 2, "chats/7"),
        ("alias", 5, "chats/7/thread"),
        ("item.type", None, "request"),
        ("depth", None, "2"),
        ("depth", 1, "2"),
        ("data.tags", None, '{"a":[true,null],"b":1}'),
        ("execution.id", None, SHARED_LANE_KEY),
    ],
)
def test_keyed_lanes(key: str, segments: int | None, expected: str) -> None:
    concurrency = Concurrency(mode="keyed", key=key, key_segments=segments)
    assert lane_key(concurrency, ENVELOPE) == expected


def test_readable_workflow_ids() -> None:
    assert lane_workflow_id("s1", "answer", "chats/7") == "lane:s1:answer:chats/7"
    assert lane_workflow_id("s1", "answer", SHARED_LANE_KEY) == "lane:s1:answer:~"


@pytest.mark.parametrize("key", ["a b", '{"a":1}', "x" * (MAX_READABLE_KEY_CHARS + 1), "", "é"])
def test_unsafe_keys_are_hashed_stably(key: str) -> None:
    workflow_id = lane_workflow_id("s1", "answer", key)
    assert workflow_id.startswith("lane:s1:answer:#")
    assert len(workflow_id) == len("lane:s1:answer:#") + 32
    assert workflow_id == lane_workflow_id("s1", "answer", key)
    assert workflow_id != lane_workflow_id("s1", "answer", key + "!")
