"""`orchestrator status` and `orchestrator events` against a finished workload, over HTTP and in-process.

The commands run as the real console script in a subprocess, so the argument parsing, the door choice and
the exit codes are what a user gets.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr

from orchestrator.dev.inspect import _retries_waiting
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from tests.ops.conftest import FLAKY_DELAY_SECONDS, Workload, child_env

pytestmark = pytest.mark.devserver

ORCHESTRATOR = str(Path(sys.executable).parent / "orchestrator")
TOKEN = "status-token"
# A CLI call answers in about a second; the margin is for a loaded machine.
CLI_SECONDS = 30
# A traceback frame in a function of the CLI past its start: not the module's import, nor `main` putting the
# interrupt's handler in place (a SIGINT that lands before `signal.signal` returns is still Python's to handle).
IN_MAIN = re.compile(
    rb'orchestrator/cli\.py", line \d+, in (?!(?:<module>|main|_end_at_once_on_interrupt)\r?$)', re.MULTILINE
)


@pytest.fixture(scope="module")
async def api(workload: Workload) -> AsyncIterator[str]:
    platform = workload.engine.platform
    guarded = platform.settings.model_copy(update={"api_token": SecretStr(TOKEN)})
    async with serve_api(create_app(platform, guarded), "127.0.0.1", 0) as url:
        yield url


async def run_cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        ORCHESTRATOR,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env if env is not None else child_env(),
    )
    out, err = await asyncio.wait_for(process.communicate(), CLI_SECONDS)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_status_json_shows_lanes_outcomes_and_the_retry_waiting(workload: Workload, api: str) -> None:
    code, out, err = await run_cli("status", "--session", workload.session_id, "--json", "--url", api, "--token", TOKEN)

    assert code == 0, err
    status = json.loads(out)
    assert status["session_id"] == workload.session_id
    listeners = {item["name"]: item for item in status["listeners"]}
    assert set(listeners) == {"orchestrate", "flaky"}

    orchestrate = listeners["orchestrate"]
    assert orchestrate["enabled"] is True
    assert [lane["live"] for lane in orchestrate["lanes"]] == [True]
    assert orchestrate["lanes"][0]["workflow_id"].startswith(f"lane:{workload.session_id}:orchestrate:")
    assert orchestrate["pending"] == 0
    assert orchestrate["runs_in_flight"] == 0
    assert orchestrate["retries_waiting"] == []
    assert orchestrate["counts"].get("success", 0) >= 1
    assert {o["status"] for o in orchestrate["recent_outcomes"]} == {"success"}

    flaky = listeners["flaky"]
    assert orchestrate["paused"] is False and flaky["paused"] is False
    # A `success` outcome says the run started; its run's own status says how it went.
    assert {o.get("run_status") for o in flaky["recent_outcomes"]} == {"failed"}
    # The failed first run holds the lane's slot through its 60 s backoff.
    assert flaky["runs_in_flight"] == 1
    [waiting] = flaky["retries_waiting"]
    assert waiting["next_retry"] == 1
    assert waiting["attempts"] == 2
    assert waiting["failed_execution"].startswith(f"exe:{workload.session_id}:")
    assert waiting["run_key"] in flaky["lanes"][0]["runs_in_flight"]
    [failed] = [e for e in await workload.executions("flaky") if e["status"] == "failed"]
    assert waiting["failed_execution"] == failed["id"]
    due = datetime.fromisoformat(failed["ended_at"]) + timedelta(seconds=FLAKY_DELAY_SECONDS)
    assert datetime.fromisoformat(waiting["due_at"]) == due


async def test_status_table_is_readable(workload: Workload, api: str) -> None:
    code, out, err = await run_cli("status", "--session", workload.session_id, "--url", api, "--token", TOKEN)

    assert code == 0, err
    assert out.startswith(f"session {workload.session_id}")
    assert "listener orchestrate  v1  enabled" in out
    assert "listener flaky  v1  enabled" in out
    assert "retries waiting 1" in out
    assert "retries waiting:" in out
    assert "recent outcomes (newest first):" in out
    assert "success" in out


async def test_status_of_an_unknown_session_is_an_error_reply(workload: Workload, api: str) -> None:
    code, out, _ = await run_cli("status", "--session", "ses_nope", "--url", api, "--token", TOKEN)

    assert code == 1
    assert json.loads(out)["error"] == "not_found"


async def test_status_without_the_token_is_refused_and_the_token_is_not_printed(workload: Workload, api: str) -> None:
    code, out, err = await run_cli("status", "--session", workload.session_id, "--url", api, "--token", "wrong-one")

    assert code == 1
    assert json.loads(out)["error"] == "unauthorized"
    assert "wrong-one" not in out + err
    assert TOKEN not in out + err


async def test_unreachable_api_exits_3(workload: Workload) -> None:
    code, _, err = await run_cli("status", "--session", workload.session_id, "--url", "http://127.0.0.1:9")

    assert code == 3
    assert "cannot reach the API" in err


async def test_status_local_reads_the_database_and_queries_the_lanes(workload: Workload) -> None:
    env = child_env(
        ORCHESTRATOR_DATABASE_URL=workload.database_url,
        ORCHESTRATOR_TEMPORAL_ADDRESS=workload.temporal_address,
    )

    code, out, err = await run_cli("status", "--session", workload.session_id, "--json", "--local", env=env)

    assert code == 0, err
    listeners = {item["name"]: item for item in json.loads(out)["listeners"]}
    assert all(lane["live"] for lane in listeners["flaky"]["lanes"])
    assert len(listeners["flaky"]["retries_waiting"]) == 1


async def test_status_local_without_a_database_url_is_a_usage_error() -> None:
    code, _, err = await run_cli("status", "--session", "ses_x", "--local")

    assert code == 2
    assert "ORCHESTRATOR_DATABASE_URL" in err


async def test_events_prints_the_stream_in_order_and_filters_by_type(workload: Workload, api: str) -> None:
    auth = ("--url", api, "--token", TOKEN)
    code, out, err = await run_cli("events", "--session", workload.session_id, "--json", *auth)

    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    ids = [e["id"] for e in events]
    assert ids == sorted(ids)
    assert set(workload.event_ids) <= set(ids)
    assert {"object.written", "execution.started", "execution.ended"} <= {e["type"] for e in events}

    code, out, _ = await run_cli(
        "events", "--session", workload.session_id, "--types", "object.*", "--after", str(workload.event_ids[0]), *auth
    )
    assert code == 0
    lines = out.splitlines()
    assert [int(line.split()[0]) for line in lines[: len(workload.event_ids) - 1]] == workload.event_ids[1:]
    assert all("object.written" in line for line in lines)


async def following(session_id: str, *args: str) -> asyncio.subprocess.Process:
    """`orchestrator events --session ID --follow ARGS...`, its output piped."""
    return await asyncio.create_subprocess_exec(
        ORCHESTRATOR,
        "events",
        "--session",
        session_id,
        "--follow",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=child_env(),
    )


async def test_events_follow_tails_new_events_until_interrupted(workload: Workload, api: str) -> None:
    process = await following(workload.session_id, "--types", "object.written", "--url", api, "--token", TOKEN)
    assert process.stdout is not None
    try:
        seen = [await asyncio.wait_for(process.stdout.readline(), 20) for _ in workload.event_ids]
        assert [int(line.split()[0]) for line in seen] == workload.event_ids

        reply = await workload.engine.command(
            "write_object", session_id=workload.session_id, alias="ops/late", value={"type": "late"}
        )
        line = await asyncio.wait_for(process.stdout.readline(), 20)
        assert line.split()[0] == str(reply["event_id"]).encode()
        assert b"ops/late" in line
    finally:
        process.send_signal(signal.SIGINT)
        # `communicate`, not `wait`: asyncio's wait also waits for the pipes to close, which they do once the
        # process has gone and its output has been read.
        await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 130


async def test_events_follow_says_why_it_ends_when_its_key_is_revoked(workload: Workload, api: str) -> None:
    """The stream's `closed` message and the refusal that follows go to stderr (it exited 1 saying nothing)."""
    made = await workload.engine.command("create_api_key", name="follower", scopes=["read:**", "listen:**"])
    process = await following(workload.session_id, "--url", api, "--token", made["key"]["secret"])
    assert process.stdout is not None
    try:
        await asyncio.wait_for(process.stdout.readline(), 20)  # following
        await asyncio.sleep(1.0)  # past the history, on the stream
        await workload.engine.command("revoke_api_key", name="follower")
        _, err = await asyncio.wait_for(process.communicate(), 20)
    finally:
        if process.returncode is None:
            process.kill()
    assert process.returncode == 1, err
    said = err.decode()
    assert "the API closed the stream: the key that opened the stream was revoked" in said, said
    assert "orchestrator events: unauthorized: " in said, said


