"""The fire: one step of a lane's drain, claimed in the store, then acted on.

Owns what a lane does when its clock says so, in act's order (claim, fetch, dispatch, ack):
1. claim, in one transaction under the lane's row lock: finish a batch a dead fire left claimed, or start a
   failed run's repeat that is due, or, when a slot is free, cut the next batch from the lane's queue (the
   pure `batch_cuts.cut`), judge it (`guards.batch_verdict`, the throttle counted here) and record it with
   its verdict, moving `fired_through` and taking the run's slot;
2. act on the verdict: start the run, or write, or record why not;
3. ack: mark the batch done, give back a slot no run took, record the outcome and post its receipt.
Then it reports what the store now says of the lane. Everything it does is idempotent by the batch's ids,
so a fire that runs again (a retried attempt, a replayed workflow task) finishes what the last one began.
An error a retry cannot cure (a render the store refuses, a value that fails validation) ends the batch as
`invocation_error`; only an error of the database or of Temporal reaching the lane is raised and retried.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from temporalio import activity
from temporalio.service import RPCError, RPCStatusCode

from activities.base import PlatformActivities
from activities.guards import CONSUMED, Standing, Verdict, batch_verdict, start_verdict
from activities.writes import write_action
from orchestrator.core.batch_cuts import Cut, cut
from orchestrator.core.declaration import (
    ListenerDeclaration,
    WorkflowAction,
    effective_max_parallel,
    lane_run_slots,
    lane_timing,
)
from orchestrator.core.errors import CommandError
from orchestrator.core.events import Event, message_of
from orchestrator.core.lane_clock import Declared, LaneNews, window_close
from orchestrator.core.outcomes import Outcome, receipt_item, wants_receipt
from orchestrator.core.templates import TemplateError, batch_context, render
from orchestrator.executions import execution_id_of, run_key_of, run_priority, start_run
from orchestrator.nudges import Nudger
from orchestrator.store.connection import Connection
from orchestrator.store.lane_queues import BatchRow, LaneRow, Nudge, Replay, RunRow
from orchestrator.telemetry import METRICS, TRACER, log_fields, parent_and_links
from workflows.messages import BatchInfo, FireReport, FireRequest, LaneAddress, RunInput, RunTag

log = logging.getLogger(__name__)

# The most queued events one fire reads: a batch takes at most 1,000 entries, and `distinct_by` may
# consume several events per entry; what a batch leaves goes in the next.
FETCH_EVENTS = 5_000
# How far a debounced fire may come before its time by the database's clock (see `_quiet_enough`).
CLOCK_SLACK_SECONDS = 0.25

# Errors that say nothing about the batch, only that the database or Temporal is out of reach for now.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    asyncpg.DeadlockDetectedError,
    asyncpg.SerializationError,
)


def run_key_for(lane: LaneRow, batch: BatchRow) -> str:
    """The run of a batch: the lane's and the batch's first event (a replay's is told apart by its number)."""
    return run_key_of(lane.workflow_id, batch.first_id) + batch.run_suffix


def transient(err: BaseException) -> bool:
    """Whether a retry may cure `err`: the database or Temporal away, not the batch at fault."""
    if isinstance(err, RPCError):
        return err.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.INTERNAL)
    return isinstance(err, TRANSIENT_ERRORS)


@dataclass
class Step:
    """What the claim took: a batch with its verdict, the listener as declared now, and what the act needs."""

    lane: LaneRow
    batch: BatchRow
    decl: ListenerDeclaration | None
    version: int
    entries: list[dict[str, Any]]
    traces: list[str | None]
    session: dict[str, Any]
    # A repeat's run (its plan), or None for a new batch.
    repeat: RunRow | None = None
    nudges: list[Nudge] = field(default_factory=list)


