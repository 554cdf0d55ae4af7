"""The worker's sandbox answers the SDK's "which serialization context?" outside the sandbox, and only for a data
converter that no context changes (`orchestrator.engine.worker.ignores_context`)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter
from temporalio.converter import ActivitySerializationContext, PayloadCodec, SerializationContext
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, _runner

from orchestrator.engine.worker import ignores_context, sandbox_runner

pytestmark = pytest.mark.both_servers


class Echo(BaseModel):
    text: str
    n: int


@activity.defn(name="test.sandbox_echo")
async def echo(value: Echo) -> Echo:
    return Echo(text=value.text.upper(), n=value.n + 1)


@workflow.defn(name="test_sandbox_echo")
class EchoTwice:
    @workflow.run
    async def run(self, value: Echo) -> Echo:
        once = await workflow.execute_activity(echo, value, start_to_close_timeout=timedelta(seconds=10))
        return await workflow.execute_activity(echo, once, start_to_close_timeout=timedelta(seconds=10))


class Passing(PayloadCodec):
    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)


class PerActivity(PydanticPayloadConverter):
    """A payload converter whose output may depend on an activity's context alone: it must be asked."""

    def with_context(self, context: SerializationContext) -> PerActivity:
        return PerActivity() if isinstance(context, ActivitySerializationContext) else self


def test_only_a_converter_no_context_changes_skips_the_question() -> None:
    assert ignores_context(pydantic_data_converter)
    assert type(sandbox_runner()) is not SandboxedWorkflowRunner
    with_codec = dataclasses.replace(pydantic_data_converter, payload_codec=Passing())
    assert not ignores_context(with_codec), "any codec: the SDK's own sandbox, asked as it asks"
    per_activity = dataclasses.replace(pydantic_data_converter, payload_converter_class=PerActivity)
    assert not ignores_context(per_activity), "changed under an activity's context only"
    assert type(sandbox_runner(per_activity)) is SandboxedWorkflowRunner, "it keeps the SDK's own sandbox"


async def test_a_sandboxed_run_is_never_entered_to_be_asked_and_its_values_cross_as_before(
    temporal_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[Any] = []
    inside = _runner._Instance.get_serialization_context

    def counted(self: Any, command_info: Any) -> Any:
        asked.append(command_info)
        return inside(self, command_info)

    monkeypatch.setattr(_runner._Instance, "get_serialization_context", counted)
    client = temporal_env.client
    assert ignores_context(client.data_converter)

    async def run_once(runner: SandboxedWorkflowRunner) -> Echo:
        queue = f"sandbox-{uuid.uuid4().hex[:8]}"
        async with Worker(client, task_queue=queue, workflows=[EchoTwice], activities=[echo], workflow_runner=runner):
            result: Echo = await client.execute_workflow(
                EchoTwice.run, Echo(text="hi", n=1), id=f"wf-{queue}", task_queue=queue
            )
            return result

    assert await run_once(sandbox_runner(client.data_converter)) == Echo(text="HI", n=3)
    assert asked == [], "answered outside the sandbox"
    plain = SandboxedWorkflowRunner(restrictions=sandbox_runner().restrictions)
    assert await run_once(plain) == Echo(text="HI", n=3)
    assert asked, "the SDK's own sandbox is asked: the count above can see it"
