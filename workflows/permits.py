"""Keyed permits: at most `max_parallel` keys of one listener run at once in a session.

Owns the cross-lane count for `keyed` listeners. Each keyed lane asks for a permit (signal-with-start via
an activity) before it fires and gives it back when its run ends; this workflow grants permits in the order
they were asked for, by signalling the lane. Granting is idempotent per lane, so an ask repeated after a
crash never takes two permits. The workflow completes when nobody holds or waits, and continues as new
long before its history grows large.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, Field

    from workflows.messages import ACQUIRE_SIGNAL, PERMIT_GRANTED_SIGNAL, RELEASE_SIGNAL, PermitRequest

IDLE_EXIT_SECONDS = 60.0
MAX_HISTORY_EVENTS = 2_000


class PermitState(BaseModel):
    holders: list[str] = Field(default_factory=list)
    waiting: list[PermitRequest] = Field(default_factory=list)
    max_parallel: int = 1
    to_grant: list[str] = Field(default_factory=list)


@workflow.defn(name="OrchestratorKeyPermits")
class PermitsWorkflow:
    @workflow.init
    def __init__(self, state: PermitState) -> None:
        self.state = state

    @workflow.signal(name=ACQUIRE_SIGNAL)
    def acquire(self, request: PermitRequest) -> None:
        state = self.state
        state.max_parallel = request.max_parallel
        lane = request.lane_workflow_id
        if lane in state.holders:
            state.to_grant.append(lane)  # asked again (a retried activity): grant again, count once
        elif all(w.lane_workflow_id != lane for w in state.waiting):
            state.waiting.append(request)
        self._admit()

    @workflow.signal(name=RELEASE_SIGNAL)
    def release(self, lane_workflow_id: str) -> None:
        self.state.holders = [h for h in self.state.holders if h != lane_workflow_id]
        self._admit()

    def _admit(self) -> None:
        state = self.state
        while state.waiting and len(state.holders) < state.max_parallel:
            lane = state.waiting.pop(0).lane_workflow_id
            state.holders.append(lane)
            state.to_grant.append(lane)

    @workflow.query(name="state")
    def view(self) -> PermitState:
        return self.state

    @workflow.run
    async def run(self, state: PermitState) -> None:
        while True:
            while self.state.to_grant:
                lane = self.state.to_grant.pop(0)
                try:
                    await workflow.get_external_workflow_handle(lane).signal(PERMIT_GRANTED_SIGNAL)
                except Exception:
                    # The lane is gone (it never leaves holding a permit, so it was never started):
                    # its permit goes to the next in line.
                    workflow.logger.warning("lane %s is gone; its permit is given back", lane)
                    self.release(lane)
            info = workflow.info()
            if info.is_continue_as_new_suggested() or info.get_current_history_length() > MAX_HISTORY_EVENTS:
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self.state)
            try:
                await workflow.wait_condition(lambda: bool(self.state.to_grant), timeout=IDLE_EXIT_SECONDS)
            except TimeoutError:
                if not self.state.holders and not self.state.waiting and not self.state.to_grant:
                    await workflow.wait_condition(workflow.all_handlers_finished)
                    if not self.state.holders and not self.state.waiting:
                        return