# Long enough for a CLI to start, read 400 events and block on a pipe nobody reads, on a slow, busy machine.
FULL_PIPE_SECONDS = 8.0
# A SIGINT this soon after the start may land before the interpreter has run a line of the command.
STARTING_SECONDS = 0.5


async def interrupted_within(process: subprocess.Popen[bytes], seconds: float) -> int | None:
    """SIGINT, then the exit code within `seconds`, or None when the process is still running."""
    process.send_signal(signal.SIGINT)
    try:
        return await asyncio.to_thread(process.wait, seconds)
    except subprocess.TimeoutExpired:
        return None


async def test_sigint_ends_events_follow_at_once_wherever_it_lands(workload: Workload, api: str) -> None:
    """Fifty interrupts, most after random delays: while the CLI starts, connects, prints its history into a pipe
    nobody reads (so its print blocks, the case that ignored SIGINT), or waits on the live stream; four wait for
    the full pipe and the stream, so those cases come up on a machine of any speed. Each ends the process within
    seconds of the first SIGINT, but one that lands in the interpreter's start, which may need a second."""
    session_id = (await workload.engine.command("open_session"))["session"]["id"]
    # Enough history that `--json` fills a pipe that is never read.
    for i in range(400):
        alias = f"noise/{i}/an/alias/long/enough/to/fill/a/pipe/sooner"
        reply = await workload.engine.command("write_object", session_id=session_id, alias=alias, value={"type": "n"})
    last = int(reply["event_id"])
    rng = random.Random(1217)

    def history_read(process: subprocess.Popen[bytes]) -> bytes:
        """What a following run prints up to the history's last event (all it printed, should it end first)."""
        assert process.stdout is not None
        printed = b""
        while line := process.stdout.readline():
            printed += line
            if line.split(maxsplit=1)[:1] == [str(last).encode()]:
                break
        return printed

    async def interrupt(index: int) -> tuple[float, int | None, bytes, bytes]:
        tail = ["--json"] if index % 2 == 0 else ["--after", str(last - 5)]  # a full pipe, or following live
        started = time.monotonic()
        process = subprocess.Popen(  # noqa: ASYNC220 - waited for in a thread, so the pipe can stay unread
            [ORCHESTRATOR, "events", "--session", session_id, "--follow", "--url", api, "--token", TOKEN, *tail],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env(),
        )
        delay = rng.uniform(0.0, 2.5)  # drawn for every run, so each random one's is the seed's
        printed = b""
        if index in (0, 2):
            # Two `--json` runs wait long enough to be blocked on their full pipe however slowly the machine
            # starts them: the case that ignored SIGINT must come up, not only by chance.
            await asyncio.sleep(FULL_PIPE_SECONDS)
            delay = time.monotonic() - started
        elif index in (1, 3):
            # Two runs wait until their history is out, so they follow the stream however slowly the machine
            # starts them (a busy machine took over 3 s to start the CLI, past every random delay): one is
            # interrupted at once, between its history and the stream, the other once waiting on the stream.
            reading = asyncio.ensure_future(asyncio.to_thread(history_read, process))
            await asyncio.wait({reading}, timeout=CLI_SECONDS)
            if not reading.done():
                process.kill()  # no history in time: the run is not following, which the end says
            printed = await reading
            await asyncio.sleep(0.0 if index == 1 else 1.0)
            delay = time.monotonic() - started
        else:
            await asyncio.sleep(delay)
        code = await interrupted_within(process, 10)
        if code is None and delay < STARTING_SECONDS:
            # Landed while the interpreter started, before the command's handler (`main`'s first statement):
            # once in a fresh-clone CI the interpreter's start took it in silence (0.13 s; never reproduced
            # here in 300 tries). The command's own handler must then end it on the next one at once.
            code = await interrupted_within(process, 10)
        if code is None:
            process.kill()
        out, err = await asyncio.to_thread(process.communicate)
        return delay, code, printed + out, err

    results = []
    for start in range(0, 50, 5):
        results += await asyncio.gather(*(interrupt(i) for i in range(start, start + 5)))
    for delay, code, out, err in results:
        assert code is not None, f"still running 10 s after SIGINT at {delay:.2f} s: {err.decode()[-2000:]}"
        # A signal may land while the interpreter starts and imports the command, before `main` has put the
        # command's handler in place (its first statement): what Python does then is not the command's to decide.
        starting = not out and IN_MAIN.search(err) is None
        assert code == 130 or starting, f"SIGINT at {delay:.2f} s: exit {code}: {err.decode()[-2000:]}"
    # A pipe holds 64 KiB; a print blocks once the next whole line no longer fits.
    assert any(len(out) >= 60_000 for _, _, out, _ in results), "no run filled its pipe"
    for index in (1, 3):
        delay, _, out, err = results[index]
        following = b"noise/" in out and len(out) < 4096
        assert following, f"run {index} was not following the stream at {delay:.2f} s: {out[-500:]!r} {err[-2000:]!r}"