class FireActivities(PlatformActivities):
    def all(self) -> list[Callable[..., Any]]:
        return [self.fire]

    @property
    def nudger(self) -> Nudger:
        assert self.temporal is not None
        return Nudger(self.temporal, self.settings)

    @activity.defn(name="orchestrator.fire")
    async def fire(self, request: FireRequest) -> FireReport:
        try:
            return await self.step(request)
        except Exception:
            METRICS.fire_failures.add(1, {"listener": request.address.listener})
            raise

    async def step(self, request: FireRequest) -> FireReport:
        """One step of the lane's drain (claim, act, ack), and what the store then says of the lane."""
        address = request.address
        # Read before the transaction: a fire that held its lane's lock while waiting for a second pooled
        # connection would starve the pool when many lanes fire at once.
        session, switched_off, listener, paused = await self.store.fire_context(address.session_id, address.listener)
        decl = None if listener is None else ListenerDeclaration.model_validate(listener["body"])
        version = 0 if listener is None else int(listener["version"])
        step = None
        if paused and decl is not None:
            # Paused: the events wait in the lane, and the lane waits for `resume_listener`'s nudge.
            await self._hold(address)
        else:
            step = await self._claim(request, decl, version, Standing(session, switched_off))
        outcomes = [] if step is None else await self._act(request, step)
        declared = None if decl is None else Declared(**lane_timing(decl))
        news = await self.store.news(address.session_id, address.listener, address.lane)
        return FireReport(news=LaneNews(declared=declared, **news), outcomes=outcomes)

    async def _hold(self, address: LaneAddress) -> None:
        async with self.store.transaction() as conn:
            lane = await self.store.lock_lane(conn, address.session_id, address.listener, address.lane)
            if lane is not None and lane.routed_through > lane.fired_through:
                await self.store.set_waiting_slot(conn, lane.id, True)

    # -- 1. claim --------------------------------------------------------------------------------------------

    async def _claim(
        self, request: FireRequest, decl: ListenerDeclaration | None, version: int, now: Standing
    ) -> Step | None:
        address = request.address
        store = self.store
        session = now.session
        async with store.transaction() as conn:
            lane = await store.lock_lane(conn, address.session_id, address.listener, address.lane)
            if lane is None:
                return None  # never routed to: nothing waits
            left = await store.claimed_batch(conn, lane.id)
            if left is not None:
                return await self._step(conn, lane, left, decl, version, session)
            repeat = await store.due_repeat(conn, lane.id, request.repeat_due)
            if repeat is not None:
                return await self._claim_repeat(conn, lane, repeat, decl, version, now)
            replay = await store.next_replay(conn, lane.id)
            if replay is not None:
                return await self._claim_replay(conn, lane, replay, decl, version, now)
            if lane.routed_through <= lane.fired_through:
                return None
            if decl is not None and not await self._quiet_enough(conn, lane, decl):
                return None  # debouncing: the lane hears of the newer event in the report, and waits on
            runs = decl is not None and isinstance(decl.action, WorkflowAction)
            if runs and decl is not None and not await self._slot_free(conn, lane, decl):
                await store.set_waiting_slot(conn, lane.id, True)
                return None
            waiting = await store.waiting_events(conn, lane.id, lane.fired_through, FETCH_EVENTS)
            if decl is None:
                # Deleted since its events were routed: consumed, nobody to report to.
                batch = await store.take_batch(conn, lane, [e.id for e, _ in waiting], [], 0, CONSUMED, False)
                return Step(lane, batch, None, version, [], [], session)
            envelopes = {e.id: e.envelope() for e, _ in waiting}
            taken = cut(list(envelopes.values()), decl.batch.max_events, decl.batch.distinct_by)
            assert taken is not None
            return await self._take(conn, lane, decl, version, now, waiting, envelopes, taken)

    async def _quiet_enough(self, conn: Connection, lane: LaneRow, decl: ListenerDeclaration) -> bool:
        """A debounced lane fires once its newest event has been quiet `debounce_seconds`, or its oldest has
        waited `max_wait_seconds` (by the database's clock)."""
        if decl.batch.debounce_seconds is None:
            return True
        oldest = await self.store.oldest_waiting_at(conn, lane)
        newest = None if lane.last_event_at is None else lane.last_event_at.timestamp()
        closes = window_close(oldest.timestamp(), newest, Declared(**lane_timing(decl)))
        # The lane's timer rings by its own clock, which after a local activity lags the database's by that
        # activity's time: a fire that is due by a hair less than the declared time still fires, or the lane
        # would ask again and again until the two clocks agree.
        return lane.now.timestamp() >= closes - CLOCK_SLACK_SECONDS

    async def _slot_free(self, conn: Connection, lane: LaneRow, decl: ListenerDeclaration) -> bool:
        """A run slot in the lane (serial and keyed: one; parallel: `max_parallel`), and for a keyed listener
        one of its key slots in the session, taken now (or the lane queued for one, longest waiter first)."""
        cap = lane_run_slots(decl, self.settings.limits) or 1
        if await self.store.runs_holding(conn, lane.id) >= cap:
            return False
        if decl.concurrency.mode != "keyed":
            return True
        max_parallel = effective_max_parallel(decl.concurrency, self.settings.limits)
        return await self.store.acquire_key_slot(
            conn, lane.session_id, lane.listener, lane.lane, lane.workflow_id, max_parallel
        )

    async def _release_key_slot(self, conn: Connection, lane: LaneRow, decl: ListenerDeclaration | None) -> list[Nudge]:
        """Give the lane's key slot back; the lane it goes to (the longest waiter) is nudged after commit."""
        max_parallel = 0 if decl is None else effective_max_parallel(decl.concurrency, self.settings.limits)
        granted = await self.store.release_key_slot(conn, lane.session_id, lane.listener, lane.lane, max_parallel)
        if granted is None:
            return []
        key, workflow_id = granted
        return [Nudge(lane.session_id, lane.listener, key, workflow_id, pending_age=None, slot_freed=True)]

    async def _claim_replay(
        self,
        conn: Connection,
        lane: LaneRow,
        replay: Replay,
        decl: ListenerDeclaration | None,
        version: int,
        now: Standing,
    ) -> Step | None:
        """A batch asked for again (`replay_batch`, `redeliver`): its events, as a batch of its own, once a slot
        is free, judged by the guards like any."""
        store = self.store
        events = await store.events_by_id(conn, replay.event_ids)
        if decl is None or not events:
            # The listener is gone (or the events are): consumed, nobody to report to.
            await conn.execute("DELETE FROM replays WHERE id = $1", replay.id)
            return None
        starts_run = isinstance(decl.action, WorkflowAction)
        if starts_run and not await self._slot_free(conn, lane, decl):
            await store.set_waiting_slot(conn, lane.id, True)
            return None
        envelopes = {e.id: e.envelope() for e, _ in events}
        taken = cut(list(envelopes.values()), decl.batch.max_events, decl.batch.distinct_by, max_bytes=1 << 62)
        assert taken is not None
        # A replay consumes all its events, whatever `distinct_by` leaves as entries.
        consumed = Cut(taken.entries, [e.id for e, _ in events])
        return await self._take(conn, lane, decl, version, now, events, envelopes, consumed, replay=replay)

    async def _take(
        self,
        conn: Connection,
        lane: LaneRow,
        decl: ListenerDeclaration,
        version: int,
        now: Standing,
        events: list[tuple[Event, str | None]],
        envelopes: dict[int, dict[str, Any]],
        taken: Cut,
        *,
        replay: Replay | None = None,
    ) -> Step:
        """Judge a cut batch by the guards and record it (the lane's own batch, or a replay): a slot held for
        its run, or, when a guard stopped a keyed listener's batch, the lane's key slot given back."""
        store = self.store
        depth = max(int(envelopes[i].get("depth", 0)) for i in taken.consumed)
        verdict = await batch_verdict(store, conn, self.settings.limits, now, lane.lane, decl, taken.entries, depth)
        entry_ids = [int(e["id"]) for e in taken.entries]
        runs = isinstance(decl.action, WorkflowAction)
        starts_run = verdict is None and runs
        fills = starts_run and decl.concurrency.mode != "parallel"
        batch = await store.take_batch(
            conn, lane, taken.consumed, entry_ids, 0, verdict, verdict is None, fills_last_slot=fills, replay=replay
        )
        nudges: list[Nudge] = []
        if starts_run:
            run_key = run_key_for(lane, batch)
            plan = self._plan(decl, version, depth)
            await store.hold_slot(conn, run_key, lane.id, batch.id, execution_id_of(run_key, 0), 0, plan)
        elif verdict is not None and runs and decl.concurrency.mode == "keyed":
            nudges += await self._release_key_slot(conn, lane, decl)
        traces = {e.id: tp for e, tp in events}
        return Step(
            lane, batch, decl, version, taken.entries, [traces[i] for i in entry_ids], now.session, nudges=nudges
        )

    async def _claim_repeat(
        self,
        conn: Connection,
        lane: LaneRow,
        run: RunRow,
        decl: ListenerDeclaration | None,
        version: int,
        now: Standing,
    ) -> Step:
        """A failed run's repeat is a batch of its own (same events, retry n+1) and passes the guards again."""
        original = await self.store.batch(conn, run.batch_id)
        events = await self.store.events_by_id(conn, original.entry_ids)
        entries = [e.envelope() for e, _ in events]
        retry = run.retry + 1
        if decl is None:
            verdict: Verdict = CONSUMED  # deleted during the wait: nobody to report to
        else:
            depth = int(run.plan["depth"])
            verdict = await batch_verdict(self.store, conn, self.settings.limits, now, lane.lane, decl, entries, depth)
        batch = await self.store.take_batch(
            conn, lane, original.event_ids, original.entry_ids, retry, verdict, verdict is None, repeats=original
        )
        if verdict is None:
            await self.store.hold_slot(
                conn, run.run_key, lane.id, original.id, execution_id_of(run.run_key, retry), retry, run.plan
            )
        return Step(lane, batch, decl, version, entries, [tp for _, tp in events], now.session, repeat=run)

    async def _step(
        self,
        conn: Connection,
        lane: LaneRow,
        batch: BatchRow,
        decl: ListenerDeclaration | None,
        version: int,
        session: dict[str, Any],
    ) -> Step:
        """A batch a dead fire claimed, to be finished on the verdict it was given."""
        events = await self.store.events_by_id(conn, batch.entry_ids)
        repeat = None
        if batch.retry > 0:
            repeat = await self.store.lane_run(conn, run_key_for(lane, batch))
        return Step(
            lane, batch, decl, version, [e.envelope() for e, _ in events], [tp for _, tp in events], session, repeat
        )

    def _plan(self, decl: ListenerDeclaration, version: int, depth: int) -> dict[str, Any]:
        """What the run's repeats need, kept with its slot: a repeat runs the workflow its batch was given."""
        action = decl.action
        assert isinstance(action, WorkflowAction)
        keyed = decl.concurrency.mode == "keyed"
        return {
            "workflow": action.workflow,
            "input": action.input,
            "attempts": decl.retry.attempts if decl.retry else 0,
            "delay_seconds": decl.retry.delay_seconds if decl.retry else 0.0,
            "receipt": decl.receipt.alias if decl.receipt else None,
            "version": version,
            "depth": depth,
            "key_slots": effective_max_parallel(decl.concurrency, self.settings.limits) if keyed else None,
            "priority": decl.priority,
            "keyed": keyed,
        }

    # -- 2. act, 3. ack ---------------------------------------------------------------------------------------

    async def _act(self, request: FireRequest, step: Step) -> list[Outcome]:
        lane, batch = step.lane, step.batch
        fields = log_fields(lane.session_id, lane.listener, lane.lane, batch.event_ids)
        parent, links = parent_and_links(step.traces)
        attributes = {f"orchestrator.{k}": v for k, v in fields.items()} | {"orchestrator.events": len(batch.event_ids)}
        if batch.retry:
            attributes["orchestrator.retry"] = batch.retry
        with TRACER.start_as_current_span("batch", context=parent, links=links, attributes=attributes) as span:
            status, message, execution_id, started = await self._dispatch(request, step)
            if status is not None:
                span.set_attribute("orchestrator.outcome", status)
        nudges = list(step.nudges)
        async with self.store.transaction() as conn:
            await self.store.lock_lane_by_id(conn, lane.id)
            await self.store.finish_batch(conn, batch.id)
            run_key = run_key_for(lane, batch)
            if not started and (await self.store.lane_run(conn, run_key)) is not None:
                # No run took the slot the claim held for it (a guard or the start stopped it): the lane is
                # free for what it left behind.
                await self.store.release_slot(conn, run_key)
                await self.store.set_waiting_slot(conn, lane.id, False)
                if step.decl is not None and step.decl.concurrency.mode == "keyed":
                    nudges += await self._release_key_slot(conn, lane, step.decl)
        for nudge in nudges:
            await self.nudger.nudge_quietly(nudge)
        if batch.retry == 0:
            METRICS.batches_cut.add(1, {"listener": lane.listener})
            METRICS.lane_pending.add(-len(batch.event_ids), {"listener": lane.listener, "lane": lane.lane})
        log.info("batch %s", status or "consumed", extra={**fields, "status": status or "consumed"})
        if status is None:
            return []
        outcome = Outcome(
            status=status,
            reason=(batch.verdict or {}).get("reason"),
            listener=lane.listener,
            lane=lane.lane,
            first_id=batch.first_id,
            last_id=batch.last_id,
            event_ids=batch.event_ids,
            count=len(batch.entry_ids),
            retry=batch.retry,
            replay=batch.replay,
            execution_id=execution_id,
            message=message,
            at=activity.info().started_time,
        )
        version = int(step.repeat.plan["version"]) if step.repeat is not None else step.version
        receipt = self._receipt_alias(step)
        depth = self._depth(step) + 1
        await self._keep(lane.session_id, outcome, version, receipt, depth)
        if (
            step.repeat is not None
            and status != "success"
            and (batch.verdict or {}).get("reason") != "session_not_open"
        ):
            # A repeat stopped here: the failure before it stands as the last one.
            await self.report_failure(lane.session_id, lane.listener, lane.lane, step.repeat, depth)
        return [outcome]

    def _receipt_alias(self, step: Step) -> str | None:
        if step.repeat is not None:
            receipt = step.repeat.plan.get("receipt")
            return str(receipt) if receipt else None
        if step.decl is None or step.decl.receipt is None:
            return None
        return step.decl.receipt.alias

    def _depth(self, step: Step) -> int:
        if step.repeat is not None:
            return int(step.repeat.plan["depth"])
        return max((int(e.get("depth", 0)) for e in step.entries), default=0)

    async def _dispatch(self, request: FireRequest, step: Step) -> tuple[str | None, str | None, str | None, bool]:
        """Act on the batch's verdict: (outcome status or None when consumed, message, execution, started)."""
        verdict, decl = step.batch.verdict, step.decl
        if verdict == CONSUMED or decl is None:
            return None, None, None, False
        if verdict is not None:
            return str(verdict["status"]), verdict.get("message"), None, False
        lane, batch = step.lane, step.batch
        context = batch_context(
            entries=step.entries,
            retry=batch.retry,
            lane=lane.lane,
            listener={"name": lane.listener, "version": step.version},
            session={k: v for k, v in step.session.items() if k in ("id", "alias") and v is not None},
            consumed_ids=batch.event_ids,
            replay_of=batch.replay_of,
        )
        depth = self._depth(step)
        try:
            if step.repeat is not None or isinstance(decl.action, WorkflowAction):
                return await self._start(request, step, context, depth)
            key = f"{lane.workflow_id}:{batch.first_id}:{batch.last_id}{batch.run_suffix}"
            status, message = await write_action(
                self.store, decl, lane.session_id, context, depth + 1, key, self.settings.limits.max_payload_bytes
            )
            return status, message, None, False
        except Exception as err:
            if transient(err):
                raise
            # Whatever else fails is the batch's own doing (a value the store refuses): it would fail again.
            log.warning("batch failed for good: %s", err, exc_info=True)
            return "invocation_error", f"action: {type(err).__name__}: {err}"[:2000], None, False

    async def _start(
        self, request: FireRequest, step: Step, context: dict[str, Any], depth: int
    ) -> tuple[str | None, str | None, str | None, bool]:
        lane, batch = step.lane, step.batch
        plan = step.repeat.plan if step.repeat is not None else None
        decl = step.decl
        assert decl is not None
        if plan is None:
            action = decl.action
            assert isinstance(action, WorkflowAction)
            workflow, template = action.workflow, action.input
        else:
            workflow, template = str(plan["workflow"]), plan["input"]
        try:
            rendered = render(template, context)
        except TemplateError as err:
            return "invocation_error", f"action.input: unknown template path {err}", None, False
        refusal = await start_verdict(
            self.store, self.settings.limits, self.registered_workflows, lane.session_id, workflow
        )
        if refusal is not None:
            return str(refusal["status"]), refusal.get("message"), None, False
        assert self.temporal is not None
        run_key = run_key_for(lane, batch)
        execution_id = execution_id_of(run_key, batch.retry)
        run_input = RunInput(
            session_id=lane.session_id,
            listener=lane.listener,
            batch=BatchInfo(
                first_id=batch.first_id,
                last_id=batch.last_id,
                count=len(step.entries),
                retry=batch.retry,
                lane=lane.lane,
                event_ids=batch.event_ids,
                messages=[message_of(e) for e in step.entries],
                events=step.entries,
                replay_of=batch.replay_of,
            ),
            input=rendered,
            execution_id=execution_id,
            run_key=run_key,
            depth=depth,
        )
        tag = RunTag(
            execution_id=execution_id,
            session_id=lane.session_id,
            workflow=workflow,
            run_key=run_key,
            listener=lane.listener,
            lane=lane.lane,
            depth=depth + 1,
        )
        priority = plan["priority"] if plan is not None else decl.priority
        keyed = plan["keyed"] if plan is not None else decl.concurrency.mode == "keyed"
        await start_run(
            self.temporal,
            self.store,
            self.settings,
            tag,
            run_input,
            run_priority(priority, lane.lane if keyed else None),
        )
        if batch.retry > 0:
            METRICS.retries_waiting.add(-1, {"listener": lane.listener})
        return "success", None, execution_id, True

    async def _keep(self, session_id: str, outcome: Outcome, version: int, receipt: str | None, depth: int) -> None:
        """Record an outcome and, when declared and due, post its receipt (both once per batch).

        The receipt is the batch's doing, so it is `depth` deep, one more than the batch's deepest event: a
        listener woken by receipts is bounded by `listener_chain_depth` like any other chain.
        """
        if await self.store.record_outcome(session_id, outcome, version):
            METRICS.outcomes.add(1, {"listener": outcome.listener, "status": outcome.status})
        if receipt is None or not wants_receipt(outcome):
            return
        try:
            await self.store.post_thread_item(
                session_id,
                receipt,
                receipt_item(outcome),
                source={"listener": outcome.listener},
                depth=depth,
                idempotency_key=f"receipt:{outcome.listener}:{outcome.batch_key}",
            )
        except CommandError as err:
            # The session closed since the batch fired (a closed session takes no more thread items). The
            # outcome is kept; refusing the record would retry it for ever and wedge the lane.
            if err.code != "session_not_open":
                raise
            log.info("no receipt: the session has closed", extra=log_fields(session_id, outcome.listener))

    async def report_failure(self, session_id: str, listener: str, lane: str, run: RunRow, depth: int) -> None:
        """Write `listener.failed` for a run that failed with no attempt left (once per run)."""
        failed = run.execution_id
        row = await self.store.pool.fetchrow("SELECT error, batch FROM executions WHERE id = $1", failed)
        batch = (row["batch"] if row is not None else None) or {}
        await self.store.append_event(
            session_id,
            "listener.failed",
            source={"listener": listener, "execution": failed},
            depth=depth,
            data={
                "listener": listener,
                "lane": lane,
                "first_id": batch.get("first_id"),
                "last_id": batch.get("last_id"),
                "event_ids": batch.get("event_ids"),
                "retry": batch.get("retry", run.retry),
                "execution_id": failed,
                "error": row["error"] if row is not None else None,
            },
            idempotency_key=f"failed:{failed}",
        )
