"""The backup and restore commands of docs/operations.md, read from the page and run as an operator would.

The page's `bash` blocks under "### Backup" and "### Restore" are run line by line with `bash -e`, in a folder of
the test's, with `ORCHESTRATOR_DATABASE_URL` and `RESTORED_URL` set (and no other setting of the platform's) and the
folder of a `pg_dump` of the server's major release first on `PATH` (`orchestrator.dev.pg_tools`, which the page
itself calls), then this environment's `orchestrator`; the new database the page creates is given a name of the
test's, so tests running at once on one server do not meet. A server with no `pg_dump` of its release skips the
test, saying so.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.dev.pg_tools import NoFittingTool, server_major, tool_for

DOC = Path(__file__).resolve().parents[1] / "docs" / "operations.md"
# The name the page gives the database it restores into.
RESTORED_NAME = "orchestrator_restored"


def section_blocks(heading: str) -> list[list[str]]:
    """The command lines of each `bash` block of the page's section `### {heading}` (to the next heading)."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"\n### {heading}\n")
    end = min(i for i in (text.find("\n## ", start + 1), text.find("\n### ", start + 1)) if i != -1)
    return [
        [line.strip() for line in block.splitlines() if line.strip()]
        for block in re.findall(r"```bash\n(.*?)```", text[start:end], flags=re.S)
    ]


def section_commands(heading: str) -> list[str]:
    """The command lines of the `bash` blocks of the page's section `### {heading}`, one block after another."""
    return [line for block in section_blocks(heading) for line in block]


async def tools_folder(database_url: str) -> Path:
    """The folder of a `pg_dump` (with its `pg_restore` and `psql`) of the server's major release or newer."""
    major = await server_major(database_url)
    try:
        folder = tool_for("pg_dump", major).parent
        for name in ("pg_restore", "psql"):
            assert tool_for(name, major).parent == folder, f"{name} is not beside {folder / 'pg_dump'}"
    except NoFittingTool as err:
        pytest.skip(str(err))
    return folder


async def run_commands(commands: list[str], cwd: Path, database_url: str, restored_url: str | None = None) -> str:
    """Run the page's commands in `cwd`; answers what they printed. `.venv/bin/python` is this interpreter, and
    `orchestrator` this environment's."""
    path = os.pathsep.join(
        [str(await tools_folder(database_url)), str(Path(sys.executable).parent), os.environ["PATH"]]
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    env |= {"ORCHESTRATOR_DATABASE_URL": database_url, "PATH": path}
    if restored_url is not None:
        env["RESTORED_URL"] = restored_url
    script = "\n".join(commands).replace(".venv/bin/python", sys.executable)
    done = await asyncio.to_thread(
        subprocess.run, ["bash", "-e", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"the page's commands failed:\n{script}\n{done.stdout}\n{done.stderr}"
    return done.stdout


async def back_up(database_url: str, folder: Path) -> Path:
    """The page's backup, of the database at `database_url`, into `folder`; answers the dump's path."""
    said = await run_commands(section_commands("Backup"), folder, database_url)
    assert "pg_dump" in said, f"pg_tools printed no pg_dump: {said!r}"
    dump = folder / "orchestrator.dump"
    assert dump.stat().st_size > 0
    return dump


async def restore(database_url: str, folder: Path, name: str, restored_url: str) -> str:
    """The page's restore of `folder`'s dump into a new database `name` (at `restored_url`) on the server of
    `database_url`: its first block, up to its checks after (run by the tests that need them); answers what it
    printed (`orchestrator restored`'s lines)."""
    steps = [line.replace(RESTORED_NAME, name) for line in section_blocks("Restore")[0]]
    assert [c.split()[0] for c in steps] == ["psql", "pg_restore", "orchestrator"], steps
    assert steps[-1].startswith("orchestrator restored ") and "--temporal-only" not in steps[-1], steps
    said = await run_commands(steps, folder, database_url, restored_url)
    assert "event ids    the next was" in said, said
    return said


async def mark_schedules_after_temporal_restore(database_url: str, folder: Path) -> str:
    """The page's command for a Temporal restored empty with PostgreSQL kept, on the database at `database_url`;
    answers what it printed."""
    [step] = [line for block in section_blocks("Restore") for line in block if "--temporal-only" in line]
    assert step.startswith("orchestrator restored "), step
    return await run_commands([step], folder, database_url)


def running_query() -> str:
    """The page's query, after a restore, of the runs the records still call running."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index("\n### Restore\n")
    [query] = re.findall(r"```sql\n(.*?)```", text[start : text.index("\n### Upgrade\n")], flags=re.S)
    return str(query).strip()
