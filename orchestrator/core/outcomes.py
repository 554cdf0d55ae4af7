"""Batch outcomes (SPEC section 5) and receipt items.

Owns the outcome record (its key among a listener's outcomes in a session: one per batch) and the receipt's
thread item body; deciding an outcome, keeping it with its count by status, and posting the receipt are the
engine's (the lane driver, and the store's finish).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

OutcomeStatus = Literal["success", "invocation_error", "refused", "throttled", "skipped", "access_error"]
SkipReason = Literal["depth", "session_not_open", "unmatched"]

RECEIPT_STATUSES: frozenset[OutcomeStatus] = frozenset({"success", "invocation_error", "refused", "throttled"})


class Outcome(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    status: OutcomeStatus
    reason: SkipReason | None = None
    listener: str
    lane: str
    first_id: int
    last_id: int
    event_ids: list[int]
    count: int
    retry: int = 0
    # A batch asked for again (`replay_batch`, `redeliver`): the how-many-th; 0 for the lane's own.
    replay: int = 0
    execution_id: str | None = None
    message: str | None = None
    at: datetime

    @property
    def batch_key(self) -> str:
        """The batch's key among the listener's outcomes in its session: one outcome per batch."""
        key = f"{self.lane}:{self.first_id}:{self.last_id}:{self.retry}"
        return key + (f":r{self.replay}" if self.replay else "")


def wants_receipt(outcome: Outcome) -> bool:
    """Whether a declared receipt is posted for this outcome."""
    return outcome.status in RECEIPT_STATUSES


def receipt_item(outcome: Outcome) -> dict[str, Any]:
    """The thread item body of a receipt: the status, the listener, the batch's ids and its retry."""
    metadata: dict[str, Any] = {
        "status": outcome.status,
        "listener": outcome.listener,
        "first_id": outcome.first_id,
        "last_id": outcome.last_id,
        "event_ids": list(outcome.event_ids),
        "retry": outcome.retry,
    }
    if outcome.reason is not None:
        metadata["reason"] = outcome.reason
    if outcome.execution_id is not None:
        metadata["execution_id"] = outcome.execution_id
    if outcome.replay:
        metadata["replay"] = outcome.replay
    # The message is the receipt itself (a `json` item), so a listener's `where` reads it (`item.message.status`);
    # `metadata` keeps the same, as receipts have always carried it.
    return {"type": "json", "role": "system", "message": metadata, "metadata": dict(metadata)}
