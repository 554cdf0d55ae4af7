"""The lane driver: a lane's steps taken through the pure step and the lane store, whoever wakes the lane.

Owns the loop of act's drain: read the lane (`LaneStore.snapshot`), decide (`lane_step.step`), record the
decision over what was read, act on it (start the run, or write), finish (outcome, receipt, slots), and step
again on the snapshot the finish answers, until the step says wait. The lane workflow drives its lane through
the `orchestrator.fire` local activity; a run's end (`end`) drives the lanes it frees a slot for, so a batch
waiting for a slot is taken in the ending run's own step, with no workflow task of its lane. A record refused
because the lane moved on reads again. A wait shorter than the lane's timers resolve (`early`) is waited out
here. Acting is idempotent by the batch's ids, so a driver that runs again finishes what the last one began;
only an error of the database or of Temporal is raised (and retried by the caller).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import asyncpg
from opentelemetry import trace
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.causes import batch_cause, caused_by
from orchestrator.config import Settings
from orchestrator.core.declaration import (
    ListenerDeclaration,
    ObjectAction,
    ThreadItemAction,
    effective_max_parallel,
)
from orchestrator.core.events import preview
from orchestrator.core.lane_clock import LaneNews
from orchestrator.core.lane_keys import lane_workflow_id
from orchestrator.core.lane_snapshot import (
    FETCH_EVENTS,
    Acted,
    Consume,
    Drop,
    Finish,
    LaneAddress,
    LaneSnapshot,
    Stop,
    Take,
    Wait,
    with_read_ahead,
)
from orchestrator.core.lane_step import HeldSlot, RunPlan, next_move, run_end, step, take_of_claimed
from orchestrator.core.outcomes import Outcome, receipt_item, wants_receipt
from orchestrator.core.templates import TemplateError, batch_context, needs_envelopes, needs_messages, render
from orchestrator.crossings import crossing
from orchestrator.lanes.executions import (
    SESSION_DELETED,
    TEMPORAL_AWAY,
    RunStarter,
    run_priority,
    run_queues,
    tell_stop,
)
from orchestrator.store.connection import DATABASE_AWAY
from orchestrator.store.lane_store import CancelWatch, Ending, Finishing, LaneStore, Recorded, Stale
from orchestrator.store.postgres import new_id
from orchestrator.telemetry import METRICS, TRACER, Metrics, log_fields, parent_and_links
from orchestrator.workflows.messages import BatchInfo, RunInput, RunTag
from orchestrator.workflows.run_end import ERROR_CHARS, ERROR_TYPE_CHARS

log = logging.getLogger(__name__)

# The most steps one drive takes before it hands back (a lane with a long backlog of full batches, or one
# whose record keeps finding it moved on): the next drive goes on where it stopped.
MAX_STEPS = 64
# Lanes a drive hands a freed slot on to, at most, before it leaves the rest to nudges.
MAX_HAND_ON = 16
# A lane's `throttled_until` read back from the database differs from the time it was given by its rounding (a
# microsecond): within this, it is the same hold, not noted again.
HELD_SAME_SECONDS = 0.001

# Errors that say nothing about the batch, only that the database or Temporal is out of reach for now.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    *DATABASE_AWAY,
    TimeoutError,
    asyncpg.DeadlockDetectedError,
    asyncpg.SerializationError,
)


def transient(err: BaseException) -> bool:
    """Whether a retry may cure `err`: the database or Temporal away, not the batch at fault."""
    if isinstance(err, RPCError):
        return err.status in TEMPORAL_AWAY or err.status == RPCStatusCode.INTERNAL
    return isinstance(err, TRANSIENT_ERRORS)


def over_temporal_size_limit(err: BaseException) -> bool:
    """Whether Temporal refused a start for its size: the input over its blob size limit (`limit.blobSize.error`,
    `Blob data size exceeds limit.`), or the request over its frontend's gRPC message limit (4 MB: `received message
    ... larger than max`, a RESOURCE_EXHAUSTED that is no rate limit). A limit's refusal, so the batch is `refused`
    (SPEC 5), not the action failing."""
    if not isinstance(err, RPCError):
        return False
    message = err.message.lower()
    return (err.status == RPCStatusCode.INVALID_ARGUMENT and "size exceeds limit" in message) or (
        err.status == RPCStatusCode.RESOURCE_EXHAUSTED and "larger than max" in message
    )


@dataclass
class Drive:
    """What a drive did and where it left the lane: the outcomes it recorded, its last wait (None: the lane
    is gone or was never queued for), the lanes a slot it freed went to."""

    outcomes: list[Outcome] = field(default_factory=list)
    wait: Wait | None = None
    snapshot: LaneSnapshot | None = None
    now: float = 0.0
    handed: list[LaneAddress] = field(default_factory=list)

    def news(self) -> LaneNews:
        """What the lane should know: when to step again, whether it waits for a slot, its newest event."""
        snap, wait = self.snapshot, self.wait
        if snap is None or wait is None:
            return LaneNews()
        decl = snap.listener.declaration if snap.listener is not None else None
        return LaneNews(
            due_in=None if wait.until is None else max(wait.until - self.now, 0.0),
            waiting_slot=wait.reason in ("slot_held", "queued_for_key_slot"),
            idle_after_seconds=decl.idle.after_seconds if decl is not None and decl.idle else None,
            last_event_id=snap.newest_id or None,
            last_event_age=None if snap.newest_at is None else max(snap.now - snap.newest_at, 0.0),
        )


def _forget_failure(task: asyncio.Task[Any]) -> None:
    """A read ahead that failed or was dropped is read again when needed: its error is nobody's to see."""
    if not task.cancelled():
        task.exception()


def _write_template(decl: ListenerDeclaration) -> Any:
    """What a write action renders: its alias and its value or item."""
    action = decl.action
    if isinstance(action, ObjectAction):
        return [action.alias, action.value]
    if isinstance(action, ThreadItemAction):
        return [action.alias, action.item]
    return None


def key_max(decl: ListenerDeclaration | None, settings: Settings) -> int:
    if decl is None or decl.concurrency.mode != "keyed":
        return 0
    return effective_max_parallel(decl.concurrency, settings.limits)


def say_run_end(
    logger: logging.Logger,
    session_id: str,
    listener: str | None,
    lane: str | None,
    execution_id: str,
    status: str,
    error: str | None,
    recorded: bool,
) -> None:
    """The log's record of a run's end, as recorded (what `orchestrator dev` prints a line of, `dev/log.py`): said
    by whoever records it, the run's own report, the sweep or a stop that terminates it. A second report of the
    same end is no activity of its own."""
    fields = log_fields(session_id, listener, lane, execution=execution_id, error=error)
    activity = {"activity": "run_end"} if recorded else {}
    logger.info("run %s", status, extra={**fields, "status": status, **activity})


@dataclass(frozen=True)
class Observed:
    """Where a driver says what it did: the platform's metrics, traces and log (a simulation says nothing)."""

    metrics: Metrics = METRICS
    tracer: trace.Tracer = TRACER
    log: logging.Logger = log


class ActionWriter(Protocol):
    async def write(
        self, decl: ListenerDeclaration, session_id: str, context: dict[str, Any], depth: int, key: str
    ) -> tuple[str, str | None]:
        """Render and write a write action; answer the outcome's status and message."""
        ...


class LaneNudger(Protocol):
    async def nudge_quietly(self, address: LaneAddress, news: LaneNews) -> None: ...


class LaneDriver:
    """Drives lanes on one lane store, starting runs, writing and nudging through what it is given."""

    def __init__(
        self,
        lanes: LaneStore,
        settings: Settings,
        starter: RunStarter,
        writer: ActionWriter,
        nudger: LaneNudger,
        registered: Collection[str] = (),
        observed: Observed = Observed(),
        read_ahead: int = 0,
    ) -> None:
        self.lanes = lanes
        self.settings = settings
        self.starter = starter
        self.writer = writer
        self.nudger = nudger
        self.registered = frozenset(registered) or None
        self.observed = observed
        # `read_ahead`: for how many lanes at most a read runs ahead of their run's end (the newest kept).
        self.read_ahead = read_ahead
        self._ahead: OrderedDict[LaneAddress, asyncio.Task[LaneSnapshot | None]] = OrderedDict()

    # -- driving a lane --------------------------------------------------------------------------------------

    async def drive(
        self,
        address: LaneAddress,
        *,
        lane_now: float | None = None,
        early: float = 0.0,
        settle: float = 0.0,
        time_skipping: bool = False,
        read: LaneSnapshot | None = None,
    ) -> Drive:
        """Step the lane until it waits. `lane_now`: the lane's time, which leads the database's clock on a
        server that skips time (the test server); `early`: the longest wait waited out here; `settle`: how
        long to wait before the first read (a lane woken early for a step due then); `read`: the lane as
        read already (a run's end answers it), for its first read."""
        skew = max(lane_now - time.time(), 0.0) if time_skipping and lane_now is not None else 0.0
        drive = Drive()
        if settle > 0:
            await asyncio.sleep(min(settle, early))
        snap = await self._first_read(address, read)
        stale = 0
        for _ in range(MAX_STEPS):
            if snap is None:
                return drive
            now = snap.now + skew
            drive.snapshot, drive.now = snap, now
            if not snap.complete:
                # Read without envelopes (a finish's answer): enough to wait on, not to take a batch from.
                move = next_move(snap, now, self.settings.limits)
                if not isinstance(move, Wait):
                    snap = await self.lanes.snapshot(address)
                    continue
            decision = step(snap, now, self.settings.limits, self.registered)
            if isinstance(decision, Wait):
                decl = snap.listener.declaration if snap.listener is not None else None
                if decision.queue_for_key_slot and await self.lanes.queue_for_key_slot(
                    snap, key_max(decl, self.settings)
                ):
                    snap = await self.lanes.snapshot(address)  # a slot was free after all: take it
                    continue
                if decision.give_back_key_slot:
                    drive.handed += await self.lanes.give_back_key_slot(snap, key_max(decl, self.settings))
                if decision.until is not None and early > 0 and decision.until - now <= early:
                    await asyncio.sleep(max(decision.until - now, 0.0))
                    snap = await self.lanes.snapshot(address)
                    continue
                if decision.reason == "slot_held" and snap.oldest_at is not None and decl is not None:
                    self._read_next(address, decl)
                if decision.reason == "throttled" and decision.until is not None:
                    await self._held(snap, decision.until)
                drive.wait = decision
                return drive
            if isinstance(decision, Drop):
                await self.lanes.drop_replay(decision.replay_id)
                snap = await self.lanes.snapshot(address)
                continue
            if isinstance(decision, Finish):
                take, batch_id = take_of_claimed(snap), decision.claimed.batch.id
            else:
                take = decision
                decl = snap.listener.declaration if snap.listener is not None else None
                limits = self.settings.limits
                recorded = await self.lanes.record(
                    snap,
                    take,
                    limits.listener_fires_per_minute,
                    key_max(decl, self.settings),
                    at=now,
                    executions_limit=limits.executions_per_session,
                )
                if isinstance(recorded, Stale):
                    stale += 1
                    self.observed.log.debug(
                        "lane %s moved on (%s); reading it again", address.workflow_id, recorded.reason
                    )
                    snap = await self.lanes.snapshot(address)
                    continue
                assert isinstance(recorded, Recorded)
                crossing("batch.recorded")
                batch_id = recorded.batch_id
                drive.handed += recorded.granted
            snap = await self._act_and_finish(snap, take, batch_id, drive)
        return drive

    def _repeat_in(self, repeat_in: float | None, at: float | None) -> float | None:
        """A repeat's wait on the database's clock. On a server that skips time a lane reads that clock moved on
        by all the server has skipped (`drive`'s skew), and a due time set at the end on the database's clock
        holds none of what was skipped before the end: that part is added, so the repeat waits its delay in the
        run's time too, however the lane is woken. Nothing on any other server."""
        if repeat_in is None or at is None or not self.settings.temporal_time_skipping:
            return repeat_in
        return repeat_in + max(at - time.time(), 0.0)

    async def _held(self, snap: LaneSnapshot, until: float) -> None:
        """The listener's throttle holds the lane until `until`: noted on the lane once (what status shows, and
        what keeps the router's poll off it), and said once in the log."""
        if snap.throttled_until is not None and abs(snap.throttled_until - until) < HELD_SAME_SECONDS:
            return
        await self.lanes.hold(snap, until)
        address = snap.address
        self.observed.log.info(
            "lane %s held by its listener's throttle until %s",
            address.workflow_id,
            datetime.fromtimestamp(until, UTC).isoformat(),
            extra=log_fields(address.session_id, address.listener, address.lane),
        )

    # -- reading ahead -------------------------------------------------------------------------------------

    def _read_next(self, address: LaneAddress, decl: ListenerDeclaration) -> None:
        """Read the lane's waiting events now, while the run that holds its slot runs: that run's end drives the
        lane, and a full read (a thousand envelopes: a quarter of a serial lane's cycle, bench.bulk_events) is
        then off its path. Not with `distinct_by`: a read then holds up to five times as many envelopes, and is
        full, so of use, only when five times `max_events` wait. Nor for a keyed lane: its run's end hands the
        key slot to the lane that has waited longest, most often another key's, and reads that one."""
        if self.read_ahead <= 0 or address in self._ahead:
            return
        if decl.batch.distinct_by is not None or decl.concurrency.mode == "keyed":
            return
        while len(self._ahead) >= self.read_ahead:
            self._ahead.popitem(last=False)[1].cancel()
        task = asyncio.ensure_future(self.lanes.snapshot(address))
        task.add_done_callback(_forget_failure)
        self._ahead[address] = task

    async def _first_read(self, address: LaneAddress, read: LaneSnapshot | None = None) -> LaneSnapshot | None:
        """A drive's first read of its lane: `read` when whole; else the one read ahead, brought up to date by
        a read without envelopes (`read`, or one made now) when it still holds (`lane_snapshot.with_read_ahead`);
        else `read` (the drive reads whole if it must take a batch) or a full read."""
        ahead = self._ahead.pop(address, None)
        if read is not None and read.complete:
            if ahead is not None:
                ahead.cancel()
            return read
        if ahead is not None:
            try:
                earlier = await ahead
            except Exception:
                earlier = None  # the read ahead failed: read now
            if earlier is not None:
                fresh = read if read is not None else await self.lanes.snapshot(address, 0)
                if fresh is None:
                    return None
                current = with_read_ahead(fresh, earlier)
                if current is not None:
                    return current
        return read if read is not None else await self.lanes.snapshot(address)

    async def _act_and_finish(self, snap: LaneSnapshot, take: Take, batch_id: int, drive: Drive) -> LaneSnapshot | None:
        address = snap.address
        fields = log_fields(address.session_id, address.listener, address.lane, take.consumed)
        parent, links = parent_and_links(q.traceparent for q in take.entries)
        attributes: dict[str, Any] = {f"orchestrator.{k}": v for k, v in fields.items()}
        attributes["orchestrator.events"] = len(take.consumed)
        if take.retry:
            attributes["orchestrator.retry"] = take.retry
        with self.observed.tracer.start_as_current_span(
            "batch", context=parent, links=links, attributes=attributes
        ) as span:
            acted = await self._act(snap, take)
            acted_at = datetime.now(UTC)
            if acted.status is not None:
                span.set_attribute("orchestrator.outcome", acted.status)
            outcome = None
            if acted.status is not None:
                outcome = Outcome(
                    status=acted.status,
                    reason=take.verdict.reason if isinstance(take.verdict, Stop) else None,
                    listener=address.listener,
                    lane=address.lane,
                    first_id=take.first_id,
                    last_id=take.last_id,
                    event_ids=list(take.consumed),
                    count=len(take.entries),
                    retry=take.retry,
                    replay=take.replay_number,
                    execution_id=acted.execution_id,
                    message=acted.message,
                    at=datetime.now(UTC),
                )
            decl = snap.listener.declaration if snap.listener is not None else None
            finished = await self.lanes.finish(
                Finishing(
                    snap=snap,
                    take=take,
                    batch_id=batch_id,
                    started=acted.started,
                    outcome=outcome,
                    version=take.plan.version
                    if take.plan is not None
                    else (snap.listener.version if snap.listener else None),
                    release=take.plan is not None and not acted.started,
                    key_max=key_max(decl, self.settings),
                    receipt=self._receipt(snap, take, outcome),
                    failed_execution=self._failure_before(take, acted),
                )
            )
        crossing("batch.finished")
        if acted.started and finished.stop is not None:
            # Stopped between its record and its start: told now (noted told by the finish; a run left untold by a
            # death here is terminated past its grace by the router's poll).
            try:
                await tell_stop(self.starter, take.execution_id, finished.stop)
            except Exception:
                self.observed.log.warning("could not tell run %s its stop", take.execution_id, exc_info=True)
        elif acted.started and finished.cancel:
            # Its cancel watch heard its event before the run was on Temporal: cancelled now (a death here leaves it
            # to its grace, which the router's poll holds it to from the note told).
            try:
                await self.starter.cancel(take.execution_id)
            except Exception:
                self.observed.log.warning("could not cancel run %s", take.execution_id, exc_info=True)
        if acted.started and (finished.snapshot is None or finished.snapshot.session_status == "deleting"):
            # Its session's deletion began after the batch's record and ended the session's runs before this one
            # started: the run has no session left to act in.
            await self.starter.stop(take.execution_id, SESSION_DELETED)
        drive.handed += finished.granted
        if outcome is not None:
            drive.outcomes.append(outcome)
            if finished.outcome_new:
                self.observed.metrics.outcomes.add(1, {"listener": outcome.listener, "status": outcome.status})
        # Counted by the finish that marked the batch done: an attempt of the lane's step that outlived its timeout
        # may act on the same batch and finish it again.
        if take.retry == 0 and take.kind == "batch" and finished.done_new:
            self.observed.metrics.batches_cut.add(1, {"listener": address.listener})
            self.observed.metrics.lane_pending.add(-len(take.consumed), {"listener": address.listener})
        if take.retry == 0 and acted.started and finished.done_new:
            commits = [q.committed for q in take.entries]
            first = datetime.fromtimestamp(min(commits), UTC) if commits else None
            self.observed.metrics.run_started(address.listener, first, acted_at)
        if take.retry > 0 and finished.done_new:
            # Its wait is over, whether it started or a guard stopped it.
            self.observed.metrics.retries_waiting.add(-1, {"listener": address.listener})
        # `activity` and its fields are what `orchestrator dev` prints a line of (`dev/log.py`).
        batch_fields = {
            **fields,
            "activity": "batch",
            "status": acted.status or "consumed",
            "events": len(take.consumed),
            "retry": take.retry,
        }
        if acted.started and acted.execution_id:
            batch_fields["execution"] = acted.execution_id
        elif acted.message:
            batch_fields["reason"] = acted.message
        self.observed.log.info("batch %s", acted.status or "consumed", extra=batch_fields)
        return finished.snapshot

    def _receipt(self, snap: LaneSnapshot, take: Take, outcome: Outcome | None) -> dict[str, Any] | None:
        """The receipt's thread item when declared and due: the batch's doing, one deeper than its events."""
        if outcome is None or not wants_receipt(outcome):
            return None
        if take.kind == "repeat":
            alias = take.plan.receipt if take.plan is not None else self._declared_receipt(snap)
        else:
            alias = self._declared_receipt(snap)
        if alias is None:
            return None
        item = receipt_item(outcome)
        return {
            "alias": alias,
            "id": new_id("itm"),
            "type": item["type"],
            "role": item["role"],
            "message": item["message"],
            "preview": preview(item["message"]),
            "metadata": item["metadata"],
            "depth": take.depth + 1,
            "key": f"receipt:{outcome.listener}:{outcome.batch_key}",
            "cause": batch_cause(snap.address, take),
        }

    @staticmethod
    def _declared_receipt(snap: LaneSnapshot) -> str | None:
        decl = snap.listener.declaration if snap.listener is not None else None
        return decl.receipt.alias if decl is not None and decl.receipt is not None else None

    @staticmethod
    def _failure_before(take: Take, acted: Acted) -> str | None:
        """A repeat that did not start (a guard stopped it, but for a closed session): the failed run before it
        stands as the last attempt, so its `listener.failed` is written."""
        if take.kind != "repeat" or acted.started or acted.status is None:
            return None
        if isinstance(take.verdict, Stop) and take.verdict.reason == "session_not_open":
            return None
        from orchestrator.core.lane_keys import execution_id_of

        return execution_id_of(take.run_key, take.retry - 1)

    # -- acting ----------------------------------------------------------------------------------------------

    async def _act(self, snap: LaneSnapshot, take: Take) -> Acted:
        verdict = take.verdict
        if isinstance(verdict, Consume) or snap.listener is None:
            return Acted(None)
        if isinstance(verdict, Stop):
            return Acted(verdict.status, verdict.message)
        if take.ran:
            return Acted("success", None, take.execution_id, started=True)
        address = snap.address
        decl = snap.listener.declaration
        session = {"id": address.session_id, **({"alias": snap.session_alias} if snap.session_alias else {})}
        version = take.plan.version if take.plan is not None else snap.listener.version
        template = take.plan.input if take.plan is not None else _write_template(decl)
        # Events whole only for a template that names them: the rest renders from the entries' pointers.
        events = await self.lanes.envelopes([q.id for q in take.entries]) if needs_envelopes(template) else None
        context = batch_context(
            messages=[q.message for q in take.entries],
            events=events,
            retry=take.retry,
            lane=address.lane,
            listener={"name": address.listener, "version": version},
            session=session,
            consumed_ids=take.consumed,
            replay_of=take.replay_of,
        )
        try:
            if take.plan is not None:
                return await self._start(snap, take, context)
            suffix = f":r{take.replay_number}" if take.replay_number else ""
            key = f"{address.workflow_id}:{take.first_id}:{take.last_id}{suffix}"
            with caused_by(batch_cause(address, take)):
                status, message = await self.writer.write(decl, address.session_id, context, take.depth + 1, key)
            crossing("write.made")
            return Acted(status, message)
        except Exception as err:
            if transient(err):
                raise
            if over_temporal_size_limit(err):
                return Acted("refused", f"action.input: the run's input is over Temporal's payload size limit ({err})")
            # Whatever else fails is the batch's own doing (a value the store refuses): it would fail again.
            self.observed.log.warning("batch failed for good: %s", err, exc_info=True)
            return Acted("invocation_error", f"action: {type(err).__name__}: {err}"[:2000])

    async def _start(self, snap: LaneSnapshot, take: Take, context: dict[str, Any]) -> Acted:
        plan = take.plan
        assert plan is not None
        try:
            rendered = render(plan.input, context)
        except TemplateError as err:
            return Acted("invocation_error", f"action.input: {err}")
        address = snap.address
        # The pointers cross only for a template that names them: 1,000 of them are ~60 KB of history.
        carried = needs_messages(plan.input)
        # Fewer entries than events consumed (`distinct_by`, events the listener no longer takes): say which.
        superseded = len(take.consumed) - len(take.entries)
        # A run on a queue its action names learns the platform's, where its session calls and its end go.
        elsewhere, home = run_queues(plan.task_queue, self.settings.task_queue)
        run_input = RunInput(
            session_id=address.session_id,
            listener=address.listener,
            batch=BatchInfo(
                first_id=take.first_id,
                last_id=take.last_id,
                count=len(take.entries),
                retry=take.retry,
                lane=address.lane,
                event_ids=list(take.consumed),
                messages=context["batch"]["messages"] if carried else None,
                events=context["batch"].get("events"),
                entry_ids=None if carried or superseded == 0 else [q.id for q in take.entries],
                replay_of=take.replay_of,
            ),
            input=rendered,
            execution_id=take.execution_id,
            run_key=take.run_key,
            depth=take.depth,
            platform_task_queue=home,
        )
        decl = snap.listener.declaration if snap.listener is not None else None
        tag = RunTag(
            execution_id=take.execution_id,
            session_id=address.session_id,
            workflow=plan.workflow,
            run_key=take.run_key,
            listener=address.listener,
            lane=address.lane,
            depth=take.depth + 1,
            retry=take.retry,
            attempts=plan.attempts,
            delay_seconds=plan.delay_seconds,
            key_slots=key_max(decl, self.settings) or None if plan.keyed else None,
            task_queue=elsewhere,
            platform_task_queue=home,
        )
        priority = run_priority(plan.priority, address.lane if plan.keyed else None)
        if decl is not None and decl.cancel_on:
            # In place before the run starts: an event after its batch cancels it, however soon it comes.
            await self.lanes.watch_for_cancel(
                CancelWatch(
                    execution_id=take.execution_id,
                    session_id=address.session_id,
                    listener=address.listener,
                    lane=address.lane,
                    after=take.last_id,
                    cancel_on=tuple(decl.cancel_on),
                    key_segments=decl.concurrency.key_segments,
                )
            )
        await self.starter.start(tag, run_input, priority)
        crossing("run.started")
        return Acted("success", None, take.execution_id, started=True)

    # -- a run's end -----------------------------------------------------------------------------------------

    async def end(
        self, tag: RunTag, status: str, error: str | None, error_type: str | None = None, *, at: float | None = None
    ) -> bool:
        """Record a run's end (once), hold its slot for its repeat or release it, and drive the lanes it frees
        a slot for (its own, when more waits in it; the one a freed key slot goes to). Whether this recorded it
        (False: it was recorded before). `at`: the run's own time at its end, when it reports it."""
        own = None
        if tag.listener is not None and tag.lane is not None:
            own = LaneAddress(
                tag.session_id, tag.listener, tag.lane, lane_workflow_id(tag.session_id, tag.listener, tag.lane)
            )
        decision = None
        if tag.run_key is not None and tag.listener is not None:
            run = HeldSlot(
                run_key=tag.run_key,
                batch_id=0,
                execution_id=tag.execution_id,
                retry=tag.retry,
                plan=RunPlan(
                    workflow=tag.workflow,
                    input=None,
                    attempts=tag.attempts,
                    delay_seconds=tag.delay_seconds,
                    receipt=None,
                    version=0,
                    depth=tag.depth,
                    keyed=tag.key_slots is not None,
                ),
            )
            decision = run_end(run, status)
        ended = await self.lanes.end_run(
            Ending(
                execution_id=tag.execution_id,
                session_id=tag.session_id,
                status=status,
                # Cut here as the Python SDK cuts them: a worker of another language reports by name what it will.
                error=None if error is None else error[:ERROR_CHARS],
                error_type=None if error_type is None else error_type[:ERROR_TYPE_CHARS],
                listener=tag.listener,
                keyed=tag.key_slots is not None,
                key_max=tag.key_slots or 0,
                repeat_in=None if decision is None else self._repeat_in(decision.repeat_in, at),
                gave_up=decision is not None and decision.gave_up,
                lane=tag.lane,
                # Its waiting events read ahead while it ran: the end's read of it needs none.
                fetch_own=0 if own in self._ahead else FETCH_EVENTS,
            )
        )
        crossing("run_end.recorded")
        say_run_end(
            self.observed.log,
            tag.session_id,
            tag.listener,
            tag.lane,
            tag.execution_id,
            ended.status or status,
            ended.error if ended.recorded else error,
            ended.recorded,
        )
        if own is None:
            return ended.recorded
        if decision is not None and decision.repeat_in is not None and not ended.stopped:
            # Told again when the end was recorded before (a report that died after its record runs again): the
            # lane learns of its repeat either way, at worst a little late.
            if ended.recorded:
                self.observed.metrics.retries_waiting.add(1, {"listener": tag.listener})
            await self.nudger.nudge_quietly(own, LaneNews(due_in=decision.repeat_in))
        if ended.recorded:
            await self.hand_on(list(ended.drive), ended.snapshot)
        return ended.recorded

    async def hand_on(self, lanes: list[LaneAddress], read: LaneSnapshot | None = None) -> None:
        """Drive the lanes a freed slot went to, here and now: whoever frees a slot takes what waits for it (act's
        drain), which spares each a nudge and a workflow task. A lane whose window is still open is nudged to
        step when it closes, rather than waited for here: the ending run's last workflow task stays open while
        this runs, and a serial lane's runs held their slot 60% longer when it waited (bench.batch_cost). One that
        cannot be driven now is nudged to drive itself. `read`: the first lane as the run's end read it."""
        handed = 0
        while lanes and handed < MAX_HAND_ON:
            address = lanes.pop(0)
            handed += 1
            first, read = read, None
            try:
                drive = await self.drive(address, read=first)
            except Exception:
                self.observed.log.warning(
                    "could not drive lane %s for the slot it was handed", address.workflow_id, exc_info=True
                )
                await self.nudger.nudge_quietly(address, LaneNews(due_in=0.0))
                continue
            lanes += drive.handed
            news = drive.news()
            if news.due_in is not None:
                await self.nudger.nudge_quietly(address, news)
        for address in lanes:
            await self.nudger.nudge_quietly(address, LaneNews(due_in=0.0))
