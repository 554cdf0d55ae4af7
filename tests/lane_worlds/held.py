"""What a world's store holds, read at once, in one shape for both stores: lanes, batches, run slots, key slots,
executions, events and outcomes (times on the world's clock)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from orchestrator.core.lane_snapshot import LaneAddress


@dataclass(frozen=True)
class LaneRow:
    id: int
    session_id: str
    listener: str
    lane: str
    workflow_id: str
    routed_through: int
    fired_through: int
    # The lane's queue rows: the event ids it holds.
    queue: frozenset[int]

    @property
    def address(self) -> LaneAddress:
        return LaneAddress(self.session_id, self.listener, self.lane, self.workflow_id)


@dataclass(frozen=True)
class BatchRow:
    id: int
    lane_id: int
    first_id: int
    last_id: int
    event_ids: tuple[int, ...]
    retry: int
    replay: int
    state: str
    counted: bool
    created_at: float
    run_key: str | None
    verdict: dict[str, Any] | None
    # The keys of the listener's own throttle it was counted under.
    throttle_keys: tuple[str, ...] = ()

    @property
    def own(self) -> bool:
        """The lane's own batch: neither a repeat nor a replay."""
        return self.retry == 0 and self.replay == 0


@dataclass(frozen=True)
class RunRow:
    """A run slot held: by a run in flight, or by a failed run whose repeat is due at `due_at`."""

    run_key: str
    lane_id: int
    batch_id: int
    execution_id: str
    retry: int
    due_at: float | None


@dataclass(frozen=True)
class ExecutionRow:
    id: str
    status: str
    error: str | None
    listener: str | None
    run_key: str | None
    batch: dict[str, Any] | None


@dataclass(frozen=True)
class EventRow:
    id: int
    type: str
    committed: float
    # An execution event's execution id.
    execution_id: str | None


@dataclass
class Held:
    """What a world's store holds, read at once."""

    lanes: dict[int, LaneRow] = field(default_factory=dict)
    batches: dict[int, BatchRow] = field(default_factory=dict)
    runs: dict[str, RunRow] = field(default_factory=dict)
    # lane id -> whether it holds its key slot (False: queued for one).
    key_slots: dict[int, bool] = field(default_factory=dict)
    executions: dict[str, ExecutionRow] = field(default_factory=dict)
    events: dict[int, EventRow] = field(default_factory=dict)
    # (listener, batch key) -> the outcome's status.
    outcomes: dict[tuple[str, str], str] = field(default_factory=dict)
    replays: int = 0
    # Events of the world's sessions not yet routed.
    unrouted: int = 0
    # How often each run's slot was given back, by run key: once, or the store is wrong.
    released: Counter[str] = field(default_factory=Counter)

    def lane_of(self, listener: str, lane: str) -> LaneRow | None:
        return next((x for x in self.lanes.values() if (x.listener, x.lane) == (listener, lane)), None)

    def ended(self) -> Counter[str]:
        """How many `execution.ended` events each execution has."""
        return Counter(e.execution_id for e in self.events.values() if e.type == "execution.ended" and e.execution_id)
