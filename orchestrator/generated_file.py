"""The command line every generated file shares (`docs/commands.md`, the TypeScript client's types, the Python
client's reply types): write the file, or with `--check` exit 1 when it is not what would be written."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def generate(
    prog: str, description: str | None, default: Path, render: Callable[[], str], argv: list[str] | None
) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {prog}", description=description)
    parser.add_argument("path", nargs="?", type=Path, default=default, help=f"default: {default}")
    parser.add_argument("--check", action="store_true", help="exit 1 when the file differs from what it would be")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.path.read_text(encoding="utf-8") if args.path.exists() else ""
        if current != text:
            sys.stderr.write(f"{args.path} is out of date: run `make docs`\n")
            return 1
        return 0
    args.path.parent.mkdir(parents=True, exist_ok=True)
    args.path.write_text(text, encoding="utf-8")
    return 0
