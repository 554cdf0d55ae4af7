"""What `orchestrator dev` says while it runs: `Ready.` once the app's listeners are in effect, then a line
per batch and per run's end (none with `--quiet`)."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import signal
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.dev.embedded import free_port
from orchestrator.dev.log import DRIVER_LOGGER, ActivityLines, activity_lines
from orchestrator.dev.runtime import announce_ready
from orchestrator.dev.starter import write_starter
from tests.ops.conftest import child_env

# `orchestrator dev` takes Temporal's default ports: its tests run one at a time, on one test worker.
pytestmark = pytest.mark.xdist_group("orchestrator-dev")


CLI = str(Path(sys.executable).parent / "orchestrator")
START_SECONDS = 90


def record(message: str, **fields: object) -> logging.LogRecord:
    made = logging.LogRecord(DRIVER_LOGGER, logging.INFO, __file__, 1, message, (), None)
    made.__dict__.update(fields)
    return made


def test_a_batch_and_its_runs_end_are_one_line_each() -> None:
    lines: list[str] = []
    handler = ActivityLines(lines.append)
    common = {"session": "ses_1", "listener": "respond", "lane": "chats/1"}
    started = {"activity": "batch", "status": "success", "events": 2, "batch": "1-2", "retry": 1, "execution": "exe:2"}

    handler.handle(record("batch success", **started, **common))
    handler.handle(record("lane moved on", **common))  # not an activity: no line
    handler.handle(record("run completed", activity="run_end", status="completed", execution="exe:2", **common))
    handler.handle(record("batch throttled", activity="batch", status="throttled", events=1, batch="3-3", **common))

    batch, end, throttled = lines
    assert re.fullmatch(r"\d\d:\d\d:\d\d  batch  respond  lane chats/1  .*", batch)
    assert batch.endswith("  2 events (1-2)  success (retry 1)  run exe:2  session ses_1")
    assert re.search(r"  run    respond  lane chats/1  2 events  completed in \d+\.\d s  run exe:2$", end), end
    assert throttled.endswith("  batch  respond  lane chats/1  1 event (3-3)  throttled  session ses_1")


def test_a_runs_error_is_one_line_and_an_unknown_start_has_no_duration() -> None:
    lines: list[str] = []
    ActivityLines(lines.append).handle(
        record(
            "run failed",
            activity="run_end",
            status="failed",
            listener="l",
            lane="_",
            execution="exe:9",
            error="Traceback\n  line 1\nValueError: no",
        )
    )
    [line] = lines
    assert line.endswith("  run    l  lane _  failed  run exe:9  error: Traceback line 1 ValueError: no")


def test_a_lane_key_or_an_error_with_a_line_end_or_an_escape_stays_one_line_shown_not_obeyed() -> None:
    """A keyed lane's key is the text an event held at the key's path: a line end in it printed a forged line
    after the batch's, and an escape sequence reached the terminal as written."""
    lines: list[str] = []
    forged = "ok\n11:00:00  batch  other  lane x  1 event (1-1)  success\x1b[2J"
    handler = ActivityLines(lines.append)
    handler.handle(record("b", activity="batch", status="success", events=1, session="s", listener="l", lane=forged))
    handler.handle(
        record("e", activity="run_end", status="failed", listener="l", lane=forged, execution="x", error="\x1b[31mno")
    )

    assert len(lines) == 2
    assert all("\x1b" not in line and "\n" not in line for line in lines), lines
    assert "lane ok\\n11:00:00  batch  other" in lines[0] and "\\x1b[2J" in lines[0]
    assert lines[1].endswith("error: \\x1b[31mno")


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_the_lines_go_only_while_the_block_runs_and_the_usual_handlers_keep_to_warnings() -> None:
    lines: list[str] = []
    driver = logging.getLogger(DRIVER_LOGGER)
    usual = Kept()
    logging.getLogger().addHandler(usual)
    try:
        with activity_lines(lines.append):
            driver.info("batch %s", "success", extra={"activity": "batch", "status": "success", "events": 1})
            driver.warning("could not drive lane %s", "x")
        driver.info("batch %s", "success", extra={"activity": "batch", "status": "success", "events": 1})
    finally:
        logging.getLogger().removeHandler(usual)
    assert len(lines) == 1
    assert [r.getMessage() for r in usual.records if r.name == DRIVER_LOGGER] == ["could not drive lane x"]


async def test_ready_waits_for_the_listeners_to_take_effect() -> None:
    said: list[tuple[datetime, str]] = []
    effective = datetime.now(UTC) + timedelta(seconds=1)

    await announce_ready(lambda line: said.append((datetime.now(UTC), line)), effective)

    (_, waiting), (at, ready) = said
    assert (
        waiting.startswith("listeners    in effect at ") and "ORCHESTRATOR_LIMITS__ACTIVATION_DELAY_SECONDS" in waiting
    )
    assert ready == "Ready. Press Ctrl-C to stop."
    assert at >= effective