async def test_status_shows_a_listener_paused_in_the_session(workload: Workload, api: str) -> None:
    paused = await workload.engine.platform.command(
        {"command": "pause_listener", "name": "orchestrate", "session_id": workload.session_id}
    )
    assert paused["status"] == "success", paused
    try:
        code, out, err = await run_cli(
            "status", "--session", workload.session_id, "--json", "--url", api, "--token", TOKEN
        )
        assert code == 0, err
        listeners = {item["name"]: item for item in json.loads(out)["listeners"]}
        assert listeners["orchestrate"]["paused"] is True and listeners["flaky"]["paused"] is False
        code, out, err = await run_cli("status", "--session", workload.session_id, "--url", api, "--token", TOKEN)
        assert "listener orchestrate  v1  enabled  paused" in out, out
    finally:
        await workload.engine.platform.command(
            {"command": "resume_listener", "name": "orchestrate", "session_id": workload.session_id}
        )


def test_a_retry_declared_without_its_delay_is_due_after_the_default_30_s() -> None:
    failed = {"id": "exe:ses_1:flaky:_:7.0", "status": "failed", "lane": "_", "ended_at": "2026-12-05T10:00:00+00:00"}

    [waiting] = _retries_waiting([failed], {"attempts": 2}, None)

    # The seed's `{"attempts": 2}`: a repeat 30 s after the failure (the declaration's default), not at once.
    assert waiting["due_at"] == "2026-12-05T10:00:30+00:00"
