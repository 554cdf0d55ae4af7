"""The HTTP door while its database is away: every request answers `unavailable` (503, `Retry-After`) in the
door's JSON, whether the database failed the command or the door's own look before it (who the caller is), and
the door answers as before once the database is back."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from orchestrator.client import Client
from orchestrator.config import Settings
from orchestrator.core.errors import CommandError
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform
from tests.crash.conftest import RestartablePostgres

pytestmark = pytest.mark.xdist_group("crash")

UNAVAILABLE = {
    "status": "error",
    "error": "unavailable",
    "message": "database: out of reach for now; try again (a write retried with its idempotency_key is not made twice)",
    "retry_after": 1,
}


@pytest.mark.parametrize("token", [None, "s3cret"], ids=["open door", "bootstrap token"])
async def test_a_door_whose_database_is_away_answers_unavailable_and_serves_again_once_it_is_back(
    private_postgres: RestartablePostgres,
    token: str | None,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The outage's end is said by a command begun after the last refused one and this long after it (5 s; the
    # quiet's own timing is tests/core/test_outages.py's): none here, so the first command back says it.
    monkeypatch.setattr("orchestrator.platform.OUTAGE_QUIET_SECONDS", 0.0)
    # Open: the door's first look is whether any key exists (the database's); with the token, the command's own.
    settings = Settings(api_token=SecretStr(token) if token else None)
    platform = await Platform.connect(settings, private_postgres.url)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with (
            serve_api(create_app(platform, settings), "127.0.0.1", 0) as url,
            httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http,
        ):
            await private_postgres.stop()
            caplog.set_level(logging.WARNING)
            for _ in range(3):
                away = await http.post("/v1/commands", json={"command": "open_session"})
                assert away.status_code == 503, away.text
                assert away.json() == UNAVAILABLE
                assert away.headers["retry-after"] == "1"
            ours = [r for r in caplog.records if r.name.split(".")[0] in ("orchestrator", "uvicorn")]
            assert not [r for r in ours if r.exc_info], "an outage is said in a line, not a traceback"
            said = [r.getMessage() for r in ours if "unavailable" in r.getMessage()]
            assert len(said) == 1 and said[0].startswith("commands answer unavailable: the database is out of"), (
                "said when it starts, not at every request"
            )
            assert (await http.get("/readyz")).status_code == 503
            # The Python client raises it as the code's error, with when to try again.
            async with Client.http(url, token=token) as client:
                with pytest.raises(CommandError) as refused:
                    await client.open_session()
            assert (refused.value.code, refused.value.retry_after) == ("unavailable", 1)
            # The command line prints the reply and exits 3, as for an API out of reach: a script tries again.
            code, printed = await orchestrator_call(url, token, {"command": "open_session"})
            assert (code, json.loads(printed)) == (3, UNAVAILABLE)

            await private_postgres.start_again()
            back = await http.post("/v1/commands", json={"command": "open_session"})
            assert back.status_code == 200, back.text
            assert [r.getMessage() for r in caplog.records if "unavailable" in r.getMessage()] == said, (
                "nor at the requests after it"
            )
            again = [r.getMessage() for r in caplog.records if "reach the database again" in r.getMessage()]
            assert len(again) == 1 and again[0].startswith("commands reach the database again, after "), again
            assert back.json()["session"]["id"].startswith("ses_")
            code, printed = await orchestrator_call(url, token, {"command": "open_session"})
            assert code == 0 and json.loads(printed)["status"] == "success", printed
    finally:
        await platform.close()


async def orchestrator_call(url: str, token: str | None, body: dict[str, object]) -> tuple[int, str]:
    """`orchestrator call --url URL [--token T] BODY` as a user runs it: its exit code and what it printed."""
    command = [str(Path(sys.executable).parent / "orchestrator"), "call", "--url", url, json.dumps(body)]
    if token:
        command[4:4] = ["--token", token]
    process = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE)
    out, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode()


async def test_events_follow_started_while_the_database_is_away_waits_and_prints_once_it_is_back(
    private_postgres: RestartablePostgres,
) -> None:
    """`orchestrator events --follow` against a door answering `unavailable` says so and asks again (it exited
    with 3 on the first answer), then prints the session's events from the first once the database is back."""
    settings = Settings()
    platform = await Platform.connect(settings, private_postgres.url)
    try:
        async with serve_api(create_app(platform, settings), "127.0.0.1", 0) as url:
            session = (await platform.command({"command": "open_session"}))["session"]["id"]
            body = {"command": "write_object", "session_id": session, "alias": "notes/a", "value": {"type": "note"}}
            written = (await platform.command(body))["event_id"]
            await private_postgres.stop()
            follower = await asyncio.create_subprocess_exec(
                *[str(Path(sys.executable).parent / "orchestrator"), "events", "--session", session],
                *["--follow", "--json", "--url", url],
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            assert follower.stdout is not None and follower.stderr is not None
            try:
                async with asyncio.timeout(30):
                    gap = (await follower.stderr.readline()).decode()
                assert "the API answered unavailable: database: out of reach" in gap and "reconnecting" in gap, gap
                assert follower.returncode is None, "still following"
                await private_postgres.start_again()
                printed: list[int] = []
                async with asyncio.timeout(30):
                    while written not in printed:
                        printed.append(json.loads(await follower.stdout.readline())["id"])
                assert printed == sorted(printed) and printed[0] == 1, "from the session's first event, in order"
            finally:
                follower.terminate()
                await follower.wait()
    finally:
        await platform.close()


async def test_a_door_whose_database_hangs_is_not_ready(private_postgres: RestartablePostgres) -> None:
    """A database that keeps its connections and answers nothing (every process stopped): `/readyz` answers 503
    in its own time rather than waiting with the database, and 200 once it answers again."""
    settings = Settings()
    platform = await Platform.connect(settings, private_postgres.url)
    try:
        async with (
            serve_api(create_app(platform, settings), "127.0.0.1", 0) as url,
            httpx.AsyncClient(base_url=url, timeout=60) as http,
        ):
            assert (await http.get("/readyz")).status_code == 200
            private_postgres.freeze()
            try:
                hung = await http.get("/readyz")
            finally:
                private_postgres.thaw()
            assert hung.status_code == 503, hung.text
            assert hung.json() == {"status": "unavailable", "error": "unavailable"}
            assert (await http.get("/readyz")).status_code == 200
    finally:
        await platform.close()
