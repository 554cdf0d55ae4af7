"""`orchestrator --help` names every subcommand in its usage line, as argparse registered them."""

from __future__ import annotations

import argparse
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
