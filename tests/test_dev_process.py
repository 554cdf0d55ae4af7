"""`orchestrator dev` starts the whole platform with an app of the user's own (its modules named `workflows.py`
and `activities.py`, as the samples name them), answers on its API, runs the app's listener, and leaves
nothing behind on Ctrl-C, within its shutdown bound even while clients hold streams open."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from orchestrator.dev.embedded import free_port
from orchestrator.dev.starter import write_starter
from tests.stream_clients import StreamClients

# `orchestrator dev` takes Temporal's default ports: its tests run one at a time, on one test worker.
pytestmark = pytest.mark.xdist_group("orchestrator-dev")


CLI = str(Path(sys.executable).parent / "orchestrator")
START_SECONDS = 90
# The platform's default `shutdown_seconds`: a stop never takes longer, whatever the clients do.
SHUTDOWN_BOUND_SECONDS = 10
STREAMS = 10


async def wait_for_line(stream: asyncio.StreamReader, text: str, seen: list[str]) -> None:
    while True:
        line = (await stream.readline()).decode()
        if not line:
            raise AssertionError(f"the process ended before printing {text!r}:\n{''.join(seen)}")
        seen.append(line)
        if text in line:
            return


async def call(port: int, body: str) -> dict[str, object]:
    process = await asyncio.create_subprocess_exec(
        CLI, "call", "--url", f"http://127.0.0.1:{port}", body, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    assert process.returncode == 0, out
    reply: dict[str, object] = json.loads(out)
    return reply


async def test_dev_serves_an_app_then_stops_everything_on_sigint(tmp_path: Path) -> None:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        CLI,
        "dev",
        "--app",
        str(tmp_path / "missing_app_is_refused_later.py"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    # An --app that is not there is refused before anything starts.
    assert await asyncio.wait_for(process.wait(), START_SECONDS) == 2

    app = tmp_path / "hello"
    write_starter(app)  # app.py, workflows.py, activities.py: names the platform's own packages never shadow
    process = await asyncio.create_subprocess_exec(
        CLI,
        "dev",
        "--data-dir",
        str(tmp_path / "data"),
        "--http-port",
        str(port),
        "--app",
        "app.py",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=app,
    )
    assert process.stdout is not None
    seen: list[str] = []
    try:
        await asyncio.wait_for(wait_for_line(process.stdout, "Ready.", seen), START_SECONDS)
        children = psutil.Process(process.pid).children(recursive=True)
        postmaster = int((tmp_path / "data" / "postgres" / "postmaster.pid").read_text().split()[0])
        assert any("temporal" in child.name() for child in children), children

        opened = await call(port, '{"command": "open_session", "alias": "dev"}')
        session = opened["session"]
        assert isinstance(session, dict) and session["alias"] == "dev"
        session_id = session["id"]
        item = {"type": "text", "role": "user", "message": "hi"}
        post = {"command": "post_thread_item", "session_id": session_id, "alias": "chats/1", "item": item}
        await call(port, json.dumps(post))
        listing = json.dumps({"command": "list_thread_items", "session_id": session_id, "alias": "chats/1"})
        deadline = time.monotonic() + 30
        messages: list[object] = []
        while time.monotonic() < deadline and len(messages) < 2:
            await asyncio.sleep(0.3)
            items = (await call(port, listing))["items"]
            assert isinstance(items, list)
            messages = [i["message"] for i in items]
        assert messages == ["hi", "Hello! You said: hi"], "".join(seen)

        # The command line finds this API on its data folder, on whatever port `--http-port` gave it.
        shell = {k: v for k, v in os.environ.items() if not k.upper().startswith("ORCHESTRATOR_")}
        shell["ORCHESTRATOR_DATA_DIR"] = str(tmp_path / "data")
        found = await asyncio.create_subprocess_exec(
            CLI, "status", "--session", session_id, "--json", env=shell, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await asyncio.wait_for(found.communicate(), START_SECONDS)
        assert found.returncode == 0 and json.loads(out)["session_id"] == session_id, out

        # Ten clients hold the session's stream open, as ten dashboards would.
        streams = StreamClients(f"http://127.0.0.1:{port}", session_id, STREAMS)
        await streams.open()
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        interrupted = time.monotonic()
        rest, _ = await asyncio.wait_for(process.communicate(), START_SECONDS)
    took = time.monotonic() - interrupted
    output = "".join(seen) + rest.decode()

    assert process.returncode == 0, output
    assert "Stopped." in output
    assert took < SHUTDOWN_BOUND_SECONDS, f"stopping took {took:.1f} s\n{output}"
    assert "api" not in json.loads((tmp_path / "data" / "ports.json").read_text()), "a stopped API is not pointed to"
    # Every client was told, and its stream ended cleanly (no error on the reader's side).
    for received in await streams.received():
        assert "event: shutdown" in received, received
    deadline = time.monotonic() + 10
    leftovers = [p for p in children if p.is_running()] + ([postmaster] if psutil.pid_exists(postmaster) else [])
    while leftovers and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        leftovers = [p for p in children if p.is_running()]
        if psutil.pid_exists(postmaster) and psutil.Process(postmaster).status() != psutil.STATUS_ZOMBIE:
            leftovers.append(postmaster)
    assert leftovers == [], output


TYPO_APP = """
from temporalio import workflow


