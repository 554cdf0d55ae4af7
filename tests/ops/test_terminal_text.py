"""What `orchestrator events` and `status` print of what writers chose (an item's role, a client id, a lane's key)
is shown, never obeyed by the terminal: a line end stays inside its event's line and an escape sequence is
written escaped, so a writer cannot forge an event line or recolour the screen of whoever tails the stream."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from orchestrator.dev.inspect import format_status
from orchestrator.dev.log import shown
from orchestrator.platform import Platform
from tests.ops.conftest import child_env

ORCHESTRATOR = str(Path(sys.executable).parent / "orchestrator")
FORGED = "ok\n999999  2099-01-01T00:00:00Z  forged.event\x1b[31m"


async def test_events_prints_one_line_an_event_whatever_its_writer_chose(platform: Platform) -> None:
    sid = (await platform.command({"command": "open_session"}))["session"]["id"]
    item = {"type": "text", "role": FORGED, "message": "hi"}
    await platform.command(
        {"command": "post_thread_item", "session_id": sid, "alias": "chats/1", "item": item, "client": FORGED}
    )
    await platform.command({"command": "write_object", "session_id": sid, "alias": "a/1", "value": {"type": "t"}})

    done = await asyncio.to_thread(
        subprocess.run,
        [ORCHESTRATOR, "events", "--session", sid, "--local"],
        env=child_env(ORCHESTRATOR_DATABASE_URL=platform.database_url),
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2, lines
    assert "forged.event" in lines[0] and "\\n999999" in lines[0] and "\\x1b[31m" in lines[0]
    assert "\x1b" not in done.stdout
    assert "object.written" in lines[1]


def test_status_writes_a_lane_key_on_its_own_row() -> None:
    lane = {"lane": FORGED, "workflow_id": "lane:x", "live": True, "pending": 1, "in_flight": 0}
    listener = {
        "name": "keyed",
        "version": 1,
        "enabled": True,
        "lanes": [{**lane, "runs_in_flight": [], "waiting": "a window closes at 10:00:01"}],
        "pending": 1,
        "runs_in_flight": 0,
        "executions_running": 0,
        "retries_waiting": [],
        "recent_outcomes": [{"created_at": "t", "status": "success", "lane": FORGED, "first_id": 1, "last_id": 1}],
        "counts": {"success": 1},
    }

    text = format_status({"session_id": "ses_1", "listeners": [listener]})

    assert "\x1b" not in text
    assert not any(line.startswith("999999") for line in text.splitlines()), text
    assert sum("forged.event" in line for line in text.splitlines()) == 3, text


def test_what_steers_a_terminal_is_escaped_and_what_only_joins_characters_is_not() -> None:
    assert shown("a\nb\x1b[31m") == "a\\nb\\x1b[31m"
    assert shown("paid \u202egnp.exe") == "paid \\u202egnp.exe", "a bidirectional override would reverse the line"
    assert shown("a\u2028b") == "a\\u2028b"
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    assert shown(f"role {family}") == f"role {family}", "an emoji's zero-width joiners stay"
