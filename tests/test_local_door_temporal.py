"""`orchestrator call --local` against a running `orchestrator dev` found in its data folder: the commands that
need Temporal (schedules, `start_execution`, `stop_execution`) reach the dev's embedded Temporal too, by the port it
remembers there; with no Temporal to be found they answer `unavailable`, naming how to give one, not a 500."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from orchestrator.dev.embedded import TemporalDevServer, start_postgres
from orchestrator.dev.ports import remember

CLI = str(Path(sys.executable).parent / "orchestrator")


def call(cwd: Path, body: dict[str, Any]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    done = subprocess.run(
        [CLI, "call", json.dumps(body), "--local"], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )
    reply: dict[str, Any] = json.loads(done.stdout)
    return reply


async def test_call_local_reaches_the_running_devs_temporal_and_says_plainly_when_there_is_none(
    tmp_path: Path,
) -> None:
    data = tmp_path / ".orchestrator"
    postgres = await start_postgres(data)
    try:
        opened = await asyncio.to_thread(call, tmp_path, {"command": "open_session", "alias": "ops"})
        sid = opened["session"]["id"]
        schedule = {
            "command": "create_schedule",
            "session_id": sid,
            "alias": "clock",
            "repeat": {"type": "interval", "every_seconds": 3600},
            "invocation_target_type": "object",
            "target": {"alias": "ops/clock", "value": {"type": "tick"}},
        }
        alone = await asyncio.to_thread(call, tmp_path, schedule)
        assert alone["error"] == "unavailable", alone
        assert "ORCHESTRATOR_TEMPORAL_ADDRESS" in alone["message"], alone
        # A port remembered where something else answers: a guess that fails leaves the other commands running.
        with socket.socket() as other:
            other.bind(("127.0.0.1", 0))
            other.listen()
            remember(data, temporal=other.getsockname()[1], temporal_ui=other.getsockname()[1] + 1)
            listed = await asyncio.to_thread(call, tmp_path, {"command": "list_listeners"})
            assert listed == {"status": "success", "listeners": []}, listed

        server = await TemporalDevServer(data / "temporal", ui=False).start()
        try:
            assert server.port is not None
            remember(data, temporal=server.port, temporal_ui=server.port + 1)
            made = await asyncio.to_thread(call, tmp_path, schedule)
            assert made["status"] == "success", made
        finally:
            await server.stop()
    finally:
        await postgres.stop()
