"""An app that keeps its own tables starts from nothing with one `orchestrator dev --app`: its `migrate` makes its
table before its declarations are planned, so the capture applies, and a row written in the application's own
transaction reaches a run. A `migrate` that fails stops the start naming it, with nothing of the app applied."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import textwrap
import time
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from orchestrator.dev.embedded import free_port
from orchestrator.platform import Platform
from tests.test_dev_process import CLI, START_SECONDS, call, wait_for_line

# `orchestrator dev` takes Temporal's default ports when free: one at a time, beside the other dev tests.
pytestmark = pytest.mark.xdist_group("orchestrator-dev")

ROOT = Path(__file__).resolve().parents[1]


def _env(**extra: str) -> dict[str, str]:
    """The environment of a newcomer's shell: no ORCHESTRATOR_ setting but those given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    return {**env, **extra}


async def test_the_desk_starts_from_nothing_with_one_dev_and_a_row_of_its_table_reaches_a_run(tmp_path: Path) -> None:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        CLI, "dev", "--app", "examples.desk.app", "--data-dir", str(tmp_path / "data"), "--http-port", str(port),
        cwd=ROOT, env=_env(ORCHESTRATOR_LIMITS__ACTIVATION_DELAY_SECONDS="1"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert process.stdout is not None
    seen: list[str] = []
    try:
        await asyncio.wait_for(wait_for_line(process.stdout, "Ready.", seen), START_SECONDS)
        assert any(line.startswith("migrate      examples.desk.app: done in") for line in seen), "".join(seen)
        assert "plan         add     capture public.tickets\n" in seen, "".join(seen)
        url = next(line.split()[1] for line in seen if line.startswith("database "))

        session_id = (await call(port, '{"command": "open_session", "alias": "desk"}'))["session"]
        assert isinstance(session_id, dict)
        sid = str(session_id["id"])
        conn = await asyncpg.connect(url)
        try:
            async with conn.transaction():  # the application's own write, in its own transaction
                await conn.execute("INSERT INTO tickets (id, session_id, title) VALUES (7, $1, 'printer jammed')", sid)
        finally:
            await conn.close()

        runs: list[Any] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (runs and runs[0]["status"] == "completed"):
            await asyncio.sleep(0.3)
            body = {"command": "list_executions", "session_id": sid, "listener": "desk"}
            runs = list((await call(port, json.dumps(body)))["executions"])  # type: ignore[call-overload]
        assert [r["status"] for r in runs] == ["completed"], "".join(seen)
        read = {"command": "read_object", "session_id": sid, "alias": "desk/tickets/7"}
        ticket = (await call(port, json.dumps(read)))["object"]
        assert isinstance(ticket, dict) and ticket["value"]["title"] == "printer jammed"
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        rest, _ = await asyncio.wait_for(process.communicate(), START_SECONDS)
    output = "".join(seen) + rest.decode()
    assert process.returncode == 0, output


BROKEN_APP = """
workflows = []
event_types = [{"name": "ticket.escalated", "schema": {"type": "object"}}]
captures = [{"table": "tickets", "type_prefix": "ticket", "session_column": "session_id"}]
listeners = [{"name": "desk", "filter": {"types": ["ticket.*"]},
              "action": {"type": "object", "alias": "desk/last", "value": {"type": "json"}}}]


def migrate(database_url):
    import asyncio

    import asyncpg

    async def half_done():
        conn = await asyncpg.connect(database_url)
        await conn.execute("CREATE TABLE tickets (id bigint PRIMARY KEY, session_id text NOT NULL)")
        await conn.close()

    asyncio.run(half_done())  # a sync migrate runs in a thread of its own, where it may run an event loop
    raise RuntimeError("the tickets migration is broken")
"""


async def test_a_failing_migrate_stops_dev_naming_it_before_anything_of_the_app_is_applied(
    tmp_path: Path, fresh_db: str, platform: Platform
) -> None:
    (tmp_path / "broken_desk.py").write_text(textwrap.dedent(BROKEN_APP))
    process = await asyncio.create_subprocess_exec(
        CLI, "dev", "--app", "broken_desk.py", "--data-dir", str(tmp_path / "data"), "--http-port", str(free_port()),
        cwd=tmp_path, env=_env(ORCHESTRATOR_DATABASE_URL=fresh_db),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), START_SECONDS)
    output = out.decode() + err.decode()

    assert process.returncode == 2, output
    assert "orchestrator dev: app broken_desk: migrate: RuntimeError: the tickets migration is broken" in err.decode()
    assert "Ready." not in output
    assert "plan " not in output, "nothing of the app is planned over a failed migrate"
    for listing, key in (("list_listeners", "listeners"), ("list_captures", "captures")):
        assert (await platform.command({"command": listing}))[key] == [], listing
    types = (await platform.command({"command": "list_event_types"}))["event_types"]
    assert "ticket.escalated" not in [t["name"] for t in types]
    conn = await asyncpg.connect(fresh_db)
    try:
        # What the migrate made before it failed is the app's own: there, and no trigger of the platform's on it.
        assert await conn.fetchval("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'public.tickets'::regclass") == 0
    finally:
        await conn.close()
