"""`orchestrator --help` names every subcommand in its usage line, as argparse registered them."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

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
