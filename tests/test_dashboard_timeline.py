"""The dashboard draws time, in Chromium: a session's runs on a time axis, and its events per second and each
lane's pending count over the last hour.

A session with a few hundred runs that end every way a run can (`tests/busy_session.py`): the timeline draws one
bar per run `list_executions` answers, with that run's status, a waiting run marked with its wait, and a dashed
backoff before each repeat; the events chart counts every event of the session, and the pending chart has the
page's samples. The page is open while the session fills, as someone watching it would have it. With
`ORCHESTRATOR_SCREENSHOTS` set to a folder, the timeline is pictured there (docs/dashboard-timeline.png).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from temporalio.testing import WorkflowEnvironment

from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform
from tests import test_dashboard
from tests.busy_session import WORKFLOWS, executions, make_busy
from tests.engine.harness import Engine, running_engine

pytestmark = [test_dashboard.pytestmark, pytest.mark.timeout(420)]
browser = test_dashboard.browser
until = test_dashboard.until


@pytest.fixture
async def busy_page(platform: Platform, temporal_env: WorkflowEnvironment) -> AsyncIterator[tuple[Engine, str]]:
    # A listener fires more than 120 times a minute here, the default throttle.
    limits = platform.settings.limits.model_copy(update={"listener_fires_per_minute": 100_000})
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping, "limits": limits}
    )
    async with contextlib.AsyncExitStack() as stack:
        engine = await stack.enter_async_context(running_engine(platform, temporal_env.client, workflows=WORKFLOWS))
        url = await stack.enter_async_context(serve_api(create_app(platform, platform.settings), "127.0.0.1", 0))
        yield engine, url


# Every bar of the timeline, read in one step inside the page: its run, status, retry and wait.
BARS = """return [...document.querySelectorAll('#runs-timeline rect.run')].map((r) => [r.dataset.execution,
  r.dataset.status, r.dataset.retry, r.dataset.waiting || null, r.querySelector('title').textContent]);"""


# A click on an SVG node, as a pointer's (an SVG element has no `click()`): the id it opens.
CLICK = """const n = document.querySelector(arguments[0]);
n.dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true})); return n.dataset.id;"""


def _drawn(browser: WebDriver, runs: list[dict[str, Any]]) -> list[list[Any]] | None:
    """The bars, once there is one per run and each shows its run's status; None until then."""
    bars: list[list[Any]] = browser.execute_script(BARS)
    statuses = {e["id"]: e["status"] for e in runs}
    if len(bars) != len(runs) or any(statuses.get(b[0]) != b[1] for b in bars):
        return None
    return bars


async def test_the_timeline_draws_each_run_by_how_it_ended_and_the_session_s_pace(
    busy_page: tuple[Engine, str], browser: WebDriver
) -> None:
    engine, url = busy_page
    sid = str((await engine.command("open_session", alias="busy"))["session"]["id"])
    await asyncio.to_thread(browser.get, f"{url}/?session={sid}")
    await until(lambda: browser.find_element(By.ID, "connection").text == "live", "the page live")
    await make_busy(engine, sid)
    runs = await executions(engine, sid)
    assert len(runs) >= 200, len(runs)
    by_status = Counter(e["status"] for e in runs)
    assert {"completed", "failed", "cancelled", "stopped", "running"} <= set(by_status), by_status

    bars = await until(lambda: _drawn(browser, runs), "a bar per run, with its status", within=60)
    assert len({b[0] for b in bars}) == len(runs), "one bar per run"
    waiting = {e["id"]: e["waiting"]["seq"] for e in runs if "waiting" in e}
    assert len(waiting) == 8
    assert {b[0]: int(b[3]) for b in bars if b[3] is not None} == waiting, "the waiting runs marked"
    tips = {b[0]: b[4] for b in bars}
    for e in runs:
        assert f"retry {e['batch']['retry']}" in tips[e["id"]], tips[e["id"]]
        assert f"batch of {e['batch']['count']} event" in tips[e["id"]]
        if e["error"]:
            assert e["error"] in tips[e["id"]]
        if e["id"] in waiting:
            assert "waits (wait" in tips[e["id"]] and "thread.item_posted on chats/" in tips[e["id"]]
    # A repeat's backoff is a dashed line between two attempts of one run key, one per repeat.
    repeats = sorted(e["id"].rsplit(".", 1)[0] for e in runs if e["batch"]["retry"] > 0)
    backoffs = await asyncio.to_thread(
        browser.execute_script,
        "return [...document.querySelectorAll('#runs-timeline line.backoff')].map((l) => l.dataset.backoff)",
    )
    assert sorted(backoffs) == repeats
    groups = await asyncio.to_thread(
        browser.execute_script,
        "return [...document.querySelectorAll('#runs-timeline g.runs-group')].map((g) => g.dataset.listener)",
    )
    listed = (await engine.command("list_session_listeners", session_id=sid))["listeners"]
    assert groups == [li["name"] for li in listed], "a group per listener, in the order the page lists them"

    # A bar opens its batch's first event, what caused it and what it caused.
    failed = next(e for e in runs if e["status"] == "failed")
    clicked = await asyncio.to_thread(browser.execute_script, CLICK, f'rect.run[data-execution="{failed["id"]}"]')
    assert clicked == str(failed["batch"]["first_id"])
    title = await until(lambda: browser.find_element(By.ID, "detail-title").text, "the event opened")
    assert title.startswith(f"event {failed['batch']['first_id']}: object.written jobs/"), title

    # The events chart counts every event of the session (all in the last hour); the pending chart was sampled.
    total = await _events_in(engine, sid)
    counted = await until(
        lambda: (n := _attribute(browser, "#rates-events svg.rate", "data-counted")) == total and n,
        "every event counted",
    )
    assert counted == total
    assert await asyncio.to_thread(_attribute, browser, "#rates-events path.area.events", "d")
    assert int(await asyncio.to_thread(_attribute, browser, "#rates-pending svg.pending", "data-samples")) > 3
    assert await asyncio.to_thread(_attribute, browser, "#rates-pending path.area.total", "d")
    lanes = await asyncio.to_thread(
        browser.execute_script,
        "return [...document.querySelectorAll('#rates-pending path.line')].map((p) => p.dataset.lane)",
    )
    assert lanes and all(lane.startswith(("jobs ", "digest ")) for lane in lanes), lanes

    if folder := os.environ.get("ORCHESTRATOR_SCREENSHOTS"):
        await asyncio.to_thread(browser.find_element(By.ID, "detail-close").click)
        await asyncio.to_thread(_element_shot, browser, "timeline-panel", Path(folder) / "dashboard-timeline.png")


