"""What the sweep does with a run the records still call running, given what Temporal says of it.

Owns the one rule for the crossing between a run's record in PostgreSQL and its execution on Temporal: only
Temporal's own word ends a run. A run is recorded before it is started (its batch's record, or `start_run`'s),
so a record with no execution behind it whose start was never made (the process died between the two) has not
started, and the sweep starts it, from its record, by its own id. A start is known made when its lane's batch
was finished, or, for a run of no lane, when its record let go of the input it keeps for a start. Temporal
forgets a closed run after its namespace's retention: a record whose start was made, older than that, with no
execution behind it, is the one case settled otherwise, as ended, with a message that says so. A lane's run
younger than that (Temporal's data lost) is started again from its batch. Pure: the sweep brings the record,
Temporal's answer and the clock (docs/decisions.md, "Two stores").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

BatchState = Literal["claimed", "done"]

# What a run's record says when Temporal has forgotten it: the sweep's message, beginning with this.
FORGOTTEN = "forgotten by Temporal"


@dataclass(frozen=True)
class RunRecord:
    """A run the records call running: who it is, how old its record is, and where a start can be made from.

    `batch`: the state of the lane batch that started it (`claimed`: its driver has not yet finished it;
    `done`: its start was made), None for a run of no lane (`start_execution`, a schedule's) or whose batch is
    gone. `start_input`: what a run of no lane is started with, kept until its start is made.
    """

    execution_id: str
    session_id: str
    workflow: str
    listener: str | None
    lane: str | None
    run_key: str | None
    depth: int
    age_seconds: float
    batch: BatchState | None = None
    start_input: dict[str, Any] | None = None


@dataclass(frozen=True)
class Running:
    """Temporal has the run, still open."""


@dataclass(frozen=True)
class Closed:
    """Temporal has the run, closed: its status as an execution's (None: closed into a next run of its own)."""

    status: str | None


@dataclass(frozen=True)
class Unknown:
    """Temporal has no run under this id: never started, or closed and forgotten after its retention."""


Word = Running | Closed | Unknown


@dataclass(frozen=True)
class Leave:
    """Nothing to do: it runs (or closed into a run of its own)."""


@dataclass(frozen=True)
class RecordEnd:
    """Temporal says it closed: record its end as the run would have reported it."""

    status: str


@dataclass(frozen=True)
class DriveLane:
    """Its batch is still claimed: its lane's next step finishes it, which starts the run."""


@dataclass(frozen=True)
class Reopen:
    """Its batch was finished but Temporal has no run (its data lost): claim the batch again and drive the lane,
    whose step starts the run from it, by the same id."""


@dataclass(frozen=True)
class StartAgain:
    """A run of no lane that was never started: start it from the input its record kept."""


@dataclass(frozen=True)
class Forget:
    """Nothing to start it from, or older than Temporal keeps closed runs: recorded as ended, saying why."""

    message: str


Check = Leave | RecordEnd | DriveLane | Reopen | StartAgain | Forget


def check_run(record: RunRecord, word: Word, retention_seconds: float | None) -> Check:
    """What to do with a run the records call running, given Temporal's word on it and the namespace's retention
    (None: not known, so never taken as passed)."""
    if isinstance(word, Running):
        return Leave()
    if isinstance(word, Closed):
        return Leave() if word.status is None else RecordEnd(word.status)
    if record.batch == "claimed":
        return DriveLane()
    if record.batch == "done":
        if retention_seconds is not None and record.age_seconds > retention_seconds:
            return Forget(
                f"{FORGOTTEN}: started {record.age_seconds:.0f} s ago, longer than the namespace keeps closed runs"
                f" ({retention_seconds:.0f} s), and its end was never recorded"
            )
        return Reopen()
    if record.listener is None and record.start_input is not None:
        return StartAgain()
    return Forget(f"{FORGOTTEN}: its start was made, and Temporal no longer knows it")


__all__ = [
    "FORGOTTEN",
    "Check",
    "Closed",
    "DriveLane",
    "Forget",
    "Leave",
    "RecordEnd",
    "Reopen",
    "RunRecord",
    "Running",
    "StartAgain",
    "Unknown",
    "Word",
    "check_run",
]
