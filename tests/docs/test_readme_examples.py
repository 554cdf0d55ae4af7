"""The README's Python client example, run as a file would run it (its own `asyncio.run`, against a door), and its
`curl` example, sent as curl sends it."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path

import httpx

from orchestrator.config import Settings
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform

ROOT = Path(__file__).resolve().parents[2]


def _client_example() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [block] = [b for b in re.findall(r"^```python\n(.*?)^```$", readme, re.S | re.M) if "Client.http(" in b]
    return block


async def test_the_python_client_example_runs_as_a_file(platform: Platform, settings: Settings, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    async with serve_api(create_app(platform, settings), "127.0.0.1", 0) as url:
        script.write_text(_client_example().replace("http://127.0.0.1:8700", url), encoding="utf-8")
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(script), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        _, err = await asyncio.wait_for(process.communicate(), 60)

    assert (process.returncode, err.decode()) == (0, "")
    [session] = (await platform.command({"command": "list_sessions"}))["sessions"]
    assert session["alias"] == "demo"
    objects = await platform.command({"command": "list_objects", "session_id": session["id"]})
    assert [o["alias"] for o in objects["objects"]] == ["tickets/1/meta"]


async def test_the_curl_example_answers_what_the_readme_shows(platform: Platform, settings: Settings) -> None:
    """`curl -d` sends the body as a form (`application/x-www-form-urlencoded`): the door reads it as JSON all the
    same, and answers the reply the README's comment shows (`...` standing for an id)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [(path, body, shown)] = re.findall(r"^curl -s localhost:8700(/v1/commands) -d '(.*)'\n# (.*)$", readme, re.M)
    async with serve_api(create_app(platform, settings), "127.0.0.1", 0) as url, httpx.AsyncClient() as http:
        response = await http.post(
            url + path, content=body, headers={"content-type": "application/x-www-form-urlencoded"}
        )

    reply, expected = response.json(), json.loads(shown)
    assert response.status_code == 200 and reply["status"] == expected["status"], reply
    for field, value in expected["session"].items():
        got = reply["session"][field]
        assert got.startswith(value.removesuffix("...")) if value.endswith("...") else got == value, (field, reply)
