"""Outcomes: their key per batch, and the receipt's thread item."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from orchestrator.core.outcomes import (
    RECEIPT_STATUSES,
    Outcome,
    receipt_item,
    wants_receipt,
)

AT = datetime(2025, 1, 1, tzinfo=UTC)


def _outcome(**changes: Any) -> Outcome:
    fields: dict[str, Any] = {
        "status": "success",
        "listener": "answer",
        "lane": "chats/7",
        "first_id": 3,
        "last_id": 9,
        "event_ids": [3, 5, 9],
        "count": 3,
        "at": AT,
    }
    return Outcome.model_validate({**fields, **changes})


def test_an_outcome_is_keyed_by_its_batch_and_a_replay_by_its_number() -> None:
    assert _outcome().batch_key == "chats/7:3:9:0"
    assert _outcome(retry=2).batch_key == "chats/7:3:9:2"
    assert _outcome(replay=1).batch_key == "chats/7:3:9:0:r1"


def test_receipt_item_carries_status_listener_ids_and_retry() -> None:
    item = receipt_item(_outcome(retry=1, execution_id="e1"))
    receipt = {
        "status": "success",
        "listener": "answer",
        "first_id": 3,
        "last_id": 9,
        "event_ids": [3, 5, 9],
        "retry": 1,
        "execution_id": "e1",
    }
    # The message is the receipt, so a `where` reads `item.message.status`; the metadata the same.
    assert item == {"type": "json", "role": "system", "message": receipt, "metadata": receipt}


def test_receipts_are_for_the_four_statuses() -> None:
    assert set(RECEIPT_STATUSES) == {"success", "invocation_error", "refused", "throttled"}
    assert not wants_receipt(_outcome(status="skipped", reason="unmatched"))
    assert not wants_receipt(_outcome(status="access_error"))
    assert wants_receipt(_outcome(status="invocation_error", message="unknown template path"))
