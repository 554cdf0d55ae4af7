"""`orchestrator --help` names every subcommand in its usage line, as argparse registered them; bad usage (a key
beside `--local`, a URL or a port that cannot be) exits 2 naming what is at fault, before anything starts."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.cli import _parser

CLI = str(Path(sys.executable).parent / "orchestrator")


def test_the_usage_line_names_every_subcommand() -> None:
    [subcommands] = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    shown = subprocess.run([CLI, "--help"], capture_output=True, text=True, timeout=60)

    assert shown.returncode == 0, shown.stderr
    # argparse wraps a usage line longer than the terminal: its words are what count.
    usage = " ".join(shown.stdout.split("\n\n", 1)[0].split())
    assert "plan" in subcommands.choices
    assert usage == f"usage: orchestrator [-h] {{{','.join(subcommands.choices)}}} ..."


@pytest.mark.parametrize(
    "argv",
    [
        ["call", "--local", "--token", "k_reader", '{"command": "list_listeners"}'],
        ["call", "--local", "--url", "http://127.0.0.1:1", '{"command": "list_listeners"}'],
        ["status", "--local", "--token", "k_reader", "--session", "ses_1"],
    ],
)
def test_a_key_or_url_beside_local_is_refused_not_ignored(argv: list[str]) -> None:
    """`--local` runs in this process with the deployment's own rights: a `--token` there would be ignored, and a
    reader would take a read-only key's refusals for tested."""
    shown = subprocess.run([CLI, *argv], capture_output=True, text=True, timeout=60)

    assert shown.returncode == 2, shown
    assert "--local runs in this process" in shown.stderr and shown.stdout == ""


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["call", "--url", "http://127.0.0.1:99999", '{"command": "list_listeners"}'], "--url"),
        (["call", "--url", "127.0.0.1:8700", '{"command": "list_listeners"}'], "--url"),
        (["status", "--url", "http://127.0.0.1:99999", "--session", "ses_1"], "--url"),
        (["events", "--url", "http://127.0.0.1:port", "--session", "ses_1"], "--url"),
        (["keys", "list", "--url", "http://[::1"], "--url"),
        (["dev", "--http-port", "99999"], "--http-port"),
        (["api", "--http-port", "-1"], "--http-port"),
        (["worker", "--app", "app", "--health-port", "65536"], "--health-port"),
        (["mcp", "--http", "70000"], "--http"),
    ],
)
def test_a_url_or_port_that_cannot_be_is_bad_usage_naming_its_flag(argv: list[str], named: str, tmp_path: Path) -> None:
    """Exit 2 with the flag named, never a traceback, nor 3 (which says: the API is away, try again later)."""
    env = {k: v for k, v in os.environ.items() if not k.lower().startswith("orchestrator_")}
    shown = subprocess.run(
        [CLI, *argv, *(["--data-dir", str(tmp_path)] if argv[0] == "dev" else [])],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**env, "ORCHESTRATOR_DATA_DIR": str(tmp_path)},
    )

    assert shown.returncode == 2, shown
    assert named in shown.stderr and "Traceback" not in shown.stderr, shown.stderr
    assert shown.stdout == ""


@pytest.mark.parametrize("argv", [["call", '{"command": "list_listeners"}'], ["status", "--session", "ses_1"]])
def test_an_api_port_out_of_range_in_the_environment_is_named(argv: list[str], tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.lower().startswith("orchestrator_")}
    shown = subprocess.run(
        [CLI, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "ORCHESTRATOR_HTTP_PORT": "99999", "ORCHESTRATOR_DATA_DIR": str(tmp_path)},
    )

    assert shown.returncode == 2, shown
    assert "ORCHESTRATOR_HTTP_PORT" in shown.stderr and "Traceback" not in shown.stderr, shown.stderr


@pytest.mark.parametrize(
    "setting",
    [
        "ORCHESTRATOR_DATABASE_POOL_SIZE=0",
        "ORCHESTRATOR_MAX_REQUEST_BYTES=-1",
        "ORCHESTRATOR_RUN_CHECK_SECONDS=-5",
        "ORCHESTRATOR_LANE_IDLE_EXIT_SECONDS=0",
        "ORCHESTRATOR_LANE_HISTORY_LIMIT=0",
        "ORCHESTRATOR_WORKER_GRACEFUL_SHUTDOWN_SECONDS=-1",
    ],
)
def test_a_setting_that_cannot_be_is_named_before_anything_connects(setting: str, tmp_path: Path) -> None:
    """`call --local` with a pool of no connection ended in asyncpg's traceback; each of these is refused at
    start, naming its variable (exit 2)."""
    name, value = setting.split("=")
    env = {k: v for k, v in os.environ.items() if not k.lower().startswith("orchestrator_")}
    env |= {name: value, "ORCHESTRATOR_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"}
    shown = subprocess.run(
        [CLI, "call", "--local", '{"command": "list_listeners"}'], capture_output=True, text=True, timeout=60, env=env
    )

    assert shown.returncode == 2, shown
    assert name in shown.stderr and "Traceback" not in shown.stderr, shown.stderr


