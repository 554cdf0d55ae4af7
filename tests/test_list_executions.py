"""`list_executions` pages a long session: the oldest or the newest first, at most `limit`, `more` when others
match (a session's newest runs were out of reach past its first 1,000)."""

from __future__ import annotations

from typing import Any

from orchestrator.platform import Platform


async def record_runs(platform: Platform, sid: str, count: int) -> list[str]:
    ids = [f"exe:{sid}:by-hand-{n}.0" for n in range(count)]
    for execution_id in ids:
        record: dict[str, Any] = {
            "execution_id": execution_id,
            "session_id": sid,
            "workflow": "w",
            "listener": None,
            "lane": None,
            "batch": None,
            "run_key": None,
            "depth": 0,
            "start_input": {"input": None},
        }
        assert await platform.store.execution_started(record)
    return ids


async def test_the_newest_runs_first_a_limit_and_whether_there_are_more(platform: Platform) -> None:
    sid = (await platform.command({"command": "open_session"}))["session"]["id"]
    ids = await record_runs(platform, sid, 5)

    async def listed(**options: Any) -> dict[str, Any]:
        reply = await platform.command({"command": "list_executions", "session_id": sid, **options})
        assert reply["status"] == "success", reply
        return reply

    every = await listed()
    assert [e["id"] for e in every["executions"]] == ids and every["more"] is False, "the oldest first, by default"
    newest = await listed(newest_first=True, limit=2)
    assert [e["id"] for e in newest["executions"]] == [ids[4], ids[3]] and newest["more"] is True
    oldest = await listed(limit=5)
    assert [e["id"] for e in oldest["executions"]] == ids and oldest["more"] is False, "exactly the limit: no more"
    for bad in (0, 1001, "2"):
        refused = await platform.command({"command": "list_executions", "session_id": sid, "limit": bad})
        assert refused["error"] == "invalid_request" and "limit" in refused["message"], refused
