"""`make test` (`scripts/test`) says which of Debian's packages it installs and why, before it installs them; run
here in a copy of the repository's layout whose tools are stand-ins (an `apt-get` that only says it was called,
a `ruff` that stops the script right after)."""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_scripts_test_says_what_it_installs_and_why_before_it_does(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "test", tmp_path / "scripts" / "test")
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    _tool(venv, "python", "exit 0")
    _tool(venv, "ruff", "echo 'ruff ran'; exit 1")
    # A PATH of stand-ins: no chromium, no chromedriver, root, and an apt-get that installs nothing.
    tools = tmp_path / "tools"
    tools.mkdir()
    _tool(tools, "id", "echo 0")
    _tool(tools, "apt-get", 'echo "apt-get $*" >&2')
    dirname = shutil.which("dirname")
    assert dirname is not None
    (tools / "dirname").symlink_to(dirname)

    done = subprocess.run(
        [shutil.which("bash") or "/bin/bash", str(tmp_path / "scripts" / "test")],
        env={"PATH": str(tools)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
    )

    lines = done.stdout.splitlines()
    bouncer = not Path("/usr/sbin/pgbouncer").exists()
    packages = "chromium chromium-driver" + (" pgbouncer" if bouncer else "")
    said = lines.index(f"scripts/test: installing Debian's packages {packages} (apt-get update, apt-get install):")
    assert lines[said + 1].startswith("  chromium, chromium-driver: the dashboard's browser test drives Chromium")
    assert lines.index("apt-get update -qq") > said, done.stdout
    assert f"apt-get install -y -qq {packages}" in lines, done.stdout
    assert lines[-1] == "ruff ran", "the checks come after"
