"""The run sweep: runs the records call running, held against what Temporal says of them.

Owns the recovery of the crossing between a run's record and its execution. A run reports its own end from the
task that closes it (`workflows/run_end.py`); one terminated or timed out from outside runs no code, and a
start can be lost between its record and its call (the process died there). Every `run_check_seconds` each run
still running by the records is looked at once (by one worker: the store marks it), Temporal is asked, and
`core/run_checks.check_run` decides: leave it, record the end Temporal reports, drive the lane whose claimed
batch starts it, claim its batch again, start it from its record, or settle a record Temporal has forgotten.
Temporal's side is a Protocol (`TemporalRuns`), so the same sweep runs against a model of Temporal in the
crash-point tests.
"""

from __future__ import annotations

import logging
from typing import Protocol

from temporalio.common import Priority

from orchestrator.config import Settings
from orchestrator.core.lane_keys import lane_workflow_id
from orchestrator.core.lane_snapshot import LaneAddress
from orchestrator.core.run_checks import (
    Check,
    DriveLane,
    Forget,
    RecordEnd,
    Reopen,
    RunRecord,
    StartAgain,
    Word,
    check_run,
)
from orchestrator.crossings import crossing
from orchestrator.lanes.driver import LaneDriver
from orchestrator.lanes.executions import RunStarter, after_start
from orchestrator.store.lane_store import LaneStore
from orchestrator.workflows.messages import RunInput, RunTag

log = logging.getLogger(__name__)

# Runs one round looks at, at most; the rest are the next round's.
ROUND_RUNS = 50


class TemporalRuns(RunStarter, Protocol):
    async def word(self, execution_id: str) -> tuple[Word, RunTag | None]:
        """What Temporal says of a run, and the memo it was started with (None when it has none)."""
        ...

    async def retention_seconds(self) -> float | None:
        """How long the namespace keeps closed runs (None: not known)."""
        ...


def tag_of(record: RunRecord) -> RunTag:
    """A run's memo rebuilt from its record, for a run Temporal has no memo of."""
    return RunTag(
        execution_id=record.execution_id,
        session_id=record.session_id,
        workflow=record.workflow,
        run_key=record.run_key,
        listener=record.listener,
        lane=record.lane,
        depth=record.depth,
    )


def lane_of(record: RunRecord) -> LaneAddress | None:
    if record.listener is None or record.lane is None:
        return None
    workflow_id = lane_workflow_id(record.session_id, record.listener, record.lane)
    return LaneAddress(record.session_id, record.listener, record.lane, workflow_id)


class RunSweep:
    def __init__(self, lanes: LaneStore, driver: LaneDriver, temporal: TemporalRuns, settings: Settings) -> None:
        self.lanes, self.driver, self.temporal, self.settings = lanes, driver, temporal, settings

    async def round(self) -> list[tuple[RunRecord, Check]]:
        """Look at the runs due for a look; answer what was done with each (a run that could not be looked at
        now is looked at again after `run_check_seconds`)."""
        done = []
        for record in await self.lanes.unsettled_runs(self.settings.run_check_seconds, ROUND_RUNS):
            try:
                done.append((record, await self.settle(record)))
            except Exception:
                log.warning("could not look at run %s", record.execution_id, exc_info=True)
        return done

    async def settle(self, record: RunRecord) -> Check:
        word, tag = await self.temporal.word(record.execution_id)
        check = check_run(record, word, await self.temporal.retention_seconds())
        if isinstance(check, RecordEnd):
            # A run reports its end before the task that closes it completes, so one that reported is seen
            # here as recorded (its record was read before it reported): said only when this recorded it.
            error = f"the run closed as {check.status} without reporting"
            if await self.driver.end(tag or tag_of(record), check.status, error):
                log.warning("run %s ended %s without reporting it", record.execution_id, check.status)
        elif isinstance(check, DriveLane):
            log.warning("run %s was recorded and never started: its lane starts it", record.execution_id)
            await self._drive(lane_of(record))
        elif isinstance(check, Reopen):
            log.warning("run %s is not on Temporal: its batch is claimed again to start it", record.execution_id)
            address = await self.lanes.reopen_run(record.execution_id)
            crossing("sweep.reopened")
            await self._drive(address)
        elif isinstance(check, StartAgain):
            log.warning("run %s was recorded and never started: starting it", record.execution_id)
            assert record.start_input is not None
            await self.temporal.start(tag_of(record), RunInput.model_validate(record.start_input), Priority.default)
            made = await self.lanes.execution_start_made(record.execution_id)
            await after_start(self.temporal, record.execution_id, made)
        elif isinstance(check, Forget):
            log.warning("run %s: %s", record.execution_id, check.message)
            await self.driver.end(tag or tag_of(record), "stopped", check.message)
            await self._drive(lane_of(record))
        return check

    async def _drive(self, address: LaneAddress | None) -> None:
        """Drive the lane now (a failure to is left to its nudge, which `hand_on` sends)."""
        if address is not None:
            await self.driver.hand_on([address])
