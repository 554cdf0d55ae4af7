"""Outcomes: the bounded log, counts by status, and the receipt's thread item."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from orchestrator.core.outcomes import (
    RECEIPT_STATUSES,
    RECENT_OUTCOMES,
    Outcome,
    OutcomeLog,
    receipt_item,
    record,
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


def test_the_log_keeps_the_last_outcomes_and_counts_all() -> None:
    log = OutcomeLog()
    for n in range(RECENT_OUTCOMES + 10):
        log = record(log, _outcome(retry=n, status="success" if n % 2 else "throttled"))
    assert len(log.recent) == RECENT_OUTCOMES
    assert log.recent[0].retry == 10 and log.recent[-1].retry == RECENT_OUTCOMES + 9
    assert log.counts == {"success": 30, "throttled": 30}


def test_recording_leaves_the_old_log_alone() -> None:
    log = OutcomeLog()
    assert record(log, _outcome()).counts == {"success": 1}
    assert log.counts == {} and log.recent == []


def test_the_log_survives_a_json_round_trip() -> None:
    log = record(OutcomeLog(), _outcome(status="skipped", reason="depth"))
    assert OutcomeLog.model_validate_json(log.model_dump_json()) == log


def test_receipt_item_carries_status_listener_ids_and_retry() -> None:
    item = receipt_item(_outcome(retry=1, execution_id="e1"))
    assert item == {
        "type": "json",
        "role": "system",
        "message": "success answer batch 3-9 retry 1",
        "metadata": {
            "status": "success",
            "listener": "answer",
            "first_id": 3,
            "last_id": 9,
            "event_ids": [3, 5, 9],
            "retry": 1,
            "execution_id": "e1",
        },
    }


def test_receipts_are_for_the_four_statuses() -> None:
    assert set(RECEIPT_STATUSES) == {"success", "invocation_error", "refused", "throttled"}
    assert not wants_receipt(_outcome(status="skipped", reason="unmatched"))
    assert not wants_receipt(_outcome(status="access_error"))
    assert wants_receipt(_outcome(status="invocation_error", message="unknown template path"))
