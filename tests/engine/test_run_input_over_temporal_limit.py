"""A workflow action whose rendered input is over Temporal's payload size limit is `refused` (SPEC 5: "a limit
refused it (executions per session, payload size, ...)"), with its receipt, and nothing starts.

Temporal refuses a start whose input is over its blob size limit (`limit.blobSize.error`, 2 MB by default) with
`Blob data size exceeds limit.`: that is a limit's refusal, not the action failing, and the batch said
`invocation_error`. Only the dev server enforces the limit, so this runs there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.testing import WorkflowEnvironment

from orchestrator.platform import Platform
from tests.engine.harness import Engine, eventually, lane_outcomes, new_session, recorder_listener, running_engine

pytestmark = pytest.mark.devserver

MESSAGE = "y" * 250_000


@pytest.fixture
async def engine(platform: Platform, dev_env: WorkflowEnvironment) -> AsyncIterator[Engine]:
    async with running_engine(platform, dev_env.client) as running:
        yield running


# Copies of a 250 KB message: 3 MB of input, over Temporal's blob limit (2 MB); 5 MB, over its gRPC message limit
# too (4 MB), which the frontend refuses before it reads the blob.
@pytest.mark.parametrize("copies", [12, 20])
async def test_a_run_whose_input_is_over_temporals_payload_limit_is_refused(engine: Engine, copies: int) -> None:
    body = recorder_listener(
        filter={"types": ["thread.item_posted"], "aliases": ["missions/**"]},
        batch={"window_seconds": 0},
        action={
            "type": "workflow",
            "workflow": "recorder",
            "input": {f"copy{n}": "{{ item.message }}" for n in range(copies)},
        },
        receipt={"alias": "ops/receipts"},
    )
    await engine.command("save_listener", listener=body)
    sid = await new_session(engine)
    posted = await engine.command(
        "post_thread_item", session_id=sid, alias="missions/big", item={"type": "text", "message": MESSAGE}
    )

    async def outcome() -> bool:
        return bool(await lane_outcomes(engine, sid, "orchestrate"))

    await eventually(outcome, what="the batch's outcome")
    [done] = await lane_outcomes(engine, sid, "orchestrate")
    assert (done["status"], done["event_ids"]) == ("refused", [posted["event_id"]]), done
    assert "action.input" in done["message"], done["message"]
    assert not engine.log.runs, "nothing started"
    assert not (await engine.command("list_executions", session_id=sid))["executions"]

    async def receipt() -> bool:
        items = (await engine.command("list_thread_items", session_id=sid, alias="ops/receipts"))["items"]
        return bool(items)

    await eventually(receipt, what="the receipt")
    [item] = (await engine.command("list_thread_items", session_id=sid, alias="ops/receipts"))["items"]
    assert item["metadata"]["status"] == "refused"