@workflow.defn(name="noop")
class Noop:
    @workflow.run
    async def run(self, run: dict) -> None:
        return None


workflows = [Noop]
listeners = [{"name": "watch", "filter": {"types": ["object.written"]}, "batch": {"max_event": 10},
              "action": {"type": "workflow", "workflow": "noop"}}]
"""


async def test_dev_with_a_typo_in_a_listener_stops_at_once_naming_the_field(tmp_path: Path) -> None:
    (tmp_path / "typo_app.py").write_text(TYPO_APP)
    process = await asyncio.create_subprocess_exec(
        CLI, "dev", "--app", "typo_app.py", "--data-dir", str(tmp_path / "data"), "--http-port", str(free_port()),
        cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await asyncio.wait_for(process.communicate(), 30)
    text = output.decode()
    assert process.returncode == 2, text
    last = text.strip().splitlines()[-1]
    assert "listeners.0 (watch): listener.batch.max_event" in last, "the refusal is the last it says: it stops there"
    assert "Ready." not in text, "never Ready over an older version"


ROOT = Path(__file__).resolve().parents[1]


def _as_any_run(text: str) -> str:
    """A start-up line with what differs from one run to the next made the same: the database's socket folder,
    ports, clock times and the seconds left to the activation delay."""
    text = re.sub(r"host=\S+", "host=PATH", text)
    text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)
    text = re.sub(r"\b\d\d:\d\d:\d\d\b", "HH:MM:SS", text)
    return re.sub(r"\bin \d+ s\b", "in N s", text)


def _readme_banner() -> list[str]:
    """The README's sample of what `make run` prints, from its app line to `Ready.`"""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    fenced = re.findall(r"^```\w*\n(.*?)^```$", readme, re.S | re.M)
    [block] = [b for b in fenced if b.startswith("app          ")]
    return block.splitlines()


async def test_the_readmes_banner_is_what_make_run_prints_on_a_first_start(tmp_path: Path) -> None:
    """`make run` is `orchestrator dev` in the repository's folder: the README shows its lines up to `Ready.`,
    the same but for paths, ports and times."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    process = await asyncio.create_subprocess_exec(
        CLI, "dev", "--data-dir", str(tmp_path / "data"), "--http-port", str(free_port()),
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    seen: list[str] = []
    try:
        await asyncio.wait_for(wait_for_line(process.stdout, "Ready.", seen), START_SECONDS)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        await asyncio.wait_for(process.communicate(), START_SECONDS)
    printed = [_as_any_run(line.rstrip("\n")) for line in seen]
    assert printed == [_as_any_run(line) for line in _readme_banner()]