async def test_ready_at_once_when_the_listeners_are_already_in_effect() -> None:
    said: list[str] = []
    await announce_ready(said.append, datetime.now(UTC) - timedelta(seconds=5))
    await announce_ready(said.append, None)
    assert said == ["Ready. Press Ctrl-C to stop."] * 2


async def test_dev_says_ready_once_the_app_is_live_logs_each_batch_and_run_and_reloads_new_code(
    tmp_path: Path,
) -> None:
    app = tmp_path / "hello"
    write_starter(app)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = child_env(ORCHESTRATOR_LIMITS__ACTIVATION_DELAY_SECONDS="2")
    # Ports of its own for the embedded Temporal, as a data folder remembers them: not 7233 and 8233, which
    # another platform on the machine may be starting on at this very moment.
    (tmp_path / "data").mkdir()
    remembered = {"temporal": free_port(), "temporal_ui": free_port()}
    (tmp_path / "data" / "ports.json").write_text(json.dumps(remembered))
    process = await asyncio.create_subprocess_exec(
        CLI,
        "dev",
        "--app",
        "app.py",
        "--reload",
        "--data-dir",
        str(tmp_path / "data"),
        "--http-port",
        str(port),
        cwd=app,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdout is not None
    seen: list[str] = []

    async def until(text: str, within: float = 60) -> str:
        async def read() -> str:
            while True:
                line = (await process.stdout.readline()).decode()  # type: ignore[union-attr]
                assert line, f"dev ended before {text!r}:\n{''.join(seen)}"
                seen.append(line)
                if text in line:
                    return line

        try:
            return await asyncio.wait_for(read(), within)
        except TimeoutError:
            raise AssertionError(f"no {text!r} within {within:g} s:\n{''.join(seen)}") from None

    async def call(body: dict[str, object]) -> dict[str, object]:
        done = await asyncio.create_subprocess_exec(
            CLI, "call", "--url", url, json.dumps(body), stdout=asyncio.subprocess.PIPE
        )
        out, _ = await done.communicate()
        reply: dict[str, object] = json.loads(out)
        assert reply["status"] == "success", reply
        return reply

    async def say(session_id: str, thread: str) -> None:
        item = {"type": "text", "role": "user", "message": "hi"}
        await call({"command": "post_thread_item", "session_id": session_id, "alias": thread, "item": item})

    try:
        await until("Ready.", START_SECONDS)
        output = "".join(seen)
        assert f"temporal ui  http://127.0.0.1:{remembered['temporal_ui']}" in output
        assert "listeners    in effect at " in output
        assert output.index("listeners    in effect at ") < output.index("Ready.")

        # At once after Ready, a write is the listener's: a batch, a run, its end.
        session_id = str((await call({"command": "open_session", "alias": "hi"}))["session"]["id"])  # type: ignore[index]
        await say(session_id, "chats/1")
        batch = await until("  batch  greet  ")
        end = await until("  run    greet  ")

        # A change to the app's activity: the worker starts again on the new code.
        source = app / "activities.py"
        source.write_text(source.read_text().replace("Hello! You said:", "Hello again! You said:"))
        await until("reload       the worker runs hello (app) again, on its new code")
        await until("Ready.")
        await say(session_id, "chats/2")
        await until("  run    greet  lane chats/2")
        items = await call({"command": "list_thread_items", "session_id": session_id, "alias": "chats/2"})

        # A file that does not import is said, and once it is fixed the worker starts again on it.
        good = source.read_text()
        source.write_text(good + "\ndef broken(:\n")
        await until("reload       the app does not load")
        source.write_text(good)
        await until("reload       the worker runs hello (app) again, on its new code")
        await say(session_id, "chats/3")
        await until("  run    greet  lane chats/3")
        kept = await call({"command": "list_thread_items", "session_id": session_id, "alias": "chats/3"})
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        await asyncio.wait_for(process.communicate(), START_SECONDS)

    assert "lane chats/1  1 event (" in batch and "  success  run exe:" in batch
    assert re.search(r"lane chats/1  1 event  completed in \d+\.\d s  run exe:", end), end
    assert "reload       activities.py changed" in "".join(seen)
    assert [item["message"] for item in items["items"]] == ["hi", "Hello again! You said: hi"]  # type: ignore[index]
    assert [item["message"] for item in kept["items"]] == ["hi", "Hello again! You said: hi"]  # type: ignore[index]
