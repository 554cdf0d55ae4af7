"""`orchestrator status` of a session with more runs than one page of `list_executions` holds: the runs still
running and the newest outcomes are counted, not the oldest page's."""

from __future__ import annotations

from orchestrator.client import Client
from orchestrator.dev.inspect import session_status
from orchestrator.platform import Platform
from tests.store.helpers import ok


async def test_the_running_runs_of_a_session_of_many_runs_are_counted(platform: Platform) -> None:
    sid = str((await ok(platform, "open_session"))["session"]["id"])
    listener = {
        "name": "busy",
        "filter": {"types": ["object.written"]},
        "action": {"type": "workflow", "workflow": "w"},
    }
    await ok(platform, "save_listener", listener=listener)
    # 1,200 runs that ended long ago, then two running now: the oldest page of 1,000 holds none of the two.
    await platform.store.pool.execute(
        "INSERT INTO orchestrator.executions (id, session_id, workflow, listener, lane, status, started_at, ended_at)"
        " SELECT 'exe:' || $1 || ':old:' || n, $1, 'w', 'busy', '_', 'completed',"
        " now() - interval '1 day' + n * interval '1 second', now() - interval '1 day' + n * interval '1 second'"
        " FROM generate_series(1, 1200) n",
        sid,
    )
    await platform.store.pool.execute(
        "INSERT INTO orchestrator.executions (id, session_id, workflow, listener, lane, status)"
        " SELECT 'exe:' || $1 || ':now:' || n, $1, 'w', 'busy', '_', 'running' FROM generate_series(1, 2) n",
        sid,
    )
    async with Client.local(platform) as client:
        status = await session_status(client, sid)
    [busy] = [listener for listener in status["listeners"] if listener["name"] == "busy"]
    assert busy["executions_running"] == 2
