"""Recorded histories replay on today's code: a change that would break running lanes or runs fails here.

The histories (`histories/*.json`) were recorded from dev-server runs of the example app by
`python -m tests.replay.record`; see that module for the workload and docs/things-that-bite.md for when
to record again. Those named `previous-*` were written by the earlier release's workers in the production mix's
upgrade (`python -m bench.production_mix --upgrade-from COMMIT --record-fixtures`): lanes and runs of its app.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from bench import mix_app
from examples.missions import app as missions
from orchestrator.engine.wiring import PLATFORM_WORKFLOWS
from orchestrator.engine.worker import sandbox_runner
from orchestrator.workflows.run_end import RunEndInterceptor

HISTORIES = Path(__file__).resolve().parent / "histories"


def recorded() -> list[WorkflowHistory]:
    histories = []
    for path in sorted(HISTORIES.glob("*.json")):
        workflow_id = path.stem
        histories.append(WorkflowHistory.from_json(workflow_id, path.read_text()))
    return histories


def test_the_recorded_histories_cover_lanes_continuing_as_new_and_failing_runs() -> None:
    names = [p.name for p in HISTORIES.glob("*.json")]
    assert sum(n.startswith("OrchestratorLane") for n in names) >= 5
    texts = [p.read_text() for p in HISTORIES.glob("*.json")]
    assert any("WorkflowExecutionContinuedAsNew" in t or "CONTINUED_AS_NEW" in t for t in texts)
    assert any("WorkflowExecutionFailed" in t or "WORKFLOW_EXECUTION_FAILED" in t for t in texts)


def test_the_recorded_histories_include_lanes_and_runs_the_previous_release_ran() -> None:
    names = [p.name for p in HISTORIES.glob("previous-*.json")]
    assert any(n.startswith("previous-OrchestratorLane") for n in names), names
    assert any(n.startswith("previous-mix_run") for n in names), names


async def test_every_recorded_history_replays_on_todays_code() -> None:
    replayer = Replayer(
        workflows=[*PLATFORM_WORKFLOWS, *missions.workflows, *mix_app.workflows],
        interceptors=[RunEndInterceptor()],
        data_converter=pydantic_data_converter,
        workflow_runner=sandbox_runner(),
    )

    async def histories() -> AsyncIterator[WorkflowHistory]:
        for history in recorded():
            yield history

    results = await replayer.replay_workflows(histories(), raise_on_replay_failure=False)
    failures = {run_id: str(failure) for run_id, failure in results.replay_failures.items()}
    assert not failures, failures
