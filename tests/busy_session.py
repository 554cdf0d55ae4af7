"""A busy session for the dashboard's timeline: a few hundred runs that end every way a run can.

Four listeners on a worker with three workflows of their own: `jobs` runs `flaky` once per job write, which
fails a quarter of the batches the first time (they are repeated after a backoff and pass) and every eleventh
for good; `digest` takes the same writes serially, in batches of many; `render` holds a run per document until it is
cancelled (a deletion, its `cancel_on`) or stopped (`stop_execution`); `chat` starts a run per chat that waits
for a reply, and ends once one comes. Kept apart from the browser tests, which the workflow sandbox need not
import.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from tests.engine.harness import Engine, eventually

with workflow.unsafe.imports_passed_through():
    from orchestrator.sdk import RunInput, RunSession


@workflow.defn(name="flaky")
class Flaky:
    """Works for a moment (longer for a later batch), then fails if its batch is one that fails."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        first = run.batch.first_id
        await workflow.sleep(0.05 + (first % 5) * 0.05)
        if first % 11 == 0 or (first % 4 == 0 and run.batch.retry == 0):
            raise ApplicationError(f"job {first} failed", non_retryable=True)


@workflow.defn(name="hold")
class Hold:
    """Holds until it is cancelled or stopped."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        await workflow.sleep(timedelta(hours=1))


@workflow.defn(name="listen")
class Listen:
    """Waits for a reply on its chat, then ends."""

    @workflow.run
    async def run(self, run: RunInput) -> None:
        agent = [{"path": "item.role", "op": "eq", "value": "agent"}]
        replies = {"types": ["thread.item_posted"], "aliases": [run.batch.lane], "where": agent}
        await RunSession(run).wait_for_event([replies], timeout_seconds=600)


WORKFLOWS = [Flaky, Hold, Listen]

JOBS = {"types": ["object.written"], "aliases": ["jobs/*"]}
LISTENERS: list[dict[str, Any]] = [
    {
        "name": "jobs",
        "filter": JOBS,
        "concurrency": {"mode": "keyed", "key": "alias", "max_parallel": 8},
        "batch": {"max_events": 1},
        "action": {"type": "workflow", "workflow": "flaky"},
        "retry": {"attempts": 2, "delay_seconds": 1},
    },
    {
        "name": "digest",
        "filter": JOBS,
        "batch": {"window_seconds": 0.5, "max_events": 40},
        "action": {"type": "workflow", "workflow": "recorder"},
    },
    {
        "name": "render",
        "filter": {"types": ["object.written"], "aliases": ["docs/*"]},
        "concurrency": {"mode": "keyed", "key": "alias", "max_parallel": 16},
        "batch": {"max_events": 1},
        "action": {"type": "workflow", "workflow": "hold"},
        "cancel_on": [{"types": ["object.deleted"], "aliases": ["docs/*"], "key": "alias", "grace_seconds": 1}],
    },
    {
        "name": "chat",
        "filter": {
            "types": ["thread.item_posted"],
            "aliases": ["chats/*"],
            "where": [{"path": "item.role", "op": "eq", "value": "user"}],
        },
        "concurrency": {"mode": "keyed", "key": "alias", "max_parallel": 16},
        "batch": {"max_events": 1},
        "action": {"type": "workflow", "workflow": "listen"},
    },
]


async def executions(engine: Engine, sid: str) -> list[dict[str, Any]]:
    return list((await engine.command("list_executions", session_id=sid))["executions"])


async def make_busy(engine: Engine, sid: str, jobs: int = 150, keys: int = 30, docs: int = 16, chats: int = 16) -> None:
    """Writes the session's work and returns once every run has ended as it will: the jobs and digests done
    (a few repeated, some failed), a quarter of the renders stopped and half cancelled, half the chats answered;
    the rest running, the unanswered chats waiting."""
    for listener in LISTENERS:
        await engine.command("save_listener", listener=listener)
    for n in range(docs):
        await engine.command("write_object", session_id=sid, alias=f"docs/{n}", value={"type": "doc"})
    for n in range(chats):
        item = {"type": "text", "role": "user", "message": f"hello {n}"}
        await engine.command("post_thread_item", session_id=sid, alias=f"chats/{n}", item=item)
    written = set()
    for n in range(jobs):
        reply = await engine.command("write_object", session_id=sid, alias=f"jobs/{n % keys}", value={"type": "job"})
        written.add(reply["event_id"])

    async def started(listener: str, count: int, waiting: bool = False) -> bool:
        runs = [e for e in await executions(engine, sid) if e["listener"] == listener and e["status"] == "running"]
        return len(runs) == count and (not waiting or all("waiting" in e for e in runs))

    await eventually(lambda: started("render", docs), within=120, what="every render running")
    await eventually(lambda: started("chat", chats, waiting=True), within=120, what="every chat waiting")
    renders = sorted((e for e in await executions(engine, sid) if e["listener"] == "render"), key=lambda e: e["lane"])
    for n, run in enumerate(renders):
        if n % 4 == 0:
            await engine.command("stop_execution", session_id=sid, execution_id=run["id"], mode="terminate")
        elif n % 2 == 1:
            await engine.command("delete_object", session_id=sid, alias=run["lane"])
    for n in range(0, chats, 2):
        item = {"type": "text", "role": "agent", "message": f"answer {n}"}
        await engine.command("post_thread_item", session_id=sid, alias=f"chats/{n}", item=item)

    async def settled() -> bool:
        runs = await executions(engine, sid)
        holding = {"render": docs - docs // 4 - docs // 2, "chat": chats // 2}
        still = {name: sum(1 for e in runs if e["listener"] == name and e["status"] == "running") for name in holding}
        if still != holding or any(e["listener"] in ("jobs", "digest") and e["status"] == "running" for e in runs):
            return False
        # Every job written ran once (a repeat aside) and was in a digest, and no repeat is still due.
        firsts = {e["batch"]["first_id"] for e in runs if e["listener"] == "jobs" and e["batch"]["retry"] == 0}
        digested = {i for e in runs if e["listener"] == "digest" for i in e["batch"]["event_ids"]}
        due = {e["batch"]["first_id"] for e in runs if e["listener"] == "jobs" and e["status"] == "failed"}
        repeated = {e["batch"]["first_id"] for e in runs if e["listener"] == "jobs" and e["batch"]["retry"] > 0}
        return firsts == written and digested == written and all(_done(runs, first) for first in due | repeated)

    await eventually(settled, within=180, what="every run ended as it will")


def _done(runs: list[dict[str, Any]], first: int) -> bool:
    """A job's batch has no repeat to come: its last attempt passed, or failed on its last retry."""
    last = max(
        (e for e in runs if e["listener"] == "jobs" and e["batch"]["first_id"] == first),
        key=lambda e: e["batch"]["retry"],
    )
    return last["status"] == "completed" or last["batch"]["retry"] == LISTENERS[0]["retry"]["attempts"]
