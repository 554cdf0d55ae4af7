"""The kit's pytest plugin and `orchestrator new`, as a newcomer meets them: the README's test example in a
folder holding only the app and the test, and a starter app whose own test passes, each run by a bare
`pytest` in a subprocess (the plugin comes from the installed entry point, as it would for them)."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.commands.registry import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).parent / "orchestrator")
# A bare pytest run of one harness test: an embedded PostgreSQL, the test server, the test.
PYTEST_SECONDS = 180

pytestmark = pytest.mark.timeout(PYTEST_SECONDS + 30)


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("ORCHESTRATOR_", "PYTEST_"))}


def _pytest(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=folder,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=PYTEST_SECONDS,
    )


def _readme_example() -> dict[str, str]:
    """The README's "Testing an app" files, by the name each block's first line gives it (`# app.py: ...`)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Testing an app", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    files = {}
    for block in blocks:
        first = block.splitlines()[0]
        match = re.match(r"# (\w+\.py)\b", first)
        assert match, f"a block of the example does not start by naming its file: {first!r}"
        files[match.group(1)] = block
    return files


def test_the_readme_example_runs_in_a_folder_holding_only_the_app_and_the_test(tmp_path: Path) -> None:
    files = _readme_example()
    assert set(files) == {"app.py", "test_app.py"}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")

    done = _pytest(tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert "warning" not in done.stdout.lower(), done.stdout
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__") == ["app.py", "test_app.py"]


def test_a_new_app_passes_its_own_test(tmp_path: Path) -> None:
    made = subprocess.run([CLI, "new", "hello"], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    folder = tmp_path / "hello"
    assert sorted(p.name for p in folder.iterdir()) == [
        ".gitignore",
        "README.md",
        "activities.py",
        "app.py",
        "test_app.py",
        "workflows.py",
    ]
    assert ".orchestrator/" in (folder / ".gitignore").read_text().splitlines(), "dev's data stays out of git"
    # Named by its folder: another folder's `app.py` is another app, whose plan never takes this one's listeners.
    assert 'app_name = "hello"' in (folder / "app.py").read_text(encoding="utf-8").splitlines()
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert readme.splitlines()[0] == "# hello"
    assert "pytest" in made.stdout
    # What it says to try are commands the platform takes: each `orchestrator call '...'` body validates.
    bodies = [json.loads(b) for b in re.findall(r"orchestrator call '(.*?)'", readme, re.DOTALL)]
    assert [b["command"] for b in bodies] == ["open_session", "post_thread_item", "list_thread_items"]
    for body in bodies:
        COMMANDS[body["command"]].model.model_validate(
            {**body, "session_id": "ses_1"} if "session_id" in body else body
        )

    done = _pytest(folder)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_new_writes_nothing_over_a_folder_that_holds_something(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "app.py").write_text("mine\n", encoding="utf-8")

    made = subprocess.run([CLI, "new", "taken"], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60)

    assert made.returncode == 2
    assert "already exists" in made.stderr
    assert [p.name for p in (tmp_path / "taken").iterdir()] == ["app.py"]
    assert (tmp_path / "taken" / "app.py").read_text(encoding="utf-8") == "mine\n"


@pytest.mark.timeout(60)
def test_a_new_app_in_a_folder_whose_name_holds_a_quote_or_a_space_is_python_and_its_next_line_pastes(
    tmp_path: Path,
) -> None:
    name = 'my "first" app'
    made = subprocess.run([CLI, "new", name], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr

    tree = ast.parse((tmp_path / name / "app.py").read_text(encoding="utf-8"))
    [named] = [n.value for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "app_name"]
    assert ast.literal_eval(named) == name
    [next_line] = [line for line in made.stdout.splitlines() if line.startswith("Next: ")]
    assert shlex.split(next_line.removeprefix("Next: "))[:3] == ["cd", name, "&&"]