async def _events_in(engine: Engine, sid: str) -> int:
    count, after = 0, 0
    while events := (await engine.command("list_session_events", session_id=sid, after=after, limit=1000))["events"]:
        count, after = count + len(events), events[-1]["id"]
    return count


def _element_shot(browser: WebDriver, element_id: str, path: Path) -> None:
    """A screenshot of one element whole, below the window's edge too (Chromium's own capture)."""
    assert isinstance(browser, webdriver.Chrome)
    box = browser.execute_script(
        "const r = document.getElementById(arguments[0]).getBoundingClientRect();"
        " return [r.left + scrollX, r.top + scrollY, r.width, r.height];",
        element_id,
    )
    clip = {"x": box[0], "y": box[1], "width": box[2], "height": box[3], "scale": 1}
    shot = browser.execute_cdp_cmd("Page.captureScreenshot", {"captureBeyondViewport": True, "clip": clip})
    path.write_bytes(base64.b64decode(shot["data"]))


def _attribute(browser: WebDriver, css: str, name: str) -> Any:
    value = browser.execute_script(
        "const n = document.querySelector(arguments[0]); return n && n.getAttribute(arguments[1]);", css, name
    )
    return int(value) if name.startswith("data-") and value is not None else value


dashboard = test_dashboard.dashboard


async def test_the_pace_of_a_session_longer_than_the_page_reads_back_is_its_newest_events(
    dashboard: tuple[Engine, str], browser: WebDriver
) -> None:
    """A session that holds more than the page reads back when it opens (5,000 events) is drawn from its newest
    events, none hatched as skipped: the oldest read and the rest skipped would leave the last minutes blank."""
    engine, url = dashboard
    sid = str((await engine.command("open_session", alias="long"))["session"]["id"])
    for n in range(6):
        objects = [{"alias": f"notes/{n}/{i}", "value": {"type": "note"}} for i in range(1000)]
        await engine.command("write_objects", session_id=sid, objects=objects)
        if n == 0:
            await asyncio.sleep(1.5)  # the oldest page a second and more before the newest five

    await asyncio.to_thread(browser.get, f"{url}/?session={sid}")
    counted = await until(
        lambda: _attribute(browser, "#rates-events svg.rate", "data-counted"), "the session's events counted"
    )

    assert int(counted) == 5000
    skipped = await asyncio.to_thread(browser.find_elements, By.CSS_SELECTOR, "#rates-events rect.not-read")
    assert skipped == [], "nothing was written faster than the page reads"
    note = await asyncio.to_thread(lambda: browser.find_element(By.ID, "rates-events").text)
    assert "held more than the page reads back" in note
