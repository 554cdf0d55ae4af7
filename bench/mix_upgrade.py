"""The production mix's upgrade: an earlier release's checkout to start from, and its histories replayed here.

`previous_checkout` makes a `git worktree` of the earlier commit in the bench's temporary folder and lays the
mix's app module into it (an upgrade changes the platform, not the application). `replay` replays, with this
checkout's code through Temporal's `Replayer` (as `tests/replay` does), the lanes that were open at some moment
of the upgrade and the runs started around it: histories written partly by one release's workers and partly by
the other's. `keep_fixtures` writes histories wholly of the earlier release into `tests/replay/histories`
(`previous-*.json`), so the replay test holds every later change to them.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from bench import mix_app
from orchestrator.engine.wiring import PLATFORM_WORKFLOWS
from orchestrator.engine.worker import sandbox_runner
from orchestrator.workflows.run_end import RunEndInterceptor

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "replay" / "histories"
LANE = "OrchestratorLane"
RUN = "mix_run"


def previous_checkout(commit: str, folder: Path) -> Path:
    path = folder / "previous"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), commit], check=True, capture_output=True
    )
    shutil.copy(REPO / "bench" / "mix_app.py", path / "bench" / "mix_app.py")
    return path


def remove_checkout(path: Path) -> None:
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)], check=False, capture_output=True
    )


def commit_of(ref: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", ref], check=True, capture_output=True, text=True
    ).stdout.strip()


def _stamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _open_during(execution: WorkflowExecution, start: float, end: float) -> bool:
    began = execution.start_time.timestamp()
    closed = execution.close_time.timestamp() if execution.close_time else float("inf")
    return began <= end and closed >= start


async def _executions(temporal: Client, kind: str, query: str, limit: int) -> list[WorkflowExecution]:
    found = []
    async for execution in temporal.list_workflows(f"WorkflowType = '{kind}' AND {query}"):
        found.append(execution)
        if len(found) >= limit:
            break
    return found


@dataclass
class Replayed:
    lanes: int = 0
    runs: int = 0
    failures: dict[str, str] = field(default_factory=dict)


async def replay(temporal: Client, upgrade_start: float, upgrade_end: float, limit: int) -> Replayed:
    """Replay the lanes open during the upgrade and the runs started within a minute of it on this code."""
    lanes = [
        e
        for e in await _executions(temporal, LANE, f"StartTime <= '{_stamp(upgrade_end)}'", 50 * limit)
        if _open_during(e, upgrade_start, upgrade_end)
    ][:limit]
    window = f"StartTime >= '{_stamp(upgrade_start - 60)}' AND StartTime <= '{_stamp(upgrade_end + 60)}'"
    runs = await _executions(temporal, RUN, window, limit)
    histories: list[WorkflowHistory] = []
    for execution in [*lanes, *runs]:
        handle = temporal.get_workflow_handle(execution.id, run_id=execution.run_id)
        histories.append(await handle.fetch_history())
    replayer = Replayer(
        workflows=[*PLATFORM_WORKFLOWS, *mix_app.workflows],
        interceptors=[RunEndInterceptor()],
        data_converter=pydantic_data_converter,
        workflow_runner=sandbox_runner(),
    )

    async def each() -> object:
        for history in histories:
            yield history

    results = await replayer.replay_workflows(each(), raise_on_replay_failure=False)  # type: ignore[arg-type]
    return Replayed(len(lanes), len(runs), {run_id: str(f) for run_id, f in results.replay_failures.items()})


async def keep_fixtures(temporal: Client, before: float, lanes: int = 8, runs: int = 4) -> list[Path]:
    """Write histories of lanes and runs that ended before the upgrade began (the earlier release's alone) into
    `tests/replay/histories/previous-*.json`, replacing those of an earlier recording; lanes that continued as
    new first, as those carry a lane's whole hand-over, then lanes begun before the upgrade and ended after."""
    for old in FIXTURES.glob("previous-*.json"):
        old.unlink()
    ended = f"CloseTime <= '{_stamp(before)}'"
    chosen = sorted(
        await _executions(temporal, LANE, ended, 50 * lanes),
        key=lambda e: e.status != WorkflowExecutionStatus.CONTINUED_AS_NEW,
    )[:lanes]
    if len(chosen) < lanes:
        # Too few lanes ended before it: lanes the earlier release began and this one ended fill the rest.
        began = await _executions(temporal, LANE, f"StartTime <= '{_stamp(before)}'", 50 * lanes)
        chosen += [e for e in began if e.close_time is not None and e not in chosen][: lanes - len(chosen)]
    chosen += await _executions(temporal, RUN, ended, runs)
    written = []
    numbered: dict[str, int] = {}
    for execution in chosen:
        history = await temporal.get_workflow_handle(execution.id, run_id=execution.run_id).fetch_history()
        n = numbered[execution.workflow_type] = numbered.get(execution.workflow_type, 0) + 1
        path = FIXTURES / f"previous-{execution.workflow_type}-{n:02d}.json"
        path.write_text(history.to_json())
        written.append(path)
    return written
