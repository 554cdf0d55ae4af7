"""The lane engine's activities: the checks before a batch fires, outcomes, receipts, writes and runs.

Owns the I/O the workflows ask for; every decision that needs no I/O is the pure core's. Activities are
methods of one class that receives the store, the settings, the Temporal client and the names of the
registered workflows in its constructor (the worker's composition root builds it). Each is idempotent:
outcomes are keyed by batch, writes carry an idempotency key, executions by id.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy

from orchestrator.config import Settings
from orchestrator.core.declaration import ListenerDeclaration, WorkflowAction, effective_max_parallel
from orchestrator.core.errors import CommandError
from orchestrator.core.filters import listener_accepts
from orchestrator.core.globs import compile_alias_glob, validate_alias
from orchestrator.core.outcomes import Outcome, receipt_item, wants_receipt
from orchestrator.store.engine_records import EngineRecords
from workflows.messages import (
    ACQUIRE_SIGNAL,
    RELEASE_SIGNAL,
    BatchCheck,
    BatchVerdict,
    ExecutionRecord,
    LaneAddress,
    PermitRequest,
    RunPlan,
    WriteAction,
)

log = logging.getLogger(__name__)


def permits_workflow_id(session_id: str, listener: str) -> str:
    return f"permits:{session_id}:{listener}"


def may_write(owns: list[str] | None, alias: str) -> bool:
    return owns is None or any(compile_alias_glob(glob).match(alias) for glob in owns)


class EngineActivities:
    def __init__(
        self,
        store: EngineRecords,
        settings: Settings,
        temporal: Client | None,
        registered_workflows: Collection[str],
    ) -> None:
        self.store = store
        self.settings = settings
        self.temporal = temporal
        self.registered_workflows = frozenset(registered_workflows)

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.check_batch,
            self.record_outcome,
            self.apply_write,
            self.execution_started,
            self.execution_ended,
            self.start_run,
            self.request_permit,
            self.release_permit,
        ]

    async def _keep(self, session_id: str, outcome: Outcome, version: int | None, receipt: str | None) -> None:
        """Record an outcome and, when declared and due, post its receipt (both once per batch)."""
        await self.store.record_outcome(session_id, outcome, version)
        if receipt is not None and wants_receipt(outcome):
            await self.store.post_thread_item(
                session_id,
                receipt,
                receipt_item(outcome),
                source={"listener": outcome.listener},
                idempotency_key=f"receipt:{outcome.listener}:{outcome.lane}:{outcome.first_id}:"
                f"{outcome.last_id}:{outcome.retry}",
            )

    @activity.defn(name="orchestrator.check_batch")
    async def check_batch(self, check: BatchCheck) -> BatchVerdict:
        """Decide whether a cut batch fires, or which outcome it ends with instead (recorded here)."""
        address = check.address
        limits = self.settings.limits
        try:
            listener = await self.store.get_listener(address.listener)
        except CommandError:
            # Deleted since the events were routed: consumed with no run and nothing to report to.
            return BatchVerdict(fire=False, consumed_silently=True)
        decl = ListenerDeclaration.model_validate(listener["body"])
        session = await self.store.get_session(address.session_id)
        verdict = BatchVerdict(
            fire=False,
            version=listener["version"],
            declaration=listener["body"],
            session={k: v for k, v in session.items() if k in ("id", "alias") and v is not None},
            max_parallel=effective_max_parallel(decl.concurrency, limits),
            search_attributes=self.settings.search_attributes,
        )
        receipt = decl.receipt.alias if decl.receipt else None

        async def refuse(status: str, reason: str | None = None, message: str | None = None) -> BatchVerdict:
            outcome = _outcome(check, status, reason, message)
            await self._keep(address.session_id, outcome, listener["version"], receipt)
            return verdict.model_copy(update={"status": status, "reason": reason, "message": message})

        if address.listener in await self.store.disabled_listeners(address.session_id):
            return verdict.model_copy(update={"consumed_silently": True})
        if session["status"] != "open":
            return await refuse("skipped", "session_not_open")
        if not any(listener_accepts(decl, entry) for entry in check.entries):
            return await refuse("skipped", "unmatched")
        if check.depth >= limits.listener_chain_depth:
            return await refuse("skipped", "depth", f"depth {check.depth} reached listener_chain_depth")
        fired = await self.store.fires_in_last_minute(address.session_id, address.listener)
        if fired >= limits.listener_fires_per_minute:
            return await refuse("throttled", None, f"{fired} fires in the last minute")
        action = decl.action
        if isinstance(action, WorkflowAction):
            if self.registered_workflows and action.workflow not in self.registered_workflows:
                return await refuse("invocation_error", None, f"action.workflow: {action.workflow!r} is not registered")
            running = await self.store.running_executions(address.session_id)
            if running >= limits.executions_per_session:
                return await refuse("refused", None, f"executions_per_session: {running} running")
        return verdict.model_copy(update={"fire": True})

    @activity.defn(name="orchestrator.record_outcome")
    async def record_outcome(self, address: LaneAddress, outcome: Outcome, receipt: str | None) -> None:
        await self._keep(address.session_id, outcome, None, receipt)

    @activity.defn(name="orchestrator.apply_write")
    async def apply_write(self, write: WriteAction, success: Outcome) -> Outcome:
        """Post the thread item or write the object an action rendered, and record the outcome."""
        address = write.address
        source = {"listener": address.listener}
        outcome = success
        try:
            validate_alias(write.alias)
        except ValueError as err:
            outcome = success.model_copy(update={"status": "invocation_error", "message": f"action.alias: {err}"})
        else:
            if not may_write(write.owns, write.alias):
                outcome = success.model_copy(
                    update={
                        "status": "access_error",
                        "message": f"action.alias: {write.alias!r} is outside owns",
                    }
                )
        if outcome.status == "success":
            try:
                if write.kind == "thread_item":
                    await self.store.post_thread_item(
                        address.session_id,
                        write.alias,
                        write.body,
                        source=source,
                        depth=write.depth,
                        idempotency_key=write.idempotency_key,
                    )
                else:
                    await self.store.write_object(
                        address.session_id,
                        write.alias,
                        write.body,
                        source=source,
                        depth=write.depth,
                        idempotency_key=write.idempotency_key,
                    )
            except (CommandError, KeyError, TypeError) as err:
                code = getattr(err, "code", None)
                status = "refused" if code in ("limit_exceeded", "session_not_open") else "invocation_error"
                outcome = success.model_copy(update={"status": status, "message": str(err)})
        listener = await self.store.get_listener(address.listener)
        decl = ListenerDeclaration.model_validate(listener["body"])
        await self._keep(address.session_id, outcome, listener["version"], decl.receipt.alias if decl.receipt else None)
        return outcome

    @activity.defn(name="orchestrator.execution_started")
    async def execution_started(self, record: ExecutionRecord, receipt: str | None) -> list[Outcome]:
        """Record the run's start, its event and (for a listener's batch) the batch's `success` outcome."""
        await self.store.execution_started(record.model_dump())
        if record.listener is None or record.batch is None:
            return []
        batch = record.batch
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
        await self._keep(record.session_id, outcome, None, receipt)
        return [outcome]

    @activity.defn(name="orchestrator.execution_ended")
    async def execution_ended(self, record: ExecutionRecord, gave_up: bool) -> None:
        """Record the run's end and its event; after the last failed attempt, `listener.failed` too."""
        await self.store.execution_ended(record.model_dump())
        if gave_up and record.listener is not None and record.batch is not None:
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

    @activity.defn(name="orchestrator.start_run")
    async def start_run(self, plan: RunPlan) -> None:
        """Start the run workflow of a batch; a run with this id already going is that batch's run."""
        assert self.temporal is not None
        await self.temporal.start_workflow(
            "OrchestratorRun",
            plan,
            id=plan.run_key,
            task_queue=plan.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )

    @activity.defn(name="orchestrator.request_permit")
    async def request_permit(self, address: LaneAddress, request: PermitRequest) -> None:
        from workflows.permits import PermitState

        assert self.temporal is not None
        await self.temporal.start_workflow(
            "OrchestratorKeyPermits",
            PermitState(max_parallel=request.max_parallel),
            id=permits_workflow_id(address.session_id, address.listener),
            task_queue=activity.info().task_queue,
            start_signal=ACQUIRE_SIGNAL,
            start_signal_args=[request],
        )

    @activity.defn(name="orchestrator.release_permit")
    async def release_permit(self, address: LaneAddress, lane_workflow_id: str) -> None:
        assert self.temporal is not None
        handle = self.temporal.get_workflow_handle(permits_workflow_id(address.session_id, address.listener))
        await handle.signal(RELEASE_SIGNAL, lane_workflow_id)


def _outcome(check: BatchCheck, status: Any, reason: Any, message: str | None) -> Outcome:
    ids = check.event_ids
    return Outcome(
        status=status,
        reason=reason,
        listener=check.address.listener,
        lane=check.address.lane,
        first_id=min(ids),
        last_id=max(ids),
        event_ids=ids,
        count=len(check.entries),
        message=message,
        at=activity.info().started_time,
    )
