"""The lane engine's activities: firing a batch, and recording a run's start and end.

Owns the I/O the workflows ask for; every decision that needs no I/O is the pure core's (filters,
templates, outcomes, backoff). `fire_batch` is one round trip for the lane: the checks of SPEC section 5 in
order, the key slot of a keyed listener, the templates, then the write or the run's start, and the outcome
with its receipt. Activities are methods of one class that receives the store, the settings, the Temporal
client and the registered workflow names (the worker's composition root builds it). Each is idempotent:
outcomes are keyed by batch, writes carry an idempotency key, runs and executions by id.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from temporalio import activity
from temporalio.client import WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from activities.base import PlatformActivities
from orchestrator.core.declaration import ListenerDeclaration, ThreadItemAction, WorkflowAction, effective_max_parallel
from orchestrator.core.errors import CommandError
from orchestrator.core.events import message_of
from orchestrator.core.filters import listener_accepts
from orchestrator.core.globs import compile_alias_glob, validate_alias
from orchestrator.core.outcomes import Outcome, receipt_item, wants_receipt
from orchestrator.core.templates import TemplateError, batch_context, render
from orchestrator.telemetry import METRICS, TRACER, log_fields, parent_and_links
from workflows.messages import (
    KEY_SLOT_SIGNAL,
    RUN_FINISHED_SIGNAL,
    TRACE_KEY,
    BatchInfo,
    ExecutionRecord,
    FireRequest,
    FireResult,
    IdleNotice,
    LaneAddress,
    RepeatCheck,
    RepeatVerdict,
    RunFinished,
    RunInput,
    RunPlan,
)

log = logging.getLogger(__name__)

# How many times a run tells a lane it cannot find that it finished before it takes the lane for gone.
LANE_GONE_ATTEMPTS = 5


def may_write(owns: list[str] | None, alias: str) -> bool:
    """Whether a listener that declares `owns` may write `alias` (no `owns`: anywhere)."""
    return owns is None or any(compile_alias_glob(glob).match(alias) for glob in owns)


def run_key(request: FireRequest) -> str:
    """The run workflow id of a batch: the lane's id with the batch's first event id.

    A batch delivered again after a crash has the same first id, so it maps onto the run already started.
    """
    return "run" + request.lane_workflow_id.removeprefix("lane") + f":{min(request.event_ids)}"


class EngineActivities(PlatformActivities):
    def all(self) -> list[Callable[..., Any]]:
        return [
            self.fire_batch,
            self.check_repeat,
            self.execution_started,
            self.execution_ended,
            self.run_finished,
            self.lane_idle,
            self.runs_gone,
        ]

    @activity.defn(name="orchestrator.runs_gone")
    async def runs_gone(self, address: LaneAddress, run_keys: list[str]) -> list[str]:
        """Which of these runs have ended (their workflow closed) without telling their lane.

        A keyed lane's slot that such a run held is given back here too.
        """
        assert self.temporal is not None
        gone = [key for key in run_keys if not await _running(self.temporal.get_workflow_handle(key))]
        if gone:
            listener = await self.store.get_listener(address.listener)
            decl = ListenerDeclaration.model_validate(listener["body"])
            if decl.concurrency.mode == "keyed":
                max_parallel = effective_max_parallel(decl.concurrency, self.settings.limits)
                await self.release_key_slot(address.session_id, address.listener, address.lane, max_parallel)
        return gone

    @activity.defn(name="orchestrator.lane_idle")
    async def lane_idle(self, notice: IdleNotice) -> dict[str, Any]:
        """Write a lane's `lane.idle` event (once per silence) and answer its envelope.

        It carries the listener as its source, so it never reaches that listener through the router (the
        lane batches it itself), while other listeners that want `lane.idle` events get it like any other.
        """
        address = notice.address
        event = await self.store.append_event(
            address.session_id,
            "lane.idle",
            source={"listener": address.listener},
            data={
                "listener": address.listener,
                "lane": address.lane,
                "last_event_id": notice.last_event_id,
                "after_seconds": notice.after_seconds,
            },
            idempotency_key=f"idle:{notice.lane_workflow_id}:{notice.last_event_id}",
        )
        return event.envelope()

    async def _keep(
        self, session_id: str, outcome: Outcome, version: int | None, receipt: str | None, depth: int
    ) -> None:
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
                idempotency_key=f"receipt:{outcome.listener}:{outcome.lane}:{outcome.first_id}:"
                f"{outcome.last_id}:{outcome.retry}",
            )
        except CommandError as err:
            # The session closed since the batch fired (a closed session takes no more thread items). The
            # outcome is kept; refusing the record would retry it for ever and wedge the run in its slot.
            if err.code != "session_not_open":
                raise
            log.info("no receipt: the session has closed", extra=log_fields(session_id, outcome.listener))

    @activity.defn(name="orchestrator.fire_batch")
    async def fire_batch(self, request: FireRequest) -> FireResult:
        """Check a cut batch, then write or start its run; answer what became of it.

        The batch's span continues the trace of its first event and links to the others' traces; the run it
        starts and the writes it makes are in that span.
        """
        traces = [entry.get(TRACE_KEY) for entry in request.entries]
        entries = [{k: v for k, v in entry.items() if k != TRACE_KEY} for entry in request.entries]
        request = request.model_copy(update={"entries": entries})
        address, ids = request.address, request.event_ids
        parent, links = parent_and_links(traces)
        fields = log_fields(address.session_id, address.listener, address.lane, ids)
        attributes = {f"orchestrator.{k}": v for k, v in fields.items()} | {"orchestrator.events": len(ids)}
        with TRACER.start_as_current_span("batch", context=parent, links=links, attributes=attributes) as span:
            result = await self._fire_batch(request)
            if result.outcome is not None:
                span.set_attribute("orchestrator.outcome", result.outcome.status)
        if result.waiting_for_key_slot:
            log.info("batch waits for a key slot", extra=fields)
            return result
        # The router may hold events back from this lane until it has fired (orchestrator.core.pacing). Best
        # effort: the batch has fired, and a failure here must not fire it again; the router's hold is capped.
        try:
            await self.store.lane_fired(address.session_id, address.listener, address.lane, max(ids))
        except Exception:
            log.warning("could not record how far lane %s fired", address.lane, exc_info=True, extra=fields)
        labels = {"listener": address.listener, "lane": address.lane}
        METRICS.batches_cut.add(1, {"listener": address.listener})
        # Only what the router delivered was counted in; a lane's own `lane.idle` event never was.
        delivered = len(ids) - sum(1 for entry in entries if _own_silence(entry, request.address))
        METRICS.lane_pending.add(-delivered, labels)
        status = result.outcome.status if result.outcome is not None else ("running" if result.run_key else "consumed")
        log.info("batch %s", status, extra={**fields, "status": status})
        return result

    async def _fire_batch(self, request: FireRequest) -> FireResult:
        address = request.address
        limits = self.settings.limits
        try:
            listener = await self.store.get_listener(address.listener)
        except CommandError:
            # Deleted since its events were routed: consumed, nobody to report to. A keyed lane may have been
            # queued for a slot (or handed one): it gives that back, to nobody (the listener is gone).
            await self.store.release_key_slot(address.session_id, address.listener, address.lane, 0)
            return FireResult()
        decl = ListenerDeclaration.model_validate(listener["body"])
        version = int(listener["version"])
        max_parallel = effective_max_parallel(decl.concurrency, limits)
        receipt = decl.receipt.alias if decl.receipt else None

        depth = max(int(entry.get("depth", 0)) for entry in request.entries)

        if (
            activity.info().attempt > 1
            and isinstance(decl.action, WorkflowAction)
            and await self._run_exists(run_key(request))
        ):
            # An earlier attempt started this batch's run and died before it could answer: the batch has
            # fired (the run holds whatever slot it took). Without this, a retry that found no key slot free
            # would hold the batch and later start a second run under the same run key.
            return FireResult(run_key=run_key(request), max_parallel=max_parallel)

        async def ends(status: str, reason: str | None = None, message: str | None = None) -> FireResult:
            outcome = _outcome(address, request.event_ids, len(request.entries), status, reason, message)
            await self._keep(address.session_id, outcome, version, receipt, depth + 1)
            return FireResult(outcome=outcome, max_parallel=max_parallel)

        session = await self.store.get_session(address.session_id)
        stop = await self._batch_guards(address, decl, request.entries, depth, session)
        keyed = decl.concurrency.mode == "keyed"
        if stop is not None and keyed:
            # A batch that waited for a key slot may have been handed one (or still be queued for one): a
            # batch that goes no further gives it back, or the slot stays taken until the key's next batch.
            await self.release_key_slot(address.session_id, address.listener, address.lane, max_parallel)
        if stop is CONSUMED:
            return FireResult(max_parallel=max_parallel)  # switched off: consumed with no run, no outcome
        if isinstance(stop, Stop):
            return await ends(stop.status, stop.reason, stop.message)

        if keyed and not await self.store.acquire_key_slot(
            address.session_id, address.listener, address.lane, request.lane_workflow_id, max_parallel
        ):
            return FireResult(waiting_for_key_slot=True, max_parallel=max_parallel)
        started = start_attempted = False
        try:
            context = batch_context(
                entries=request.entries,
                retry=0,
                lane=address.lane,
                listener={"name": decl.name, "version": version},
                session={k: v for k, v in session.items() if k in ("id", "alias") and v is not None},
                consumed_ids=request.event_ids,
            )
            action = decl.action
            if isinstance(action, WorkflowAction):
                try:
                    rendered = render(action.input, context)
                except TemplateError as err:
                    return await ends("invocation_error", None, f"action.input: unknown template path {err}")
                start_stop = await self._start_guards(address, action.workflow)
                if start_stop is not None:
                    return await ends(start_stop.status, start_stop.reason, start_stop.message)
                plan = self._plan(
                    request, decl, version, rendered, depth, max_parallel if keyed else None, context["session"]
                )
                start_attempted = True
                await self._start_run(plan)
                started = True
                return FireResult(run_key=plan.run_key, max_parallel=max_parallel)
            return await self._write(request, decl, version, context, depth, receipt, max_parallel)
        finally:
            # A start that raised may still have started the run (a deadline passed after the server took
            # it): the slot stays, and the retried fire finds the run holding it or takes the slot again.
            if keyed and not started and not start_attempted:
                await self.release_key_slot(address.session_id, address.listener, address.lane, max_parallel)

    async def _batch_guards(
        self,
        address: LaneAddress,
        decl: ListenerDeclaration,
        entries: list[dict[str, Any]],
        depth: int,
        session: dict[str, Any],
    ) -> Stop | _Consumed | None:
        """The checks of SPEC section 5 every batch passes, a repeat included, before its action: in order.

        `depth` is the batch's deepest event's.
        """
        limits = self.settings.limits
        if address.listener in await self.store.disabled_listeners(address.session_id):
            return CONSUMED
        if session["status"] != "open":
            return Stop("skipped", "session_not_open")
        if not any(listener_accepts(decl, entry) or _own_silence(entry, address) for entry in entries):
            return Stop("skipped", "unmatched")
        if depth >= limits.listener_chain_depth:
            return Stop("skipped", "depth", f"depth {depth} reached listener_chain_depth")
        fired = await self.store.fires_in_last_minute(address.session_id, address.listener)
        if fired >= limits.listener_fires_per_minute:
            return Stop("throttled", None, f"{fired} fires in the last minute")
        return None

    async def _start_guards(self, address: LaneAddress, workflow: str) -> Stop | None:
        """The checks before a run of `workflow` starts (a repeat's too): registered, and room for it."""
        if self.registered_workflows and workflow not in self.registered_workflows:
            return Stop("invocation_error", None, f"action.workflow: {workflow!r} is not registered")
        running = await self.store.running_executions(address.session_id)
        if running >= self.settings.limits.executions_per_session:
            return Stop("refused", None, f"executions_per_session: {running} running")
        return None

    @activity.defn(name="orchestrator.check_repeat")
    async def check_repeat(self, check: RepeatCheck) -> RepeatVerdict:
        """Whether a failed run's batch may be delivered again: a repeat is a batch of its own, so it passes
        the same guards first (the session may have closed during the wait, the listener been switched off,
        re-saved or deleted, the fires of the last minute or the running executions reached their limits).

        A repeat a guard stops records its outcome and receipt; the failure then stands as the last one, so
        `listener.failed` is written (unless the session is closed, or the listener is gone or switched off),
        and a keyed run's key slot is given back.
        """
        plan, failed = check.plan, check.failed
        address, batch = plan.address, plan.input.batch
        try:
            listener = await self.store.get_listener(address.listener)
        except CommandError:
            stop: Stop | _Consumed | None = CONSUMED  # deleted during the wait: nobody to report to
        else:
            decl = ListenerDeclaration.model_validate(listener["body"])
            session = await self.store.get_session(address.session_id)
            stop = await self._batch_guards(address, decl, batch.events, plan.input.depth, session)
            if stop is None:
                # The repeat runs the workflow its plan names, whatever a re-save declared since.
                stop = await self._start_guards(address, plan.workflow)
        if stop is None:
            return RepeatVerdict(go=True)
        outcome = None
        if isinstance(stop, Stop):
            outcome = _outcome(address, batch.event_ids, batch.count, stop.status, stop.reason, stop.message)
            outcome = outcome.model_copy(update={"retry": check.retry})
            await self._keep(address.session_id, outcome, plan.version, plan.receipt_alias, plan.input.depth + 1)
            if stop.reason != "session_not_open":
                await self._report_failure(failed)
        if plan.key_slot_max_parallel is not None:
            await self.release_key_slot(address.session_id, address.listener, address.lane, plan.key_slot_max_parallel)
        # Last, so that an attempt that failed above and is retried counts the repeat out once.
        METRICS.retries_waiting.add(-1, {"listener": address.listener})
        return RepeatVerdict(go=False, outcome=outcome)

    async def _write(
        self,
        request: FireRequest,
        decl: ListenerDeclaration,
        version: int,
        context: dict[str, Any],
        depth: int,
        receipt: str | None,
        max_parallel: int,
    ) -> FireResult:
        """A thread_item or object action: render, check the alias, write with the listener as the source."""
        action = decl.action
        assert not isinstance(action, WorkflowAction)
        body_field = "item" if isinstance(action, ThreadItemAction) else "value"
        status, message = "success", None
        try:
            alias = render(action.alias, context)
            body = render(action.item if isinstance(action, ThreadItemAction) else action.value, context)
            if not isinstance(alias, str):
                raise ValueError("action.alias: must render to a string")
            validate_alias(alias)
            if not isinstance(body, dict):
                raise ValueError(f"action.{body_field}: must render to a JSON object")
        except TemplateError as err:
            status, message = "invocation_error", f"action: unknown template path {err}"
        except ValueError as err:
            status, message = "invocation_error", str(err)
        else:
            if not may_write(decl.owns, alias):
                status, message = "access_error", f"action.alias: {alias!r} is outside what the listener owns"
            else:
                status, message = await self._apply(request, action, alias, body, depth)
        outcome = _outcome(request.address, request.event_ids, len(request.entries), status, None, message)
        await self._keep(request.address.session_id, outcome, version, receipt, depth + 1)
        return FireResult(outcome=outcome, max_parallel=max_parallel)

    async def _apply(
        self, request: FireRequest, action: Any, alias: str, body: dict[str, Any], depth: int
    ) -> tuple[str, str | None]:
        address = request.address
        source = {"listener": address.listener}
        key = f"{request.lane_workflow_id}:{min(request.event_ids)}:{max(request.event_ids)}"
        limit = self.settings.limits.max_payload_bytes
        try:
            if len(str(body)) > limit:
                return "refused", f"payload: over the limit of {limit} bytes"
            if isinstance(action, ThreadItemAction):
                if not isinstance(body.get("type"), str):
                    return "invocation_error", "action.item: must have a string field 'type'"
                await self.store.post_thread_item(
                    address.session_id, alias, body, source=source, depth=depth + 1, idempotency_key=key
                )
            else:
                if not isinstance(body.get("type"), str):
                    return "invocation_error", "action.value: must have a string field 'type'"
                await self.store.write_object(
                    address.session_id, alias, body, source=source, depth=depth + 1, idempotency_key=key
                )
        except CommandError as err:
            return ("refused" if err.code in ("limit_exceeded", "session_not_open") else "invocation_error"), str(err)
        return "success", None

    def _plan(
        self,
        request: FireRequest,
        decl: ListenerDeclaration,
        version: int,
        rendered: Any,
        depth: int,
        key_slot_max_parallel: int | None,
        session: dict[str, Any],
    ) -> RunPlan:
        address, entries, ids = request.address, request.entries, request.event_ids
        assert isinstance(decl.action, WorkflowAction)
        batch = BatchInfo(
            first_id=min(ids),
            last_id=max(ids),
            count=len(entries),
            retry=0,
            lane=address.lane,
            event_ids=ids,
            messages=[message_of(e) for e in entries],
            events=entries,
        )
        return RunPlan(
            address=address,
            lane_workflow_id=request.lane_workflow_id,
            run_key=run_key(request),
            workflow=decl.action.workflow,
            input=RunInput(session_id=address.session_id, listener=decl.name, batch=batch, input=rendered, depth=depth),
            retry_attempts=decl.retry.attempts if decl.retry else 0,
            retry_delay_seconds=decl.retry.delay_seconds if decl.retry else 0,
            receipt_alias=decl.receipt.alias if decl.receipt else None,
            version=version,
            task_queue=request.task_queue,
            search_attributes=self.settings.search_attributes,
            key_slot_max_parallel=key_slot_max_parallel,
            input_template=decl.action.input,
            session=session,
        )

    async def _run_exists(self, key: str) -> bool:
        assert self.temporal is not None
        try:
            await self.temporal.get_workflow_handle(key).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        return True

    async def _start_run(self, plan: RunPlan) -> None:
        assert self.temporal is not None
        await self.temporal.start_workflow(
            "OrchestratorRun",
            plan,
            id=plan.run_key,
            task_queue=plan.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            # The run's first workflow task comes back with the start when this worker has room for it,
            # saving a round trip through the server's matching on every batch.
            request_eager_start=True,
        )
        commits = [datetime.fromisoformat(e["created_at"]) for e in plan.input.batch.events if "created_at" in e]
        METRICS.run_started(plan.input.listener, min(commits, default=None), datetime.now(UTC))

    async def release_key_slot(self, session_id: str, listener: str, lane: str, max_parallel: int) -> None:
        """Give a key slot back, and tell the lane it went to (if any) that it may fire."""
        granted = await self.store.release_key_slot(session_id, listener, lane, max_parallel)
        if granted is not None and self.temporal is not None:
            try:
                await self.temporal.get_workflow_handle(granted).signal(KEY_SLOT_SIGNAL)
            except Exception:  # the lane asks again on its own within seconds
                log.warning("could not tell lane %s that it holds a key slot", granted, exc_info=True)

    @activity.defn(name="orchestrator.run_finished")
    async def run_finished(self, lane_workflow_id: str, finished: RunFinished) -> None:
        """Tell a lane that its run has ended, which frees the run's slot there."""
        assert self.temporal is not None
        lane = self.temporal.get_workflow_handle(lane_workflow_id)
        try:
            await lane.signal(RUN_FINISHED_SIGNAL, finished)
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            # A lane in the middle of continuing as new can be found with no current run for a moment: try
            # again (the activity's retry) while its latest run is running, and a few times in any case. Only
            # a lane that is gone for good (terminated from outside) holds no slot and has nobody to tell.
            if activity.info().attempt < LANE_GONE_ATTEMPTS or await _running(lane):
                raise
            log.warning("lane %s is gone; run %s finished unreported", lane_workflow_id, finished.run_key)

    @activity.defn(name="orchestrator.execution_started")
    async def execution_started(self, record: ExecutionRecord, receipt: str | None) -> list[Outcome]:
        """Record the run's start, its event and (for a listener's batch) the batch's `success` outcome."""
        first_time = await self.store.execution_started(record.model_dump()) is not None
        if record.listener is None or record.batch is None:
            return []
        batch = record.batch
        if first_time and batch["retry"] > 0:
            METRICS.retries_waiting.add(-1, {"listener": record.listener})
        outcome = Outcome(
            status="success",
            listener=record.listener,
            lane=record.lane or "",
            first_id=batch["first_id"],
            last_id=batch["last_id"],
            event_ids=batch["event_ids"],
            count=batch["count"],
            retry=batch["retry"],
            execution_id=record.execution_id,
            at=activity.info().started_time,
        )
        await self._keep(record.session_id, outcome, None, receipt, record.depth)
        return [outcome]

    @activity.defn(name="orchestrator.execution_ended")
    async def execution_ended(self, record: ExecutionRecord, gave_up: bool, key_slot_max_parallel: int | None) -> None:
        """Record the run's end and its event; after the last failed attempt, `listener.failed` too.

        A keyed run that will not be repeated also gives its lane's key slot back here.
        """
        first_time = await self.store.execution_ended(record.model_dump()) is not None
        fields = log_fields(record.session_id, record.listener, record.lane, execution=record.execution_id)
        log.info("run %s", record.status, extra={**fields, "status": record.status})
        if first_time and record.status == "failed" and not gave_up and record.listener and record.batch:
            # The run repeats after its backoff; the repeat's `execution_started` counts it out again.
            METRICS.retries_waiting.add(1, {"listener": record.listener})
        if gave_up:
            await self._report_failure(record)
        if key_slot_max_parallel is not None and record.listener is not None and record.lane is not None:
            await self.release_key_slot(record.session_id, record.listener, record.lane, key_slot_max_parallel)

    async def _report_failure(self, record: ExecutionRecord) -> None:
        """Write `listener.failed` for a listener's run that failed with no attempt left (once per run)."""
        if record.listener is None or record.batch is None:
            return
        batch = record.batch
        await self.store.append_event(
            record.session_id,
            "listener.failed",
            source={"listener": record.listener, "execution": record.execution_id},
            depth=record.depth,
            data={
                "listener": record.listener,
                "lane": record.lane,
                "first_id": batch["first_id"],
                "last_id": batch["last_id"],
                "event_ids": batch["event_ids"],
                "retry": batch["retry"],
                "execution_id": record.execution_id,
                "error": record.error,
            },
            idempotency_key=f"failed:{record.execution_id}",
        )


async def _running(handle: Any) -> bool:
    """Whether the workflow (its latest run) still runs: not found, or closed in any way, is not."""
    try:
        status = (await handle.describe()).status
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        return False
    return status in (None, WorkflowExecutionStatus.RUNNING)


def _own_silence(envelope: dict[str, Any], address: LaneAddress) -> bool:
    """A `lane.idle` event this lane announced itself: it is the lane's to batch, whatever the filter says."""
    data = envelope.get("data") or {}
    return (
        envelope.get("type") == "lane.idle"
        and data.get("listener") == address.listener
        and (data.get("lane") == address.lane)
    )


def _outcome(
    address: LaneAddress, ids: list[int], count: int, status: Any, reason: Any, message: str | None
) -> Outcome:
    return Outcome(
        status=status,
        reason=reason,
        listener=address.listener,
        lane=address.lane,
        first_id=min(ids),
        last_id=max(ids),
        event_ids=ids,
        count=count,
        message=message,
        at=activity.info().started_time,
    )


@dataclass(frozen=True)
class Stop:
    """A guard that stops a batch before its action: the outcome it gets."""

    status: str
    reason: str | None = None
    message: str | None = None


class _Consumed:
    """A guard that consumes a batch with no run and no outcome (the listener switched off or deleted)."""


CONSUMED = _Consumed()
