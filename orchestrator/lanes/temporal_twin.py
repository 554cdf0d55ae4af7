"""Temporal's side of runs, in memory: the twin beside the lane store's, for the crash-point model.

Owns a model of what the engine asks of Temporal (`run_sweep.TemporalRuns`: start a run by its id, say what it
knows of one) and of what Temporal does on its own: a run it closes (its app ends it, or someone terminates it),
and what it forgets (a closed run past the namespace's retention, or, rarely, its data lost). A start may fail
the way an RPC does, before it was made or after: `start_faults` says which, per call. Every start is checked
against the promise that a serial or keyed lane never has two runs at work at once: a run whose code has
returned and whose last task (its report: `workflows/run_end.py`) has not completed is open on Temporal, but
done with its work, and its report is what starts the lane's next run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from orchestrator.core.run_checks import Closed, Running, Unknown, Word
from orchestrator.workflows.messages import RunInput, RunTag

StartFault = Literal["before", "after"] | None


class StartFailed(TimeoutError):
    """A start whose call failed as an RPC does when the server is slow or away: made or not, nobody knows."""


@dataclass
class TwinRun:
    tag: RunTag
    input: RunInput
    started_at: float
    # None while it runs; else how it closed, as an execution's status.
    closed: str | None = None


@dataclass
class TemporalTwin:
    """Runs by their id; `now` is the model's clock."""

    now: Callable[[], float]
    retention: float | None = None
    # Per start asked: whether it fails, and whether it was made before failing.
    start_faults: Callable[[], StartFault] = lambda: None
    # Which listeners hold one run per lane (serial and keyed): two open at once in one of their lanes is a bug.
    one_per_lane: frozenset[str] = frozenset()
    runs: dict[str, TwinRun] = field(default_factory=dict)
    # Runs whose code has returned, their last task (the report of their end) not yet completed.
    finishing: set[str] = field(default_factory=set)
    # How each run closed, kept after Temporal forgets it: what Temporal once said.
    closed_as: dict[str, str] = field(default_factory=dict)
    starts: int = 0
    violations: list[str] = field(default_factory=list)

    async def start(self, tag: RunTag, run_input: RunInput, priority: Any) -> None:
        fault = self.start_faults()
        if fault == "before":
            raise StartFailed(f"start of {tag.execution_id} failed before it was made")
        if tag.execution_id not in self.runs:
            self._check_lane(tag)
            self.runs[tag.execution_id] = TwinRun(tag, run_input, self.now())
            self.starts += 1
        if fault == "after":
            raise StartFailed(f"start of {tag.execution_id} made, and its answer lost")

    async def stop(self, execution_id: str, reason: str) -> None:
        run = self.runs.get(execution_id)
        if run is not None and run.closed is None:
            self.close(execution_id, "stopped")

    async def cancel(self, execution_id: str) -> bool:
        # Asked only of runs a stop was asked of, which the twin's worlds never make (stops are PostgreSQL's).
        run = self.runs.get(execution_id)
        return run is not None and run.closed is None

    def _check_lane(self, tag: RunTag) -> None:
        if tag.listener not in self.one_per_lane:
            return
        for other in self.open():
            if other.tag.execution_id in self.finishing:
                continue
            if (other.tag.session_id, other.tag.listener, other.tag.lane) == (tag.session_id, tag.listener, tag.lane):
                self.violations.append(
                    f"{tag.execution_id} started while {other.tag.execution_id} of the same lane was open"
                )

    async def word(self, execution_id: str) -> tuple[Word, RunTag | None]:
        run = self.runs.get(execution_id)
        if run is None:
            return Unknown(), None
        return (Running() if run.closed is None else Closed(run.closed)), run.tag

    async def retention_seconds(self) -> float | None:
        return self.retention

    # -- what Temporal does on its own ---------------------------------------------------------------------

    def open(self) -> list[TwinRun]:
        return [r for _, r in sorted(self.runs.items()) if r.closed is None]

    def returned(self, execution_id: str) -> None:
        """The run's code has returned: only its last task, which reports its end, is left."""
        self.finishing.add(execution_id)

    def close(self, execution_id: str, status: str) -> None:
        """The run closed (its app ended it and its end was reported, or it was terminated: `stopped`)."""
        self.runs[execution_id].closed = status
        self.closed_as[execution_id] = status
        self.finishing.discard(execution_id)

    def forget(self, execution_id: str) -> None:
        """Temporal no longer knows the run: a closed one past retention, or data lost."""
        del self.runs[execution_id]
        self.finishing.discard(execution_id)
