"""The lane workflow: one per (session, listener, lane key), fed by the router with `deliver` signals.

Owns the lane's timers, slots, the runs it starts and continue-as-new; what goes into a batch is the pure
core's (`batch_windows`), what is allowed to fire is the `check_batch` activity's, and what a workflow run
does between its start and its end is `RunWorkflow`'s. Signal handlers are synchronous and only call core
reducers. A lane holds a slot per run in flight until the run's `run_finished` signal arrives, which
reaches whichever run of this lane is current, so continue-as-new never strands a slot.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from orchestrator.core.batch_windows import cut_batch, receive, window_closes_at
    from orchestrator.core.declaration import (
        ListenerDeclaration,
        ObjectAction,
        ThreadItemAction,
        WorkflowAction,
    )
    from orchestrator.core.lane_keys import lane_workflow_id
    from orchestrator.core.outcomes import Outcome, record
    from orchestrator.core.templates import TemplateError, batch_context, message_of, render
    from workflows.messages import (
        DELIVER_SIGNAL,
        PERMIT_GRANTED_SIGNAL,
        RUN_FINISHED_SIGNAL,
        BatchCheck,
        BatchInfo,
        BatchVerdict,
        Delivery,
        InFlight,
        LaneState,
        LaneView,
        PermitRequest,
        RunFinished,
        RunInput,
        RunPlan,
        WriteAction,
    )

# How long a lane lingers with nothing to do, and how much history it gathers before it continues as new,
# come in its state (settings `lane_idle_exit_seconds`, `lane_history_limit`): 300 s by default, so that a
# steady trickle keeps one run while idle sessions cost nothing, and 2,500 events, well before Temporal's
# limits (51,200 hard, 4,096 suggested; a cut batch costs about 17 history events).
ACTIVITY_TIMEOUT = timedelta(seconds=30)
ACTIVITY_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=10))


@workflow.defn(name="OrchestratorLane")
class LaneWorkflow:
    @workflow.init
    def __init__(self, state: LaneState) -> None:
        self.state = state
        self._wake = False
        self._alarms: list[float] = []

    # -- signals: synchronous, core reducers only --------------------------------------------------------

    @workflow.signal(name=DELIVER_SIGNAL)
    def deliver(self, delivery: Delivery) -> None:
        state = self.state
        if delivery.version >= state.version:
            state.version, state.declaration = delivery.version, delivery.declaration
        now = workflow.time()
        before = state.buffer.high_water
        state.buffer = receive(state.buffer, delivery.events, now)
        if state.buffer.high_water > before:
            state.last_event_at = now
            state.last_event_id = state.buffer.high_water
            state.idle_fired_for = None
        self._wake = True

    @workflow.signal(name=RUN_FINISHED_SIGNAL)
    def run_finished(self, finished: RunFinished) -> None:
        state = self.state
        state.in_flight = [run for run in state.in_flight if run.run_key != finished.run_key]
        for outcome in finished.outcomes:
            state.outcomes = record(state.outcomes, outcome)
        self._wake = True

    @workflow.signal(name=PERMIT_GRANTED_SIGNAL)
    def permit_granted(self) -> None:
        self.state.has_permit = True
        self.state.permit_requested = False
        self._wake = True

    # -- queries ---------------------------------------------------------------------------------------------

    @workflow.query(name="state")
    def view(self) -> LaneView:
        state = self.state
        return LaneView(
            address=state.address,
            version=state.version,
            pending=len(state.buffer.pending),
            pending_ids=[int(e["id"]) for e in state.buffer.pending],
            in_flight=list(state.in_flight),
            high_water=state.buffer.high_water,
            batches=state.batches,
            last_batch_first_id=state.last_batch[0] if state.last_batch else None,
            last_batch_last_id=state.last_batch[-1] if state.last_batch else None,
            has_permit=state.has_permit,
        )

    @workflow.query(name="outcomes")
    def outcomes(self) -> list[Outcome]:
        return list(self.state.outcomes.recent)

    # -- the loop --------------------------------------------------------------------------------------------

    @workflow.run
    async def run(self, state: LaneState) -> None:
        while True:
            if await self._fire_if_due():
                continue
            if self.state.has_permit and not self.state.in_flight:
                # Give the key's permit back after every run, so that busy keys cannot starve quiet ones.
                await self._release_permit()
                continue
            if self._should_continue_as_new():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self.state)
            if self._idle_for_good():
                await workflow.wait_condition(workflow.all_handlers_finished)
                if self._idle_for_good():
                    return
            self._wake = False
            deadline = self._next_deadline()
            if deadline is not None:
                self._alarm_at(deadline)
            await workflow.wait_condition(lambda: self._wake)

    def _declaration(self) -> ListenerDeclaration:
        return ListenerDeclaration.model_validate(self.state.declaration)

    def _slot_free(self, decl: ListenerDeclaration) -> bool:
        if decl.concurrency.mode == "parallel":
            return len(self.state.in_flight) < self._max_parallel(decl)
        return not self.state.in_flight

    def _max_parallel(self, decl: ListenerDeclaration) -> int:
        # The verdict of the last batch carries the deployment's cap; until then the declared value.
        return min(decl.concurrency.max_parallel, self.state.parallel_cap or decl.concurrency.max_parallel)

    def _alarm_at(self, deadline: float) -> None:
        """Wake the loop at `deadline` (workflow time), unless an alarm already rings at or before it.

        Alarms are never cancelled: one that rings early only makes the loop look again and set the next.
        Cancelling a timer in the activation it fires in is what a workflow must not ask of the server,
        and it would cost a history event per signal besides.
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
        """When something is next due on a timer (workflow time): a window closing or the idle exit."""
        state, now = self.state, workflow.time()
        deadlines: list[float] = []
        if state.declaration:
            closes = window_closes_at(state.buffer, self._declaration().batch.window_seconds)
            if closes is not None:
                deadlines.append(closes)
        if not state.buffer.pending and not state.in_flight:
            deadlines.append((state.last_event_at or now) + self.state.idle_exit_seconds)
        return min(deadlines) if deadlines else None

    def _idle_for_good(self) -> bool:
        state = self.state
        quiet = workflow.time() - (state.last_event_at or 0) >= self.state.idle_exit_seconds
        return quiet and not state.buffer.pending and not state.in_flight and not state.has_permit

    def _should_continue_as_new(self) -> bool:
        info = workflow.info()
        return info.is_continue_as_new_suggested() or info.get_current_history_length() >= self.state.history_limit

    async def _fire_if_due(self) -> bool:
        """Cut and fire one batch if its window has closed and a slot is free; answer whether it did."""
        state = self.state
        if not state.declaration or not state.buffer.pending:
            return False
        decl = self._declaration()
        now = workflow.time()
        closes = window_closes_at(state.buffer, decl.batch.window_seconds)
        if closes is None or now < closes or not self._slot_free(decl):
            return False
        if decl.concurrency.mode == "keyed" and not state.has_permit:
            await self._request_permit(decl)
            return False
        cut = cut_batch(state.buffer, now, decl.batch.window_seconds, decl.batch.max_events, decl.batch.distinct_by)
        if cut is None:
            return False
        entries, consumed, state.buffer = cut
        state.batches += 1
        state.last_batch = consumed
        await self._fire(entries, consumed)
        return True

    async def _request_permit(self, decl: ListenerDeclaration) -> None:
        if self.state.permit_requested:
            return
        self.state.permit_requested = True
        await workflow.execute_activity(
            "orchestrator.request_permit",
            args=[
                self.state.address,
                PermitRequest(lane_workflow_id=workflow.info().workflow_id, max_parallel=self._max_parallel(decl)),
            ],
            start_to_close_timeout=ACTIVITY_TIMEOUT,
            retry_policy=ACTIVITY_RETRY,
        )

    async def _release_permit(self) -> None:
        if not self.state.has_permit:
            return
        self.state.has_permit = False
        await workflow.execute_activity(
            "orchestrator.release_permit",
            args=[self.state.address, workflow.info().workflow_id],
            start_to_close_timeout=ACTIVITY_TIMEOUT,
            retry_policy=ACTIVITY_RETRY,
        )

    async def _fire(self, entries: list[dict[str, Any]], consumed: list[int]) -> None:
        state = self.state
        depth = max(int(e.get("depth", 0)) for e in entries)
        verdict: BatchVerdict = await workflow.execute_activity(
            "orchestrator.check_batch",
            BatchCheck(address=state.address, version=state.version, event_ids=consumed, entries=entries, depth=depth),
            result_type=BatchVerdict,
            start_to_close_timeout=ACTIVITY_TIMEOUT,
            retry_policy=ACTIVITY_RETRY,
        )
        state.parallel_cap = verdict.max_parallel
        if not verdict.fire:
            if verdict.status is not None:
                state.outcomes = record(
                    state.outcomes,
                    self._outcome(verdict.status, consumed, entries, reason=verdict.reason, message=verdict.message),
                )
            return
        decl = ListenerDeclaration.model_validate(verdict.declaration)
        context = batch_context(
            entries=entries,
            retry=0,
            lane=state.address.lane,
            listener={"name": decl.name, "version": verdict.version},
            session=verdict.session,
            consumed_ids=consumed,
        )
        action = decl.action
        try:
            if isinstance(action, ThreadItemAction | ObjectAction):
                write = self._write_action(action, context, depth, consumed)
            else:
                rendered_input = render(action.input, context)
        except TemplateError as err:
            await self._record(
                self._outcome("invocation_error", consumed, entries, message=f"template: unknown path {err}"),
                verdict,
            )
            return
        except ValueError as err:
            await self._record(self._outcome("invocation_error", consumed, entries, message=str(err)), verdict)
            return
        if isinstance(action, ThreadItemAction | ObjectAction):
            outcome: Outcome = await workflow.execute_activity(
                "orchestrator.apply_write",
                args=[write, self._outcome("success", consumed, entries)],
                result_type=Outcome,
                start_to_close_timeout=ACTIVITY_TIMEOUT,
                retry_policy=ACTIVITY_RETRY,
            )
            state.outcomes = record(state.outcomes, outcome)
            return
        await self._start_run(decl, verdict, entries, consumed, rendered_input, depth)

    def _write_action(
        self,
        action: ThreadItemAction | ObjectAction,
        context: dict[str, Any],
        depth: int,
        consumed: list[int],
    ) -> WriteAction:
        alias = render(action.alias, context)
        body = render(action.item if isinstance(action, ThreadItemAction) else action.value, context)
        if not isinstance(alias, str):
            raise ValueError("action.alias: must render to a string")
        if not isinstance(body, dict):
            raise ValueError(
                f"action.{'item' if isinstance(action, ThreadItemAction) else 'value'}: must render to a JSON object"
            )
        state = self.state
        return WriteAction(
            address=state.address,
            kind="thread_item" if isinstance(action, ThreadItemAction) else "object",
            alias=alias,
            body=body,
            depth=depth + 1,
            idempotency_key=f"{workflow.info().workflow_id}:{consumed[0]}:{consumed[-1]}",
            owns=self._declaration().owns,
        )

    async def _start_run(
        self,
        decl: ListenerDeclaration,
        verdict: BatchVerdict,
        entries: list[dict[str, Any]],
        consumed: list[int],
        rendered_input: Any,
        depth: int,
    ) -> None:
        state = self.state
        run_key = (
            f"{lane_workflow_id(state.address.session_id, state.address.listener, state.address.lane)}:{consumed[0]}"
        )
        run_key = "run" + run_key[len("lane") :]
        batch = BatchInfo(
            first_id=min(consumed),
            last_id=max(consumed),
            count=len(entries),
            retry=0,
            lane=state.address.lane,
            event_ids=consumed,
            messages=[message_of(e) for e in entries],
            events=entries,
        )
        plan = RunPlan(
            address=state.address,
            lane_workflow_id=workflow.info().workflow_id,
            run_key=run_key,
            workflow=decl.action.workflow if isinstance(decl.action, WorkflowAction) else "",
            input=RunInput(
                session_id=state.address.session_id,
                listener=decl.name,
                batch=batch,
                input=rendered_input,
                depth=depth,
            ),
            retry_attempts=decl.retry.attempts if decl.retry else 0,
            retry_delay_seconds=decl.retry.delay_seconds if decl.retry else 0,
            receipt_alias=decl.receipt.alias if decl.receipt else None,
            version=verdict.version,
            task_queue=workflow.info().task_queue,
            search_attributes=verdict.search_attributes,
        )
        state.in_flight.append(
            InFlight(
                run_key=run_key,
                first_id=batch.first_id,
                last_id=batch.last_id,
                count=batch.count,
                started_at=workflow.time(),
            )
        )
        # Started by an activity rather than as a child: the lane never waits on the run's result (its
        # `run_finished` signal frees the slot), so no child events grow the lane's history, and a batch
        # delivered again after a crash maps onto the run it already started (same id).
        await workflow.execute_activity(
            "orchestrator.start_run",
            plan,
            start_to_close_timeout=ACTIVITY_TIMEOUT,
            retry_policy=ACTIVITY_RETRY,
        )

    async def _record(self, outcome: Outcome, verdict: BatchVerdict) -> None:
        decl = ListenerDeclaration.model_validate(verdict.declaration)
        await workflow.execute_activity(
            "orchestrator.record_outcome",
            args=[self.state.address, outcome, decl.receipt.alias if decl.receipt else None],
            start_to_close_timeout=ACTIVITY_TIMEOUT,
            retry_policy=ACTIVITY_RETRY,
        )
        self.state.outcomes = record(self.state.outcomes, outcome)

    def _outcome(
        self,
        status: Any,
        consumed: list[int],
        entries: list[dict[str, Any]],
        *,
        reason: Any = None,
        message: str | None = None,
        retry: int = 0,
    ) -> Outcome:
        return Outcome(
            status=status,
            reason=reason,
            listener=self.state.address.listener,
            lane=self.state.address.lane,
            first_id=min(consumed),
            last_id=max(consumed),
            event_ids=consumed,
            count=len(entries),
            retry=retry,
            message=message,
            at=workflow.now(),
        )
