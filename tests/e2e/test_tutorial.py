"""docs/tutorial.md, run as written: every command on the page, in order, through the HTTP door.

A `json` block is a command; the `reply` block after it, when there is one, shows what comes back: an error
reply names the code the command must answer, every key the reply block shows must be in the real reply,
and every value it shows (a string, a number, true, false or null, but not `...`) must be there too, in the
order shown among the reply's values of that key. `SESSION_ID` and `EVENT_ID` stand for the session the page
opened and the event its last write made. Before each command the lanes are let come to rest, as a reader
who waits a moment would. The page is run twice on the same data, as a reader who comes back to it would.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

from orchestrator.platform import Platform
from orchestrator.testing import busy
from tests.e2e.conftest import Missions

TUTORIAL = Path(__file__).parents[2] / "docs" / "tutorial.md"
BLOCK = re.compile(r"```(json|reply)\n(.*?)```", re.S)
KEY = re.compile(r'"([a-z_]+)":')
SHOWN_VALUE = re.compile(r'"([a-z_]+)": ("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|true|false|null)')


def steps() -> list[tuple[str, str | None]]:
    """Each command with the reply block that follows it (or None)."""
    blocks = BLOCK.findall(TUTORIAL.read_text())
    found: list[tuple[str, str | None]] = []
    for kind, text in blocks:
        if kind == "json":
            found.append((text, None))
        else:
            assert found and found[-1][1] is None, f"a reply block with no command before it: {text}"
            found[-1] = (found[-1][0], text)
    return found


def keys_of(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in keys_of(v)}
    if isinstance(value, list):
        return {k for v in value for k in keys_of(v)}
    return set()


def values_of(value: Any) -> list[tuple[str, Any]]:
    """Every (key, scalar) pair of a reply, depth first, in its order."""
    found: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found += [(key, item)] if not isinstance(item, dict | list) else values_of(item)
    elif isinstance(value, list):
        for item in value:
            found += values_of(item)
    return found


def shown_values(reply_text: str) -> list[tuple[str, Any]]:
    """The (key, scalar) pairs a reply block shows, in its order; a `...` string stands for any value."""
    return [(key, json.loads(raw)) for key, raw in SHOWN_VALUE.findall(reply_text) if "..." not in raw]


def in_order(shown: list[Any], real: list[Any]) -> bool:
    """Whether `shown` is a subsequence of `real`."""
    remaining = iter(real)
    return all(any(item == candidate for candidate in remaining) for item in shown)


async def rest(platform: Platform, within: float = 60) -> None:
    deadline = time.monotonic() + within
    quiet = 0
    while quiet < 3:
        assert time.monotonic() < deadline, f"the lanes did not come to rest: {await busy(platform.store.pool)}"
        quiet = quiet + 1 if not await busy(platform.store.pool) else 0
        await asyncio.sleep(0.2)


async def test_every_command_in_the_tutorial_answers_as_the_page_says_twice(
    missions: Missions, platform: Platform
) -> None:
    found = steps()
    assert len(found) >= 15, "the page lost its commands"
    for _ in range(2):
        await run_the_page(missions, platform, found)


async def run_the_page(missions: Missions, platform: Platform, found: list[tuple[str, str | None]]) -> None:
    names: dict[str, str] = {}
    for text, reply_text in found:
        for placeholder, value in names.items():
            text = text.replace(placeholder, value)
        body = json.loads(text)
        await rest(platform)
        reply = await missions.client.command(body)
        if reply_text is not None and reply_text.lstrip().startswith('{"status": "error"'):
            shown = json.loads(reply_text)
            assert reply["status"] == "error" and reply["error"] == shown["error"], (body, reply)
            assert reply["message"] == shown["message"], (body, reply)
        else:
            assert reply["status"] == "success", (body, reply)
        if reply_text is not None:
            missing = set(KEY.findall(reply_text)) - keys_of(reply)
            assert not missing, f"{body['command']}: the page shows {sorted(missing)}, the reply is {reply}"
            real = values_of(reply)
            for key in dict.fromkeys(key for key, _ in shown_values(reply_text)):
                shown = [value for name, value in shown_values(reply_text) if name == key]
                values = [value for name, value in real if name == key]
                assert in_order(shown, values), f"{body['command']}: the page shows {key} {shown}, the reply {values}"
        if body["command"] == "open_session":
            names["SESSION_ID"] = reply["session"]["id"]
        if "event_id" in reply:
            names["EVENT_ID"] = str(reply["event_id"])
