"""Every test has a bound: a hang fails that one test, with a dump of where it hung, and the run goes on.

Two layers, one number (the `timeout` marker's, else the ini's `timeout`). An async test runs under
`asyncio.timeout` of that number less ASYNC_MARGIN_SECONDS: when it expires, the await chain of every task
is put in the failure and the test's task is cancelled, which leaves the event loop that the session's
fixtures share in order. pytest-timeout (its signal method) bounds everything else at the full number:
sync tests, and fixtures' set-up and teardown.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
from collections.abc import Callable, Coroutine, Sequence
from types import FrameType
from typing import Any

import pytest

# Left to the async layer's own failure (the cancellation, the fixtures' teardown) before pytest-timeout acts.
ASYNC_MARGIN_SECONDS = 20.0


def test_seconds(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    return float(item.config.getini("timeout") or 0)


def await_chain(task: asyncio.Task[Any]) -> list[str]:
    """Where a task waits: the frame of its coroutine and of each one it awaits, outermost first."""
    lines = []
    awaited: Any = task.get_coro()
    while awaited is not None:
        frame: FrameType | None = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        if frame is not None:
            lines.append(f'  File "{frame.f_code.co_filename}", line {frame.f_lineno}, in {frame.f_code.co_name}')
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
    return lines


def tasks_dump() -> str:
    parts = []
    for task in sorted(asyncio.all_tasks(), key=lambda t: t.get_name()):
        if task is asyncio.current_task():
            continue
        parts.append(f"task {task.get_name()}:\n" + "\n".join(await_chain(task) or ["  (no frame)"]))
    return "\n".join(parts)


def bounded(test: Callable[..., Coroutine[Any, Any, Any]], seconds: float) -> Callable[..., Any]:
    @functools.wraps(test)
    async def run(*args: Any, **kwargs: Any) -> Any:
        inner = asyncio.ensure_future(test(*args, **kwargs))
        done, _ = await asyncio.wait([inner], timeout=seconds)
        if inner in done:
            return inner.result()
        dump = tasks_dump()
        inner.cancel()
        await asyncio.wait([inner], timeout=5)
        pytest.fail(f"the test took more than {seconds:g} s; where every task waited:\n{dump}", pytrace=False)

    return run


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    seconds = test_seconds(item)
    if not seconds or not isinstance(item, pytest.Function):
        return
    test = item.obj
    if inspect.iscoroutinefunction(test) and not hasattr(test, "hypothesis"):
        item.obj = bounded(test, max(seconds - ASYNC_MARGIN_SECONDS, seconds / 2))


# How long a fixture may take to stop what it started (a server, a worker) before the run goes on without it.
STOP_SECONDS = 30.0


async def stop_within(stop: Coroutine[Any, Any, Any], what: str, seconds: float = STOP_SECONDS) -> None:
    """Await a fixture's stop for at most `seconds`: a server that will not stop costs this long, not the run."""
    task = asyncio.ensure_future(stop)
    done, _ = await asyncio.wait([task], timeout=seconds)
    if task in done:
        task.result()
        return
    task.cancel()
    sys.stderr.write(f"{what} did not stop within {seconds:g} s; going on without it:\n{tasks_dump()}\n")


async def cancel_within(tasks: Sequence[asyncio.Task[Any]], what: str, seconds: float = STOP_SECONDS) -> None:
    """Cancel a fixture's tasks and wait for them for at most `seconds`: a task that will not end (a worker's
    run waiting out an activity that ignores its cancellation) costs this long, not the test's teardown."""
    for task in tasks:
        task.cancel()
    if not tasks:
        return
    _, pending = await asyncio.wait(tasks, timeout=seconds)
    if pending:
        sys.stderr.write(f"{what} did not end within {seconds:g} s; going on without them:\n{tasks_dump()}\n")
