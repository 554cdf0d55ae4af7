"""A test that hangs fails alone, with where it hung, and the tests after it still run (tests/timeouts.py).

The suite's own plugin runs in a pytest of its own over three tests: an async one and a sync one that sleep
past a short bound, and one that passes after them.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HANGING = """
import asyncio
import time


async def test_async_sleeps_past_its_bound():
    await asyncio.sleep(600)


def test_sync_sleeps_past_its_bound():
    time.sleep(600)


async def test_after_them_still_runs():
    await asyncio.sleep(0)
"""


async def test_a_test_that_sleeps_past_its_timeout_fails_alone_with_its_stack(tmp_path: Path) -> None:
    (tmp_path / "test_hanging.py").write_text(HANGING)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "tests.timeouts",
        "-p",
        "no:cacheprovider",
        "-o",
        "timeout=4",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        "--rootdir",
        str(tmp_path),
        str(tmp_path / "test_hanging.py"),
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 120)
    output = out.decode()
    assert process.returncode == 1, output
    assert "2 failed, 1 passed" in output, output
    # Each failure says where its test waited.
    assert "the test took more than 2 s; where every task waited" in output, output
    assert 'test_hanging.py", line 7, in test_async_sleeps_past_its_bound' in output, output
    assert "Timeout (>4.0s) from pytest-timeout" in output, output
    assert "time.sleep(600)" in output, output
