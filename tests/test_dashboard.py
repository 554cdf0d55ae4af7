"""The dashboard at `/`, in a real browser: Debian's headless Chromium, driven by Selenium and chromedriver.

The test opens the page on a session, sees its listener's lane, writes an event through the API and sees it
appear on the page without a reload, and follows an execution's link into the Temporal UI. Another stops the
API under the open page and starts it again: the page follows the stream again by itself, missing nothing.
A third signs in with a key on an API that needs one, and finds no secret in any URL the page opened.
`scripts/test` installs Debian's `chromium` and `chromium-driver` when they are missing; nothing downloads a browser.
Set `ORCHESTRATOR_SCREENSHOT` to a path to keep a screenshot of the page (docs/dashboard.png is one).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from temporalio.testing import WorkflowEnvironment

from orchestrator.api import create_app
from orchestrator.embedded import free_port
from orchestrator.platform import Platform
from orchestrator.runtime import serve_api
from tests.engine.harness import Engine, eventually, recorder_listener, running_engine

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

pytestmark = pytest.mark.skipif(
    not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()),
    reason="Debian's chromium and chromium-driver are not installed (scripts/test installs them)",
)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1400,1000",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
async def dashboard(platform: Platform, temporal_env: WorkflowEnvironment) -> AsyncIterator[tuple[Engine, str]]:
    platform.settings = platform.settings.model_copy(
        update={"search_attributes": not temporal_env.supports_time_skipping}
    )
    async with contextlib.AsyncExitStack() as stack:
        engine = await stack.enter_async_context(running_engine(platform, temporal_env.client))
        url = await stack.enter_async_context(serve_api(create_app(platform, platform.settings), "127.0.0.1", 0))
        # The Temporal UI's links point at a server that answers: following one shows the execution's id in the
        # address, whatever the page says.
        ui = platform.settings.model_copy(update={"temporal_ui_url": f"{url}/temporal-ui"})
        page_url = await stack.enter_async_context(serve_api(create_app(platform, ui), "127.0.0.1", 0))
        yield engine, page_url


async def until(driver_check: Callable[[], Any], what: str, within: float = 30.0) -> Any:
    found: list[Any] = []

    async def check() -> bool:
        value = await asyncio.to_thread(driver_check)
        found[:] = [value]
        return bool(value)

    await eventually(check, within=within, what=what)
    return found[0]


async def test_the_dashboard_shows_lanes_and_the_live_stream_and_links_to_executions(
    dashboard: tuple[Engine, str], browser: WebDriver
) -> None:
    engine, url = dashboard
    await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 0.2}))
    sid = str((await engine.command("open_session", alias="watched"))["session"]["id"])
    first = await engine.command("write_object", session_id=sid, alias="missions/1", value={"type": "m"})
    await eventually(lambda: _ran(engine, first["event_id"]), what="the first run")

    await asyncio.to_thread(browser.get, f"{url}/?session={sid}")
    await until(
        lambda: browser.find_elements(By.CSS_SELECTOR, '[data-listener="orchestrate"] [data-lane="_"]'),
        "the listener's lane on the page",
    )
    assert "watched" in await asyncio.to_thread(lambda: browser.find_element(By.ID, "sessions").text)
    marker = await asyncio.to_thread(browser.execute_script, "window.notReloaded = 1; return window.notReloaded;")
    assert marker == 1

    written = await engine.command("write_object", session_id=sid, alias="missions/2", value={"type": "m"})
    await until(
        lambda: browser.find_elements(By.CSS_SELECTOR, f'#stream [data-event="{written["event_id"]}"]'),
        "the new event in the live stream",
    )
    assert await asyncio.to_thread(browser.execute_script, "return window.notReloaded;") == 1, "never reloaded"

    execution = await until(lambda: _click_first_execution(browser), "an execution's link, followed")
    assert execution.startswith(f"exe:{sid}:orchestrate:")
    await until(lambda: len(browser.window_handles) > 1, "the execution opened in the Temporal UI")
    await asyncio.to_thread(browser.switch_to.window, browser.window_handles[-1])
    assert "/temporal-ui/namespaces/default/workflows/" in browser.current_url
    assert "orchestrate" in browser.current_url
    await asyncio.to_thread(browser.switch_to.window, browser.window_handles[0])
    if screenshot := os.environ.get("ORCHESTRATOR_SCREENSHOT"):
        # The picture for the docs: once the second run has shown up on the page by itself and its lane is idle.
        await until(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#executions tbody tr")) >= 2, "a 2nd run")
        await until(lambda: "idle" in browser.find_element(By.CSS_SELECTOR, ".lane-why").text, "the lane idle")
        await asyncio.to_thread(browser.save_screenshot, screenshot)


def _click_first_execution(browser: WebDriver) -> str | None:
    """Reads and clicks the newest execution's link; None when there is none yet or a refresh replaced it
    between the two (the page refreshes live, and a run that starts or ends changes the list)."""
    try:
        links = browser.find_elements(By.CSS_SELECTOR, "#executions a.execution-link")
        if not links:
            return None
        text = str(links[0].text)
        links[0].click()
        return text
    except StaleElementReferenceException:
        return None


async def _ran(engine: Engine, event_id: int) -> bool:
    return event_id in engine.log.event_ids()


async def test_the_dashboard_follows_the_stream_again_once_the_platform_is_back(
    platform: Platform, browser: WebDriver
) -> None:
    port = free_port()
    sid = str((await platform.command({"command": "open_session", "alias": "restarted"}))["session"]["id"])

    async def write(alias: str) -> int:
        body = {"command": "write_object", "session_id": sid, "alias": alias, "value": {"type": "m"}}
        return int((await platform.command(body))["event_id"])

    def shown(event_id: int) -> Callable[[], Any]:
        return lambda: browser.find_elements(By.CSS_SELECTOR, f'#stream [data-event="{event_id}"]')

    async with serve_api(create_app(platform, platform.settings), "127.0.0.1", port) as url:
        await asyncio.to_thread(browser.get, f"{url}/?session={sid}")
        await until(lambda: browser.find_element(By.ID, "connection").text == "live", "the page live")
        before = await write("missions/1")
        await until(shown(before), "an event in the live stream")
    # Stopped: the stream's last message told the page, which waits for the platform to come back.
    await until(lambda: "reconnecting" in browser.find_element(By.ID, "connection").text, "the page reconnecting")
    meanwhile = await write("missions/2")
    async with serve_api(create_app(platform, platform.settings), "127.0.0.1", port):
        after = await write("missions/3")
        await until(shown(after), "an event written after the restart")
        assert await asyncio.to_thread(shown(meanwhile)), "the event written while the API was down"


async def test_the_dashboard_signs_in_with_a_key_and_never_puts_a_secret_in_a_url(
    platform: Platform, browser: WebDriver, caplog: pytest.LogCaptureFixture
) -> None:
    """A key typed into the page once: the browser holds an HttpOnly cookie the page's script cannot read, the
    stream opens with single-use tickets, and neither the key nor the cookie is in any URL it opens or in the
    access log; a reload stays signed in."""
    caplog.set_level(logging.INFO, logger="orchestrator.access")
    made = await platform.command(
        {"command": "create_api_key", "name": "viewer", "scopes": ["read:**", "listen:**", "listeners"]}
    )
    secret = made["key"]["secret"]
    sid = str((await platform.command({"command": "open_session", "alias": "signed"}))["session"]["id"])
    guarded = platform.settings.model_copy(update={"api_token": SecretStr("a-bootstrap-token-never-typed")})

    def shown(event_id: int) -> Callable[[], Any]:
        return lambda: browser.find_elements(By.CSS_SELECTOR, f'#stream [data-event="{event_id}"]')

    async def write(alias: str) -> int:
        body = {"command": "write_object", "session_id": sid, "alias": alias, "value": {"type": "m"}}
        return int((await platform.command(body))["event_id"])

    async with serve_api(create_app(platform, guarded), "127.0.0.1", 0) as url:
        await asyncio.to_thread(browser.get, f"{url}/?session={sid}")
        field = await until(lambda: _visible(browser, "key"), "the sign-in form")
        await asyncio.to_thread(field.send_keys, secret + "\n")
        await until(lambda: "signed in as viewer" in browser.find_element(By.ID, "who").text, "signed in")
        await until(lambda: "signed" in browser.find_element(By.ID, "sessions").text, "the sessions listed")
        first = await write("missions/1")
        event = await until(shown(first), "an event in the live stream, opened with a ticket")
        assert "by key local" in event[0].text, "the stream shows who did it"

        cookies = {c["name"]: c for c in await asyncio.to_thread(browser.get_cookies)}
        session_cookie = cookies["orchestrator_session"]
        assert session_cookie["httpOnly"] and session_cookie["sameSite"] == "Strict"
        assert "orchestrator_session" not in await asyncio.to_thread(browser.execute_script, "return document.cookie")

        # A reload stays signed in by the cookie alone, and follows the stream again with a fresh ticket.
        await asyncio.to_thread(browser.get, f"{url}/?session={sid}")
        await until(lambda: "signed in as viewer" in browser.find_element(By.ID, "who").text, "still signed in")
        await until(lambda: browser.find_element(By.ID, "connection").text == "live", "the page live again")
        second = await write("missions/2")
        await until(shown(second), "an event after the reload")
        # Every URL the page opened: its own, its resources and requests, and its stream's (an EventSource is
        # in the resource timings only once it ends, so the page's `stream` is asked).
        opened: list[str] = await asyncio.to_thread(
            browser.execute_script,
            "return [location.href, stream.url, ...performance.getEntriesByType('resource').map((e) => e.name)]",
        )

    streams = [u for u in opened if "/stream?" in u]
    assert streams and all("ticket=" in u and "access_token" not in u for u in streams), opened
    for kept_out in (secret, session_cookie["value"]):
        assert not [u for u in opened if kept_out in u], "a secret in a URL the page opened"
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name == "orchestrator.access")
    assert "key=viewer" in logged and "ticket=***" in logged
    assert secret not in logged and session_cookie["value"] not in logged


def _visible(browser: WebDriver, element_id: str) -> Any:
    found = browser.find_element(By.ID, element_id)
    return found if found.is_displayed() else None
