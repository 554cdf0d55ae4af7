"""`orchestrator call`'s HTTP door without the settings model: the same URL and token as `Settings`, the same
reply for an answer that is not the API's, and a call that loads no heavy module."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from orchestrator.client import api_url
from orchestrator.config import Settings, reveal
from orchestrator.dev.inspect import settings_api_url
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.plain_http import BadSetting, Unreachable, door_from_env, post_command
from orchestrator.platform import Platform

CLI = str(Path(sys.executable).parent / "orchestrator")


@pytest.mark.parametrize("running", [None, "http://127.0.0.1:8811"])
@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"ORCHESTRATOR_HTTP_PORT": "9123"},
        {"ORCHESTRATOR_HTTP_HOST": "0.0.0.0", "ORCHESTRATOR_API_TOKEN": "t0k"},
        {"orchestrator_http_host": "::1", "Orchestrator_Http_Port": " 81 "},
        {"ORCHESTRATOR_API_TOKEN": ""},
    ],
)
def test_the_door_is_where_the_settings_say(
    environ: dict[str, str], running: str | None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The settings' host and port; with neither set, the API of the `orchestrator dev` running on the data folder
    (`ports.json`'s `api`, wherever `--http-port` put it); the fast `call` and the other commands alike."""
    for key in [k for k in os.environ if k.lower().startswith("orchestrator_")]:
        monkeypatch.delenv(key)
    environ = {**environ, "ORCHESTRATOR_DATA_DIR": str(tmp_path)}
    if running is not None:
        (tmp_path / "ports.json").write_text(json.dumps({"temporal": 7233, "api": running}))
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    settings = Settings()

    url, token = door_from_env(environ)

    named = {"http_host", "http_port"} & settings.model_fields_set
    assert url == (running if running and not named else api_url(settings.http_host, settings.http_port))
    assert url == settings_api_url(settings), "the fast call and the commands agree"
    assert token == (reveal(settings.api_token) or None)


def test_a_port_that_is_not_a_number_is_named() -> None:
    with pytest.raises(BadSetting, match="ORCHESTRATOR_HTTP_PORT"):
        door_from_env({"ORCHESTRATOR_HTTP_PORT": "eighty"})


async def test_an_answer_that_is_not_the_apis_is_an_internal_error_reply() -> None:
    async def html(request: Request) -> Response:
        return PlainTextResponse("<html>proxy says no</html>", status_code=502)

    async with serve_api(Starlette(routes=[Route("/v1/commands", html, methods=["POST"])]), "127.0.0.1", 0) as url:
        reply = await asyncio.to_thread(post_command, url, None, {"command": "list_listeners"})

    assert reply == {
        "status": "error",
        "error": "internal_error",
        "message": f"HTTP 502 from {url}/v1/commands without a command reply",
    }


def test_nothing_listening_is_unreachable() -> None:
    with pytest.raises(Unreachable):
        post_command("http://127.0.0.1:9", None, {"command": "list_listeners"}, timeout=5)


def test_a_call_loads_no_http_client_no_pydantic_and_no_event_loop() -> None:
    probe = (
        "import sys\n"
        "from orchestrator.cli import main\n"
        "code = main(['call', '--url', 'http://127.0.0.1:9', '{\"command\": \"list_listeners\"}'])\n"
        "heavy = ('httpx', 'pydantic', 'pydantic_settings', 'asyncio', 'temporalio')\n"
        "heavy = sorted(m for m in heavy if m in sys.modules)\n"
        "print(code, ','.join(heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "3", done.stdout


async def test_the_call_takes_its_url_and_token_from_the_environment(platform: Platform, settings: Settings) -> None:
    guarded = settings.model_copy(update={"api_token": SecretStr("env-token")})
    async with serve_api(create_app(platform, guarded), "127.0.0.1", 0) as url:
        env = {k: v for k, v in os.environ.items() if not k.lower().startswith("orchestrator_")}
        env.update(ORCHESTRATOR_HTTP_PORT=url.rsplit(":", 1)[1], ORCHESTRATOR_API_TOKEN="env-token")
        process = await asyncio.create_subprocess_exec(
            CLI, "call", '{"command": "list_listeners"}', stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)

    assert process.returncode == 0, err
    assert json.loads(out) == {"status": "success", "listeners": []}
