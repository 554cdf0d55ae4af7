"""The lane workflow: one per (session, listener, lane key), fed by the router with `deliver` signals.

Owns the lane's timers, slots and continue-as-new. What goes into a batch is the pure core's
(`batch_windows`); whether and how a batch fires (checks, templates, the write or the run's start, the
outcome) is the `orchestrator.fire_batch` activity's; what a run does until it ends is `RunWorkflow`'s.
Signal handlers are synchronous and only call core reducers. A run holds its slot until its `run_finished`
signal arrives, which reaches whichever run of this lane is current, so continue-as-new never strands one.

How long a lane lingers with nothing to do and how much history it gathers before it continues as new come
in its state (settings `lane_idle_exit_seconds`, `lane_history_limit`): 300 s by default, so a steady
trickle keeps one run while idle sessions cost nothing, and 2,500 events, well before Temporal's limits
(51,200 hard, 4,096 suggested; a batch costs about 10 history events).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from orchestrator.core.batch_windows import cut_batch, receive, regather, requeue, window_closes_at
    from orchestrator.core.declaration import ListenerDeclaration
    from orchestrator.core.outcomes import Outcome, record
    from workflows.messages import (
        DELIVER_SIGNAL,
        KEY_SLOT_SIGNAL,
        RUN_FINISHED_SIGNAL,
        Delivery,
        FireRequest,
        FireResult,
        HeldBatch,
        IdleNotice,
        InFlight,
        LaneState,
        LaneView,
        RunFinished,
    )

ACTIVITY_TIMEOUT = timedelta(seconds=30)
ACTIVITY_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=10))
# A keyed lane waiting for a key slot is told when one is handed to it, and asks again only then or after
# this long: a lost hand-over (a worker that died between freeing the slot and signalling) costs half a
# minute, while a hundred waiting lanes asking every few seconds would cost a fire activity each time.
KEY_SLOT_RETRY_SECONDS = 30.0
# Lane runs recorded before that rule re-fired a held batch on every wake and every 5 s; they replay so
# (`workflow.patched(KEY_SLOT_OFFERS)`) until they continue as new.
KEY_SLOT_OFFERS = "key-slot-offers"
LEGACY_KEY_SLOT_RETRY_SECONDS = 5.0
# A run's `run_finished` signal frees its slot; a run terminated from outside never sends it. The lane looks
# this often at the runs it is waiting for, so such a slot is stranded for minutes, not for ever.
RUNS_CHECK_SECONDS = 300.0
# How many runs that finished before their start was reported the lane remembers (a handful at most are
# ever in that window at once).
FINISHED_EARLY_KEPT = 32
# A lane whose state is too large to continue as new goes on in the same run (its history can grow far past
# the hand-over's 2 MB, up to 50 MB), and weighs its state again after this many more history events.
# Should it reach Temporal's 10,000 signals a run first, the router's deliveries to it are refused and the
# session's routing waits (nothing is lost) until the lane has drained and handed over. Past
# HANDOVER_LAST_CHANCE events it tries anyway: a refused hand-over leaves the lane stuck but whole, while
# the hard limit of 51,200 events would end it and lose what it holds.
HANDOVER_REWEIGH_EVENTS = 50
HANDOVER_LAST_CHANCE = 45_000
# Deliveries that say how long the router held them back open their window as of then; lane runs recorded
# before that replay as they ran.
HELD_DELIVERIES = "held-deliveries"


@workflow.defn(name="OrchestratorLane", sandboxed=False)
class LaneWorkflow:
    @workflow.init
    def __init__(self, state: LaneState) -> None:
        self.state = state
        self._wake = False
        self._alarms: list[float] = []
        # History length before which the state is not weighed again (it was too large to hand over).
        self._handover_weighed_until = 0

    # -- signals: synchronous, core reducers only --------------------------------------------------------

    @workflow.signal(name=DELIVER_SIGNAL)
    def deliver(self, delivery: Delivery) -> None:
        state = self.state
        if delivery.version >= state.version:
            state.version, state.declaration = delivery.version, delivery.declaration
        now = workflow.time()
        before = state.buffer.high_water
        # A window these events open, opened when the router first had them (it may have held them back).
        opened = now - delivery.held_seconds if delivery.held_seconds and workflow.patched(HELD_DELIVERIES) else now
        state.buffer = receive(state.buffer, delivery.traced_events(), opened)
        if state.buffer.high_water > before:
            state.last_event_at = now
        self._wake = True

    @workflow.signal(name=RUN_FINISHED_SIGNAL)
    def run_finished(self, finished: RunFinished) -> None:
        state = self.state
        if finished.run_key in state.finished_lately:
            return
        state.finished_lately = [*state.finished_lately, finished.run_key][-FINISHED_EARLY_KEPT:]
        if all(run.run_key != finished.run_key for run in state.in_flight):
            # The run ended before the activity that started it reported back (a worker died in between and
            # the activity was retried, or the run was simply quicker): remember it, or its slot stays held.
            state.finished_early = [*state.finished_early, finished.run_key][-FINISHED_EARLY_KEPT:]
        state.in_flight = [run for run in state.in_flight if run.run_key != finished.run_key]
        for outcome in finished.outcomes:
            state.outcomes = record(state.outcomes, outcome)
        self._wake = True

    @workflow.signal(name=KEY_SLOT_SIGNAL)
    def key_slot_granted(self) -> None:
        self.state.key_slot_offered = True
        self._wake = True

    # -- queries ---------------------------------------------------------------------------------------------

    @workflow.query(name="state")
    def view(self) -> LaneView:
        state = self.state
        return LaneView(
            address=state.address,
            version=state.version,
            pending=len(state.buffer.pending) + (len(state.held.event_ids) if state.held else 0),
            pending_ids=[int(e["id"]) for e in state.buffer.pending],
            in_flight=list(state.in_flight),
            waiting_for_key_slot=state.held is not None,
            high_water=state.buffer.high_water,
            batches=state.batches,
            last_batch_first_id=min(state.last_batch) if state.last_batch else None,
            last_batch_last_id=max(state.last_batch) if state.last_batch else None,
        )

    @workflow.query(name="outcomes")
    def outcomes(self) -> list[Outcome]:
        return list(self.state.outcomes.recent)

    # -- the loop --------------------------------------------------------------------------------------------

    @workflow.run
    async def run(self, state: LaneState) -> None:
        while True:
            # Cleared before the work, not after: a signal that lands while an activity runs must still
            # wake the next wait (a key slot handed over mid-fire, a run that finished meanwhile).
            self._wake = False
            # Continue as new before firing, not after: a task that ran a local activity is long, and a
            # signal landing meanwhile makes the server refuse the hand-over, again and again under a stream.
            if self._should_continue_as_new():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self.state)
            if await self._fire_if_due():
                continue
            if self.state.in_flight and workflow.time() >= self._runs_check_due():
                await self._free_slots_of_gone_runs()
                continue
            if self._silence_due():
                await self._announce_silence()
                continue
            if self._idle_for_good():
                await workflow.wait_condition(workflow.all_handlers_finished)
                if self._idle_for_good():
                    return
            deadline = self._next_deadline()
            if deadline is not None:
                self._alarm_at(deadline)
            await workflow.wait_condition(lambda: self._wake)

    def _declaration(self) -> ListenerDeclaration:
        return ListenerDeclaration.model_validate(self.state.declaration)

    def _slot_free(self, decl: ListenerDeclaration) -> bool:
        if decl.concurrency.mode == "parallel":
            cap = self.state.parallel_cap or decl.concurrency.max_parallel
            return len(self.state.in_flight) < min(decl.concurrency.max_parallel, cap)
        return not self.state.in_flight

    def _alarm_at(self, deadline: float) -> None:
        """Wake the loop at `deadline` (workflow time), unless an alarm already rings at or before it.

        Alarms are never cancelled: one that rings early only makes the loop look again and set the next.
        Cancelling a timer in the activation it fires in is what a workflow must not ask of the server,
        and it would cost history events for every signal besides.
        """
        if any(alarm <= deadline for alarm in self._alarms):
            return
        self._alarms.append(deadline)

        async def ring() -> None:
            await asyncio.sleep(max(deadline - workflow.time(), 0.001))
            self._alarms.remove(deadline)
            self._wake = True

        asyncio.create_task(ring())  # noqa: RUF006 - a workflow task runs until its timer fires

    def _next_deadline(self) -> float | None:
        """When something is next due on a timer (workflow time): a window, a key slot retry, the idle exit."""
        state, now = self.state, workflow.time()
        deadlines: list[float] = []
        if state.held is not None:
            offers = workflow.patched(KEY_SLOT_OFFERS)
            deadlines.append((state.key_slot_retry_at or now) if offers else now + LEGACY_KEY_SLOT_RETRY_SECONDS)
        elif state.declaration:
            decl = self._declaration()
            closes = window_closes_at(state.buffer, decl.batch.window_seconds)
            # A window matters only once a slot is free: while every slot is taken, `run_finished` wakes the
            # loop. An alarm for a window that closed meanwhile would ring at once, again and again, for as
            # long as the run lasts (a timer and a workflow task every millisecond).
            if closes is not None and self._slot_free(decl):
                deadlines.append(closes)
        if state.in_flight:
            deadlines.append(self._runs_check_due())
        silence = self._silence_deadline()
        if silence is not None:
            deadlines.append(silence)
        elif self._nothing_to_do():
            deadlines.append((state.last_event_at or now) + state.idle_exit_seconds)
        return min(deadlines) if deadlines else None

    def _runs_check_due(self) -> float:
        state = self.state
        since = state.runs_checked_at or min(run.started_at for run in state.in_flight)
        return max(since, min(run.started_at for run in state.in_flight)) + RUNS_CHECK_SECONDS

    async def _free_slots_of_gone_runs(self) -> None:
        """Free the slots of runs that ended without telling the lane (terminated by an operator)."""
        state = self.state
        gone: list[str] = await workflow.execute_activity(
            "orchestrator.runs_gone",
            args=[state.address, [run.run_key for run in state.in_flight]],
            result_type=list[str],
            start_to_close_timeout=ACTIVITY_TIMEOUT,
            retry_policy=ACTIVITY_RETRY,
        )
        state.runs_checked_at = workflow.time()
        state.in_flight = [run for run in state.in_flight if run.run_key not in gone]

    def _silence_deadline(self) -> float | None:
        """When this lane's silence is due to be announced (declared `idle`), or None."""
        state = self.state
        if not state.declaration or state.last_event_at is None:
            return None
        idle = self._declaration().idle
        if idle is None or state.idle_announced_after == state.buffer.high_water:
            return None  # not declared, or this silence was announced already: wait for a new event
        return state.last_event_at + idle.after_seconds

    def _silence_due(self) -> bool:
        deadline = self._silence_deadline()
        return deadline is not None and workflow.time() >= deadline

    async def _announce_silence(self) -> None:
        """Write the `lane.idle` event and put it into this lane's own batching, like any other event.

        A regular activity, not a local one, like every lane activity with an effect: its input is in the
        history before it runs, so a workflow task that fails and replays with newer signals cannot make it
        announce a different silence.
        """
        state = self.state
        idle = self._declaration().idle
        assert idle is not None
        last = state.buffer.high_water
        envelope: dict[str, Any] = await workflow.execute_activity(
            "orchestrator.lane_idle",
            IdleNotice(
                address=state.address,
                lane_workflow_id=workflow.info().workflow_id,
                last_event_id=last,
                after_seconds=idle.after_seconds,
            ),
            result_type=dict,
            start_to_close_timeout=ACTIVITY_TIMEOUT,
            retry_policy=ACTIVITY_RETRY,
        )
        state.idle_announced_after = last
        state.buffer = requeue(state.buffer, [envelope], workflow.time())

    def _nothing_to_do(self) -> bool:
        state = self.state
        return not state.buffer.pending and not state.in_flight and state.held is None

    def _idle_for_good(self) -> bool:
        quiet = workflow.time() - (self.state.last_event_at or 0) >= self.state.idle_exit_seconds
        # A lane that still owes a `lane.idle` announcement stays to make it.
        return quiet and self._nothing_to_do() and self._silence_deadline() is None

    def _should_continue_as_new(self) -> bool:
        info = workflow.info()
        length = info.get_current_history_length()
        if not (info.is_continue_as_new_suggested() or length >= self.state.history_limit):
            return False
        if length >= HANDOVER_LAST_CHANCE:
            return True
        if length < self._handover_weighed_until:
            return False
        # The whole state crosses as one payload: while a stuck run lets pending events pile up past what
        # Temporal accepts, the lane stays in this run and keeps firing, and hands over once it has shrunk.
        if len(self.state.model_dump_json().encode()) <= self.state.handover_bytes:
            return True
        self._handover_weighed_until = length + HANDOVER_REWEIGH_EVENTS
        workflow.logger.warning("lane state too large to continue as new; staying in this run for now")
        return False

    async def _fire_if_due(self) -> bool:
        """Fire the held batch, or cut and fire the next one if its window has closed and a slot is free."""
        state = self.state
        if not state.declaration:
            return False
        decl = self._declaration()
        if not self._slot_free(decl):
            return False
        if state.held is not None:
            if not workflow.patched(KEY_SLOT_OFFERS):
                return await self._fire(state.held)
            if not state.key_slot_offered and workflow.time() < (state.key_slot_retry_at or 0.0):
                return False  # still queued for a key slot: events arriving meanwhile do not ask again
            entries, consumed, state.buffer = regather(
                state.held.entries,
                state.held.event_ids,
                state.buffer,
                workflow.time(),
                decl.batch.max_events,
                decl.batch.distinct_by,
            )
            state.last_batch = consumed
            return await self._fire(HeldBatch(entries=entries, event_ids=consumed))
        cut = cut_batch(
            state.buffer, workflow.time(), decl.batch.window_seconds, decl.batch.max_events, decl.batch.distinct_by
        )
        if cut is None:
            return False
        entries, consumed, state.buffer = cut
        state.batches += 1
        state.last_batch = consumed
        return await self._fire(HeldBatch(entries=entries, event_ids=consumed))

    async def _fire(self, batch: HeldBatch) -> bool:
        """Hand the batch to the fire activity; answer whether it left the lane (False: it waits for a key)."""
        state = self.state
        info = workflow.info()
        # Before the activity, not after: a hand-over signalled while it runs must make the lane ask again.
        state.key_slot_offered = False
        # A regular activity, not a local one: a local activity starts the run (or writes) before its
        # workflow task is recorded. Were that task to fail (a worker dying, a completion refused because a
        # signal landed meanwhile), its replay would apply the later signals first and cut a larger batch
        # under the same run key, and the run already started would stand for events it never got. A
        # scheduled activity's input is in the history before it runs, so every attempt fires this batch.
        result: FireResult = await workflow.execute_activity(
            "orchestrator.fire_batch",
            FireRequest(
                address=state.address,
                lane_workflow_id=info.workflow_id,
                version=state.version,
                entries=batch.entries,
                event_ids=batch.event_ids,
                task_queue=info.task_queue,
            ),
            result_type=FireResult,
            start_to_close_timeout=ACTIVITY_TIMEOUT,
            retry_policy=ACTIVITY_RETRY,
        )
        state.parallel_cap = result.max_parallel
        if result.waiting_for_key_slot:
            state.held = batch
            state.key_slot_retry_at = workflow.time() + KEY_SLOT_RETRY_SECONDS
            return False
        state.held = None
        if result.outcome is not None:
            state.outcomes = record(state.outcomes, result.outcome)
        if result.run_key is not None and result.run_key in state.finished_early:
            state.finished_early = [key for key in state.finished_early if key != result.run_key]
        elif result.run_key is not None:
            ids = batch.event_ids
            state.in_flight.append(
                InFlight(
                    run_key=result.run_key,
                    first_id=min(ids),
                    last_id=max(ids),
                    count=len(batch.entries),
                    started_at=workflow.time(),
                )
            )
        return True