def test_a_data_folder_that_cannot_be_made_is_bad_usage_naming_the_flag(tmp_path: Path) -> None:
    """`dev --data-dir` on a file (or where nothing can be made) said only `[Errno 17] File exists: ...`, exit 1."""
    taken = tmp_path / "a-file"
    taken.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.lower().startswith("orchestrator_")}
    shown = subprocess.run(
        [CLI, "dev", "--data-dir", str(taken), "--http-port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
    )

    assert shown.returncode == 2, shown
    assert "--data-dir" in shown.stderr and str(taken) in shown.stderr, shown.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["call", "--local", '{"command": "list_listeners"}'],
        ["status", "--local", "--session", "ses_1"],
        ["events", "--local", "--session", "ses_1"],
        ["keys", "list", "--local"],
        ["restored"],
        ["restored", "--database-url", "localhost/orchestrator"],
        ["plan", "--app", "examples.missions.app"],
    ],
)
def test_a_database_url_that_cannot_be_is_bad_usage_not_a_database_away(argv: list[str], tmp_path: Path) -> None:
    """A URL asyncpg cannot read (no `postgresql://`) said `cannot reach PostgreSQL at the host localhost:5432` and
    exited 3, which tells a script to try again later; no retry cures it: exit 2, saying what the URL lacks, and the
    URL (which may hold a password) never printed."""
    env = {k: v for k, v in os.environ.items() if not k.lower().startswith("orchestrator_")}
    env |= {"ORCHESTRATOR_DATABASE_URL": "nobody:s3cret@localhost/orchestrator", "ORCHESTRATOR_DATA_DIR": str(tmp_path)}
    shown = subprocess.run(
        [CLI, *argv], capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[1], env=env
    )

    assert shown.returncode == 2, shown
    assert "database_url: not a URL" in shown.stderr and "postgresql://" in shown.stderr, shown.stderr
    assert "s3cret" not in shown.stderr and "Traceback" not in shown.stderr, shown.stderr
    assert shown.stdout == ""


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["call", "--local", '{"command": "list_listeners"}'], 3),
        (["status", "--local", "--session", "ses_1"], 3),
        (["worker", "--app", "examples.missions.app"], 1),
        (["api", "--http-port", "0"], 1),
    ],
)
def test_a_temporal_that_does_not_answer_is_named_in_one_line(argv: list[str], code: int) -> None:
    """`ORCHESTRATOR_TEMPORAL_ADDRESS` where nothing listens ended `worker`, `api` and `--local` in the SDK's
    traceback (`RuntimeError: Failed client connect`); it is one line naming the address, and `--local` exits 3 as
    for a database out of reach."""
    env = {k: v for k, v in os.environ.items() if not k.lower().startswith("orchestrator_")}
    env |= {
        "ORCHESTRATOR_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
        "ORCHESTRATOR_TEMPORAL_ADDRESS": "127.0.0.1:1",
    }
    shown = subprocess.run(
        [CLI, *argv], capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[1], env=env
    )

    assert shown.returncode == code, shown
    assert "temporal_address: cannot reach Temporal at 127.0.0.1:1" in shown.stderr, shown.stderr
    assert "Traceback" not in shown.stderr, shown.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["call", '{"command": "list_listeners"}'],
        ["status", "--session", "ses_1"],
        ["events", "--session", "ses_1", "--follow", "--exit-on-disconnect"],
        ["keys", "list"],
    ],
)
def test_an_api_out_of_reach_is_named(argv: list[str], tmp_path: Path) -> None:
    """`cannot reach the API: ConnectionRefusedError(...)` did not say where it looked, and with no `--url` that is
    found by a rule (the settings, else the running dev's data folder, else port 8700): the URL is named."""
    env = {k: v for k, v in os.environ.items() if not k.lower().startswith("orchestrator_")}
    env |= {"ORCHESTRATOR_HTTP_PORT": "1", "ORCHESTRATOR_DATA_DIR": str(tmp_path)}
    shown = subprocess.run([CLI, *argv], capture_output=True, text=True, timeout=60, env=env)

    assert shown.returncode == 3, shown
    assert "cannot reach the API at http://127.0.0.1:1:" in shown.stderr, shown.stderr
    assert "Traceback" not in shown.stderr and shown.stdout == "", shown


def test_a_starter_folder_that_cannot_be_made_is_bad_usage(tmp_path: Path) -> None:
    """`orchestrator new` under a file (or where nothing can be made) ended in `NotADirectoryError`'s traceback."""
    taken = tmp_path / "a-file"
    taken.write_text("")
    shown = subprocess.run([CLI, "new", str(taken / "app")], capture_output=True, text=True, timeout=60, cwd=tmp_path)

    assert shown.returncode == 2, shown
    assert f"{taken / 'app'} cannot be made" in shown.stderr and "Traceback" not in shown.stderr, shown.stderr
    assert shown.stdout == "" and taken.read_text() == ""
