"""Every `temporal` command in docs/operations.md runs against the dev server and shows what the page says.

The page's placeholders (`<session>`, `<lane>`, ...) are replaced by ids from this folder's workload; each
command must exit 0 and its output must hold what the page promises (table `EXPECTED`). A command added to
the page without an entry here fails the test, so the page cannot drift from what was checked.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.ops.conftest import Workload

pytestmark = pytest.mark.devserver

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
TEMPORAL = str(Path(sys.executable).parent / "temporal")
# Visibility (list, count) is eventually consistent: a command whose output lacks what is expected is
# run again until this many seconds have passed.
SETTLE_SECONDS = 10.0

Check = Callable[[str, "Ids"], bool]


class Ids:
    def __init__(self, workload: Workload, listeners: list[dict[str, object]], executions: list[dict[str, object]]):
        self.session = workload.session_id
        self.task_queue = workload.task_queue
        lanes = {item["name"]: item["lanes"] for item in listeners}
        # `orchestrate`'s lane has finished batches, so its `outcomes` query has something to show.
        [self.lane] = [lane["workflow_id"] for lane in lanes["orchestrate"]]  # type: ignore[attr-defined]
        [self.flaky_lane] = [lane["workflow_id"] for lane in lanes["flaky"]]  # type: ignore[attr-defined]
        self.completed = [str(e["id"]) for e in executions if e["listener"] == "orchestrate"]
        [self.failed] = [str(e["id"]) for e in executions if e["listener"] == "flaky" and e["status"] == "failed"]

    def substitute(self, command: str) -> str:
        for placeholder, value in {
            "<session>": self.session,
            "<lane>": self.lane,
            "<task-queue>": self.task_queue,
            "<failed-execution>": self.failed,
        }.items():
            command = command.replace(placeholder, value)
        assert "<" not in command, f"a placeholder this test does not know: {command}"
        return command


def _all(*parts: str) -> Check:
    return lambda out, ids: all(part in out for part in parts)


EXPECTED: list[tuple[str, Check]] = [
    (
        r"workflow list --query \"OrchestratorListener='orchestrate'\"$",
        lambda out, ids: all(e in out for e in ids.completed),
    ),
    (
        r"OrchestratorSession='<session>' AND OrchestratorListener='orchestrate'",
        lambda out, ids: all(e in out for e in ids.completed) and ids.failed not in out,
    ),
    (
        r"workflow count --query \"OrchestratorListener='orchestrate'\"",
        lambda out, ids: int(re.search(r"Total: (\d+)", out).group(1)) >= len(ids.completed),  # type: ignore[union-attr]
    ),
    (
        r"OrchestratorListener='flaky' AND ExecutionStatus='Failed'",
        lambda out, ids: ids.failed in out and not any(e in out for e in ids.completed),
    ),
    (
        r"OrchestratorSession='<session>' AND ExecutionStatus='Running'",
        lambda out, ids: ids.failed not in out and not any(e in out for e in ids.completed),
    ),
    (r"operator search-attribute list", _all("OrchestratorSession", "OrchestratorListener")),
    (
        r"WorkflowType='OrchestratorLane' AND WorkflowId STARTS_WITH 'lane:<session>:'",
        lambda out, ids: ids.lane in out and ids.flaky_lane in out and "OrchestratorLane" in out,
    ),
    (r"query --workflow-id '<lane>' --type state", _all("due_at", "waiting_slot", "steps", "trouble")),
    (
        r"query --workflow-id '<lane>' --type outcomes",
        lambda out, ids: "success" in out and any(e in out for e in ids.completed),
    ),
    (r"workflow show --workflow-id '<lane>'", _all("WorkflowExecutionSignaled", "MarkerRecorded")),
    (r"task-queue describe --task-queue '<task-queue>'", lambda out, ids: "workflow" in out.lower()),
    (r"describe --workflow-id '<failed-execution>'", _all("FAILED", "asked to fail")),
    (r"show --workflow-id '<failed-execution>'", _all("WorkflowExecutionFailed", "asked to fail")),
]


def doc_commands() -> list[str]:
    """The `temporal` commands of the page's ```bash blocks, continuation lines joined."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.split(" # ")[0].strip()
            if line.startswith("temporal "):
                commands.append(line)
    return commands


def expectation(command: str) -> Check:
    found = [check for pattern, check in EXPECTED if re.search(pattern, command)]
    assert len(found) == 1, f"give this command of docs/operations.md exactly one expectation: {command}"
    return found[0]


def test_every_command_on_the_page_has_an_expectation() -> None:
    commands = doc_commands()

    assert len(commands) >= 10
    for command in commands:
        expectation(command)
    for pattern, _ in EXPECTED:
        assert any(re.search(pattern, c) for c in commands), f"no command on the page matches {pattern}"


async def _run(args: list[str]) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        TEMPORAL, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode is not None
    return process.returncode, out.decode()


async def test_every_temporal_command_on_the_page_answers(workload: Workload) -> None:
    listeners = (await workload.engine.command("list_session_listeners", session_id=workload.session_id))["listeners"]
    ids = Ids(workload, listeners, await workload.executions("orchestrate") + await workload.executions("flaky"))

    async def check(command: str) -> str | None:
        args = [*shlex.split(ids.substitute(command))[1:], "--address", workload.temporal_address]
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            code, out = await _run(args)
            if code == 0 and expectation(command)(out, ids):
                return None
            if time.monotonic() > deadline:
                return f"$ {shlex.join(args)}\nexit {code}\n{out}"
            await asyncio.sleep(0.5)

    failures = [f for f in await asyncio.gather(*(check(c) for c in doc_commands())) if f is not None]

    assert not failures, "\n\n".join(failures)
