"""Telling runs what their waits heard: the answers a routing round found, and the cancellations `cancel_on` asks.

Owns the crossing from a wait's answer in PostgreSQL to its run on Temporal. A wait's answer is one signal to its
run (`WAIT_SIGNAL`: its number, the winning condition and the events whole); a cancel watch's is Temporal's
cancellation of its run, then its termination once its grace has passed with the run still running. Each answer
is noted told once Temporal took it (a run that has ended takes nothing, and is told); one a dying router left
untold is told again by the next poll, and a run told twice keeps the first (`orchestrator.sdk`). Nothing polls
inside a run.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from orchestrator.core.run_checks import Running
from orchestrator.core.waits import STOP_SEQ
from orchestrator.crossings import crossing
from orchestrator.lanes.driver import LaneDriver
from orchestrator.lanes.executions import TemporalRuns
from orchestrator.store.engine_records import EngineRecords
from orchestrator.store.lane_store import WaitAnswer
from orchestrator.store.waits import answer_events
from orchestrator.workflows.messages import WAIT_SIGNAL

log = logging.getLogger(__name__)

# An answer a round found and nobody noted told after this long is told again (its router died in between).
UNTOLD_SECONDS = 5.0
# What a run's end says when its grace ran out after a cancellation.
CANCEL_GRACE_OVER = "terminated: its grace after the cancellation ran out"
# Temporal's note on a run terminated because `stop_execution` asked it before the run was there.
STOPPED_BEFORE_START = "terminated: stop_execution asked it before its start"


class WaitTeller:
    def __init__(self, store: EngineRecords, runs: TemporalRuns, driver: LaneDriver) -> None:
        self.store = store
        self.runs = runs
        # Records the end of a run it terminates, and drives the lanes its slot goes to.
        self.driver = driver

    async def tell(self, answers: Sequence[WaitAnswer]) -> None:
        """Tell each answer's run, then note them told (those Temporal took, and those of runs that ended)."""
        told = []
        for answer in answers:
            try:
                if await self._tell_one(answer):
                    told.append(answer.wait_id)
            except Exception:
                log.warning("could not tell run %s of its wait %d", answer.execution_id, answer.seq, exc_info=True)
        if told:
            await self.store.answers_told(told)

    async def _tell_one(self, answer: WaitAnswer) -> bool:
        """Whether the answer is told: Temporal took it, or its run has ended (nobody is left to tell)."""
        if answer.kind == "cancel":
            if answer.seq == STOP_SEQ and not answer.grace_seconds:
                # A `terminate` asked before the run was on Temporal: ended at once, never cancelled (its end is
                # recorded once its grace, none, is seen past: `upkeep`).
                word, _ = await self.runs.word(answer.execution_id)
                if isinstance(word, Running):
                    await self.runs.stop(answer.execution_id, STOPPED_BEFORE_START)
                    return True
            elif await self.runs.cancel(answer.execution_id):
                return True
            # Not on Temporal: ended, or not started yet (its watch is in place before its start): told again later
            # while its record says it runs.
            found = await self.store.execution_record(answer.execution_id)
            return found is None or found["status"] != "running"
        events = await answer_events(self.store.lanes, answer.session_id, answer.event_ids)
        payload = {
            "run_id": answer.run_id,
            "seq": answer.seq,
            "matched": answer.matched,
            "event_ids": list(answer.event_ids),
            "events": events,
        }
        await self.runs.signal(answer.execution_id, WAIT_SIGNAL, payload)
        return True

    async def upkeep(self) -> None:
        """Tell what a dead router left untold; terminate the cancelled runs whose grace has run out."""
        await self.tell(await self.store.untold_answers(UNTOLD_SECONDS))
        for overdue in await self.store.cancels_past_grace():
            try:
                await self._terminate(overdue)
            except Exception:  # the next poll tries again; the others go on
                log.warning("could not terminate run %s past its grace", overdue.execution_id, exc_info=True)

    async def _terminate(self, overdue: WaitAnswer) -> None:
        log.info("terminating run %s: its grace after a cancellation ran out", overdue.execution_id)
        _, tag = await self.runs.word(overdue.execution_id)
        await self.runs.stop(overdue.execution_id, CANCEL_GRACE_OVER)
        # Dead here, the sweep records the end Temporal has (terminated: `stopped`), and the run's cancel row,
        # which holds its event, makes it `cancelled` (`orchestrator_run_end`).
        crossing("cancel.terminated")
        if tag is not None:
            # A terminated run runs no code to say it ended: its end is recorded here, as it was asked.
            await self.driver.end(tag, "cancelled", CANCEL_GRACE_OVER)


__all__ = ["WaitTeller"]
