"""The dashboard at `/`, in a real browser: Debian's headless Chromium, driven by Selenium and chromedriver.

One test opens a session's page, sees its listener's lane and a write appear without a reload, and follows an
execution's link into the Temporal UI. Another works in the page: it opens on the newest open session, shows
each listener's declaration and a failed run's error beside its outcome, opens an object and an event (what
caused it, what it caused), and writes, posts, emits, pauses, resumes, replays and simulates from the page.
Others stop the API under the open page (it follows the stream again by itself), and sign in with keys: no
secret in any URL, writes as the key and only what it may. Nodes that a live refresh may replace are read and
clicked in one step inside the page (`_click`, `_text`).
`scripts/test` installs Debian's `chromium` and `chromium-driver` when they are missing; nothing downloads a browser.
Set `ORCHESTRATOR_SCREENSHOTS` to a folder to keep the docs' pictures of a settled page (docs/dashboard*.png).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import logging
import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from temporalio.testing import WorkflowEnvironment

from orchestrator.dev.embedded import free_port
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform
from tests.engine.harness import Engine, eventually, lane_state, recorder_listener, running_engine

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

    # A schedule's cron is shown with its zone: its next firings beside it are UTC.
    await engine.command(
        "create_schedule",
        session_id=sid,
        alias="mornings",
        repeat={"type": "recurring_cron", "cron_expression": "0 9 * * *", "timezone": "Asia/Kolkata"},
        invocation_target_type="object",
        target={"alias": "ops/morning", "value": {"type": "text", "text": "tick"}},
    )
    await until(
        lambda: "0 9 * * * (Asia/Kolkata)" in browser.find_element(By.ID, "schedules").text,
        "the schedule with its zone",
    )

    execution = await until(lambda: _click_first_execution(browser), "an execution's link, followed")
    assert execution.startswith(f"exe:{sid}:orchestrate:")
    await until(lambda: len(browser.window_handles) > 1, "the execution opened in the Temporal UI")
    await asyncio.to_thread(browser.switch_to.window, browser.window_handles[-1])
    assert "/temporal-ui/namespaces/default/workflows/" in browser.current_url
    assert "orchestrate" in browser.current_url
    await asyncio.to_thread(browser.switch_to.window, browser.window_handles[0])


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
    # Stopped: the stream's last message told the page, which waits for the platform to come back; its next
    # refresh finds no answer at all and says so, in words (not the browser's "Failed to fetch").
    await until(lambda: "reconnecting" in browser.find_element(By.ID, "connection").text, "the page reconnecting")
    await until(lambda: "does not answer" in browser.find_element(By.ID, "connection").text, "the page saying why")
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
            "return [location.href, dashboard.stream.url,"
            " ...performance.getEntriesByType('resource').map((e) => e.name)]",
        )

    streams = [u for u in opened if "/stream?" in u]
    assert streams and all("ticket=" in u and "access_token" not in u for u in streams), opened
    for kept_out in (secret, session_cookie["value"]):
        assert not [u for u in opened if kept_out in u], "a secret in a URL the page opened"
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name == "orchestrator.access")
    assert "key=viewer" in logged and "ticket=***" in logged
    assert secret not in logged and session_cookie["value"] not in logged


async def test_a_key_that_cannot_listen_is_told_so_not_left_reconnecting(
    platform: Platform, browser: WebDriver
) -> None:
    async with guarded_page(platform, browser, "reader", ["read:**", "listeners"], "quiet") as page:
        await asyncio.to_thread(page.field.send_keys, page.secret + "\n")
        await until(lambda: "signed in as reader" in browser.find_element(By.ID, "who").text, "signed in")
        said = await until(
            lambda: "cannot listen" in (text := browser.find_element(By.ID, "connection").text) and text,
            "the page saying the key cannot listen",
        )
        assert "access_denied" in said and "reconnecting" not in said, said


async def test_signed_out_the_page_shows_nothing_of_the_session_and_keeps_saying_why(
    platform: Platform, browser: WebDriver
) -> None:
    """A wrong key's refusal stays on the page (nothing refreshes over it while no key is signed in), and once
    signed out nothing of the session stays on screen."""
    async with guarded_page(platform, browser, "watcher", ["read:**", "listen:**"], "watched") as page:
        await asyncio.to_thread(page.field.send_keys, "ork_not-a-key\n")
        await until(lambda: "not valid" in browser.find_element(By.ID, "connection").text, "the wrong key refused")
        await asyncio.sleep(3)  # past a refresh's 2 s
        assert "not valid" in browser.find_element(By.ID, "connection").text, "nothing said over the refusal"

        await asyncio.to_thread(page.field.send_keys, page.secret + "\n")
        await until(lambda: "signed in as watcher" in browser.find_element(By.ID, "who").text, "signed in")
        await until(lambda: _visible(browser, "session"), "the session shown")
        await until(lambda: "watched" in browser.find_element(By.ID, "sessions").text, "the sessions listed")
        await asyncio.to_thread(browser.find_element(By.ID, "sign-out").click)
        await until(lambda: browser.find_element(By.ID, "connection").text == "signed out", "signed out")
        await asyncio.sleep(3)

        assert not _visible(browser, "session"), "nothing of the session stays on screen"
        assert browser.find_element(By.ID, "sessions").text == ""
        assert browser.find_element(By.ID, "connection").text == "signed out"


# Holds `list_sessions` back until `__release()`: its answer (`arguments[0]` "after", the request answered already)
# or its request itself ("before", sent only then): a refresh in flight at a sign-out.
HOLD_LISTS = """
const when = arguments[0];
window.__held = [];
window.__release = () => { window.__hold = false; for (const go of window.__held.splice(0)) go(); };
window.__hold = true;
const fetched = window.__fetched || window.fetch;
window.__fetched = fetched;
window.fetch = async (url, options) => {
  const held = window.__hold && options && String(options.body || "").includes('"list_sessions"');
  if (held && when === "before") await new Promise((go) => window.__held.push(go));
  const response = await fetched(url, options);
  if (held && when === "after") await new Promise((go) => window.__held.push(go));
  return response;
};
"""


async def test_a_refresh_in_flight_at_the_sign_out_shows_nothing_and_says_nothing_over_it(
    platform: Platform, browser: WebDriver
) -> None:
    """A refresh asked before the sign-out and answered after it: its sessions are not listed, and the refusal of
    what it asks next does not replace "signed out" (it did: the suite saw the page say the refusal instead)."""
    async with guarded_page(platform, browser, "watcher", ["read:**", "listen:**"], "watched") as page:
        await asyncio.to_thread(page.field.send_keys, page.secret + "\n")
        await until(lambda: _visible(browser, "session"), "the session shown")
        await until(lambda: "watched" in browser.find_element(By.ID, "sessions").text, "the sessions listed")
        await asyncio.to_thread(browser.execute_script, HOLD_LISTS, "after")
        await until(lambda: browser.execute_script("return window.__held.length") > 0, "a refresh held")
        await asyncio.to_thread(browser.find_element(By.ID, "sign-out").click)
        await until(lambda: browser.find_element(By.ID, "connection").text == "signed out", "signed out")
        await asyncio.to_thread(browser.execute_script, "window.__release()")
        await asyncio.sleep(3)  # the held refresh goes on, and a refresh's 2 s pass
        assert browser.find_element(By.ID, "connection").text == "signed out"
        assert browser.find_element(By.ID, "sessions").text == "", "the held answer listed no session"
        assert not _visible(browser, "session")

        # Signed in again while a refresh asked before the sign-out is held (its request sent only after both):
        # its refusal, with the old browser session's token, does not sign the new one out.
        await asyncio.to_thread(page.field.send_keys, page.secret + "\n")
        await until(lambda: "watched" in browser.find_element(By.ID, "sessions").text, "the sessions listed")
        await asyncio.to_thread(browser.execute_script, HOLD_LISTS, "before")
        await until(lambda: browser.execute_script("return window.__held.length") > 0, "a refresh held")
        await asyncio.to_thread(browser.find_element(By.ID, "sign-out").click)
        await until(lambda: browser.find_element(By.ID, "connection").text == "signed out", "signed out again")
        await asyncio.to_thread(page.field.send_keys, page.secret + "\n")
        await until(lambda: "signed in as watcher" in browser.find_element(By.ID, "who").text, "signed in again")
        await asyncio.to_thread(browser.execute_script, "window.__release()")
        await asyncio.sleep(3)
        assert "signed in as watcher" in browser.find_element(By.ID, "who").text, "still signed in"
        assert "watched" in browser.find_element(By.ID, "sessions").text
        assert _visible(browser, "session")


async def test_the_page_opens_on_a_sessions_newest_events_and_says_a_session_is_not_there(
    dashboard: tuple[Engine, str], browser: WebDriver
) -> None:
    """Event ids are one sequence for all sessions: another session's writes do not shorten this one's recent
    events. An address naming no session says so, once."""
    engine, url = dashboard
    sid = str((await engine.command("open_session", alias="mine"))["session"]["id"])
    other = str((await engine.command("open_session", alias="busy"))["session"]["id"])
    mine = []
    for n in range(60):
        for session in (sid, other):
            body = {"session_id": session, "alias": f"notes/{n}", "value": {"type": "note"}}
            reply = await engine.command("write_object", **body)
            if session == sid:
                mine.append(int(reply["event_id"]))

    await asyncio.to_thread(browser.get, f"{url}/?session={sid}")
    shown = await until(
        lambda: (
            len(
                ids := [
                    int(n.get_attribute("data-event") or 0)
                    for n in browser.find_elements(By.CSS_SELECTOR, "#stream [data-event]")
                ]
            )
            >= 50
            and ids
        ),
        "the session's newest events in the stream",
    )
    assert sorted(shown) == mine[-50:], "its own 50 newest, however busy the others"

    # A session chosen on the page is a step Back returns from.
    await until(lambda: _click(browser, f'#sessions [data-session="{other}"]'), "the other session listed")
    await until(lambda: f"session={other}" in browser.current_url, "the address on the other session")
    await asyncio.to_thread(browser.back)
    await until(lambda: f"session={sid}" in browser.current_url, "back on the first")
    await until(lambda: "mine" in browser.find_element(By.ID, "session-title").text, "the first session shown again")

    await asyncio.to_thread(browser.get, f"{url}/?session=ses_nowhere")
    said = await until(
        lambda: "no session ses_nowhere" in (t := browser.find_element(By.ID, "connection").text) and t, "not there"
    )
    assert not _visible(browser, "session"), said


@dataclasses.dataclass
class GuardedPage:
    """A page of an API that needs a key, opened on its sign-in form: where it is served, the session it opened
    on, a key made with the scopes asked for, and the form's key field."""

    url: str
    session_id: str
    secret: str
    field: Any


@contextlib.asynccontextmanager
async def guarded_page(
    platform: Platform, browser: WebDriver, key: str, scopes: list[str], alias: str, *, on_session: bool = True
) -> AsyncIterator[GuardedPage]:
    """An API guarded by a bootstrap token nobody types, a key `key` with `scopes`, a session at `alias`, and the
    page opened on it (or on `/`), showing its sign-in form."""
    made = await platform.command({"command": "create_api_key", "name": key, "scopes": scopes})
    sid = str((await platform.command({"command": "open_session", "alias": alias}))["session"]["id"])
    guarded = platform.settings.model_copy(update={"api_token": SecretStr("a-bootstrap-token-never-typed")})
    async with serve_api(create_app(platform, guarded), "127.0.0.1", 0) as url:
        await asyncio.to_thread(browser.get, f"{url}/?session={sid}" if on_session else f"{url}/")
        field = await until(lambda: _visible(browser, "key"), "the sign-in form")
        yield GuardedPage(url, sid, made["key"]["secret"], field)


def _visible(browser: WebDriver, element_id: str) -> Any:
    found = browser.find_element(By.ID, element_id)
    return found if found.is_displayed() else None


def _click(browser: WebDriver, css: str) -> str | None:
    """Finds and clicks a node in one step inside the page (a live refresh cannot replace it in between): its
    text, or None when there is none yet."""
    script = "const n = document.querySelector(arguments[0]); if (!n) return null; n.click(); return n.textContent;"
    found = browser.execute_script(script, css)
    return None if found is None else str(found)


def _text(browser: WebDriver, css: str) -> str:
    """The text of every node `css` finds, read in one step inside the page."""
    script = "return [...document.querySelectorAll(arguments[0])].map((n) => n.textContent).join('\\n');"
    return str(browser.execute_script(script, css))


def _fill(browser: WebDriver, form: str, **fields: str) -> None:
    """Types into a form's fields as a user would (the forms are never replaced by a refresh), and submits it."""
    for name, value in fields.items():
        field = browser.find_element(By.CSS_SELECTOR, f'#{form} [name="{name}"]')
        if field.tag_name == "select":
            browser.execute_script("arguments[0].value = arguments[1]", field, value)
            continue
        field.clear()
        field.send_keys(value)
    # The form's earlier answer is wiped first: the click's handler may run after `click` returns, and a stale
    # answer read then would pass for this submission's.
    wipe = "const out = arguments[0]; out.textContent = ''; out.classList.remove('ok', 'error');"
    browser.execute_script(wipe, browser.find_element(By.CSS_SELECTOR, f"#{form} .result"))
    browser.find_element(By.CSS_SELECTOR, f"#{form} button[type=submit]").click()


FAILING = {"type": "workflow", "workflow": "recorder", "input": {"fail": True, "events": "{{ batch.messages }}"}}


async def test_the_dashboard_is_a_place_to_work(dashboard: tuple[Engine, str], browser: WebDriver) -> None:
    """Opened at `/`, the page shows the newest open session: each listener's declaration, an outcome beside
    its run's own failure, objects that open, and an event followed through what caused it and what it caused;
    from the page, an object is written, a thread item posted, an event emitted, a listener paused and resumed,
    and a batch replayed, each through the commands."""
    engine, url = dashboard
    await engine.command("save_event_type", name="ops.note", schema={"type": "object"})
    await engine.command("save_listener", listener=recorder_listener(batch={"window_seconds": 0.2}))
    triage = {
        "name": "triage",
        "filter": {
            "types": ["thread.item_posted"],
            "aliases": ["chats/**"],
            "where": [{"path": "item.role", "op": "eq", "value": "request"}],
        },
        "concurrency": {"mode": "keyed", "key": "alias"},
        "batch": {"max_events": 1},
        "action": FAILING,
    }
    await engine.command("save_listener", listener=triage)
    await engine.command("open_session", alias="yesterday")
    sid = str((await engine.command("open_session", alias="today"))["session"]["id"])
    closed = str((await engine.command("open_session", alias="archived"))["session"]["id"])
    await engine.command("close_session", session_id=closed)
    wrote = await engine.command("write_object", session_id=sid, alias="missions/1", value={"type": "m", "n": 1})
    request = {"type": "text", "role": "request", "message": "the printer is on fire"}
    asked = await engine.command("post_thread_item", session_id=sid, alias="chats/1", item=request)
    await eventually(lambda: _runs_ended(engine, sid, 2), what="both runs ended")

    async with httpx.AsyncClient(base_url=url) as http:
        # The page and its modules are revalidated on each load: never a cached module beside a newer one.
        for path in ("/", "/dashboard/dashboard.js", "/dashboard/actions.js", "/dashboard/dashboard.css"):
            assert (await http.get(path)).headers["cache-control"] == "no-cache", path

    await asyncio.to_thread(browser.get, f"{url}/")
    # The newest open session (not the newer closed one), and each listener's declaration.
    await until(lambda: "today" in browser.find_element(By.ID, "session-title").text, "the newest open session")
    assert f"session={sid}" in browser.current_url, "the address names the session shown"
    filters = await until(lambda: _text(browser, '[data-listener="triage"] dd.filter'), "triage's filter")
    assert filters == 'types thread.item_posted; aliases chats/**; where item.role eq "request"'
    declared = await asyncio.to_thread(_text, browser, '[data-listener="triage"] dd')
    assert "keyed by alias" in declared and "up to 1 events" in declared and "workflow recorder" in declared
    assert "missions/**" in await asyncio.to_thread(_text, browser, '[data-listener="orchestrate"] dd.filter')
    # An outcome `success` whose run failed says so, with the run's error.
    outcome = await until(lambda: _text(browser, '[data-listener="triage"] .outcomes tr[data-outcome]'), "an outcome")
    assert "success" in outcome and "run failed: asked to fail" in outcome, outcome

    # An object opens whole.
    await until(lambda: _click(browser, '#objects [data-open="object"][data-id="missions/1"]'), "missions/1 listed")
    value = await until(lambda: _text(browser, "#detail:not([hidden]) .object-value"), "the object opened")
    assert '"n": 1' in value
    await until(lambda: _click(browser, "#detail-close"), "the detail closed")

    # Written from the page: an object, a thread item, an application event.
    await until(lambda: _click(browser, "#write-object summary"), "the object form")
    await asyncio.to_thread(_fill, browser, "object-form", alias="missions/2", value='{"type": "m", "n": 2}')
    said = await until(lambda: _text(browser, "#object-result.ok"), "the write's answer")
    assert said.startswith("wrote missions/2, rev 1")
    read = await engine.command("read_object", session_id=sid, alias="missions/2")
    assert read["object"]["value"] == {"type": "m", "n": 2}
    await until(lambda: browser.find_elements(By.CSS_SELECTOR, '#objects [data-object="missions/2"]'), "it is listed")
    # Opened for editing, the write is guarded by the rev it was read at: a write in between is a conflict.
    await until(lambda: _click(browser, '#objects [data-open="object"][data-id="missions/2"]'), "missions/2 listed")
    await until(lambda: _text(browser, "#detail-title") == "object missions/2", "missions/2 opened")
    await until(lambda: _click(browser, '#detail [data-act="edit-object"]'), "edit in the form")
    await asyncio.to_thread(_fill, browser, "object-form", value='{"type": "m", "n": 22}')
    assert "rev 2" in await until(lambda: _text(browser, "#object-result.ok"), "the edit's answer")
    await engine.command("write_object", session_id=sid, alias="missions/2", value={"type": "m", "n": 23})
    await asyncio.to_thread(_fill, browser, "object-form", value='{"type": "m", "n": 24}')
    assert (await until(lambda: _text(browser, "#object-result.error"), "refused")).startswith("rev_conflict: ")
    read = await engine.command("read_object", session_id=sid, alias="missions/2")
    assert read["object"]["value"] == {"type": "m", "n": 23}
    await until(lambda: _click(browser, "#post-item summary"), "the item form")
    await asyncio.to_thread(_fill, browser, "item-form", alias="chats/2", role="request", message="and the fax")
    assert "posted item" in await until(lambda: _text(browser, "#item-result.ok"), "the post's answer")
    items = (await engine.command("list_thread_items", session_id=sid, alias="chats/2"))["items"]
    assert [i["message"] for i in items] == ["and the fax"]
    await until(lambda: _click(browser, "#emit-event summary"), "the emit form")
    await asyncio.to_thread(_fill, browser, "emit-form", type="ops.note", data='{"text": "hello"}')
    assert "emitted ops.note" in await until(lambda: _text(browser, "#emit-result.ok"), "the emit's answer")
    notes = await engine.command("list_session_events", session_id=sid, types=["ops.note"])
    assert [e["data"] for e in notes["events"]] == [{"text": "hello"}]

    # Paused from the page, a listener's lane waits; resumed, it fires. The writes above are taken first (on a
    # loaded machine the lane may still hold one): what waits after the pause is the one write made during it.
    async def taken() -> bool:
        return (await lane_state(engine, sid, "orchestrate"))["pending"] == 0

    await eventually(taken, what="orchestrate's lane to take the writes made before the pause")
    orchestrate = '[data-listener="orchestrate"]'
    await until(lambda: _click(browser, f'{orchestrate} [data-act="pause"]'), "the pause button")
    await until(lambda: browser.find_elements(By.CSS_SELECTOR, f'{orchestrate}[data-paused="yes"]'), "paused")
    assert await _paused(engine, sid, "orchestrate")
    waiting = await engine.command("write_object", session_id=sid, alias="missions/3", value={"type": "m", "n": 3})
    lane = f'{orchestrate} [data-lane="_"]'
    await until(lambda: "paused" in _text(browser, f"{lane} .lane-why"), "the lane waiting, paused")
    assert await asyncio.to_thread(_text, browser, f"{lane} .pending") == "1"
    await until(lambda: _click(browser, f'{orchestrate} [data-act="resume"]'), "the resume button")
    await until(lambda: browser.find_elements(By.CSS_SELECTOR, f'{orchestrate}[data-paused="no"]'), "resumed")
    assert not await _paused(engine, sid, "orchestrate")
    await until(lambda: _outcome_of(browser, "orchestrate", waiting["event_id"]), "the waiting batch fired")

    # A batch replayed from the page.
    replay = f'{orchestrate} [data-act="replay"][data-batch="{wrote["event_id"]}"]'
    await until(lambda: _click(browser, replay), "the replay button")
    await until(lambda: "Click Replay again to confirm" in _text(browser, "#notice"), "the replay's question")
    replays = await engine.command("list_session_events", session_id=sid, types=["listener.replayed"])
    assert replays["events"] == [], "one click only asks"
    await until(lambda: _click(browser, replay), "the replay button, again")
    await until(lambda: "replay of orchestrate's batch" in _text(browser, "#notice.ok"), "the replay's answer")
    replayed = await engine.command("list_session_events", session_id=sid, types=["listener.replayed"])
    assert [e["data"]["batch"] for e in replayed["events"]] == [wrote["event_id"]]

    # One event, followed through what caused it and what it caused.
    await until(lambda: _click(browser, f'#stream [data-open="event"][data-id="{wrote["event_id"]}"]'), "the event")
    caused = await until(lambda: _text(browser, "#detail:not([hidden]) ul.caused"), "what the write caused")
    assert "batch of orchestrate" in caused and "execution.started" in caused
    assert "the outside request" in await asyncio.to_thread(_text, browser, "#detail ol.caused-by")
    started = await asyncio.to_thread(
        lambda: browser.execute_script(
            "return document.querySelector('#detail ul.caused [data-open=event]').dataset.id"
        )
    )
    caused_event = f'#detail ul.caused [data-open="event"][data-id="{started}"]'
    await until(lambda: _click(browser, caused_event), "a caused event")
    await until(lambda: _text(browser, "#detail-title").startswith(f"event {started}:"), "the caused event opened")
    back = await asyncio.to_thread(_text, browser, "#detail ol.caused-by")
    assert f"event {wrote['event_id']}" in back and "batch of orchestrate" in back, back

    # A body tried on the session's stream, drawn as a timeline: a mark per batch it would have cut.
    await until(lambda: _click(browser, "#detail-close"), "the detail closed")
    await until(lambda: _click(browser, '[data-listener="triage"] [data-act="try"]'), "triage tried")
    await until(lambda: _click(browser, "#simulate-form button[type=submit]"), "simulated")
    said = await until(lambda: _text(browser, "#simulate-result.ok"), "the simulation's answer")
    simulated = await engine.command("simulate_listener", session_id=sid, listener=triage)
    assert said.startswith(f"{len(simulated['batches'])} batches"), said
    lanes = await asyncio.to_thread(_text, browser, "#timeline .tl-lane")
    assert lanes.split("\n") == ["chats/1", "chats/2"]
    assert len(await asyncio.to_thread(browser.find_elements, By.CSS_SELECTOR, "#timeline .tl-mark")) == 2

    if folder := os.environ.get("ORCHESTRATOR_SCREENSHOTS"):
        # The event pictured: a request whose run failed, and what it caused.
        await _screenshots(engine, browser, sid, Path(folder), asked["event_id"])


async def _runs_ended(engine: Engine, session_id: str, count: int) -> bool:
    executions = (await engine.command("list_executions", session_id=session_id))["executions"]
    return len(executions) >= count and all(e["status"] != "running" for e in executions)


async def _paused(engine: Engine, session_id: str, name: str) -> bool:
    listeners = (await engine.command("list_session_listeners", session_id=session_id))["listeners"]
    return bool(next(li for li in listeners if li["name"] == name)["paused"])


def _whole_page(browser: WebDriver, path: Path) -> None:
    """A screenshot of the whole page, below the window's edge too (Chromium's own capture)."""
    assert isinstance(browser, webdriver.Chrome)
    size = browser.execute_script("return [window.innerWidth, document.documentElement.scrollHeight]")
    clip = {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1}
    shot = browser.execute_cdp_cmd("Page.captureScreenshot", {"captureBeyondViewport": True, "clip": clip})
    path.write_bytes(base64.b64decode(shot["data"]))


def _outcome_of(browser: WebDriver, listener: str, first_id: int) -> bool:
    rows = _text(browser, f'[data-listener="{listener}"] .outcomes tr[data-outcome^="{first_id}."]')
    return "success" in rows


async def _screenshots(engine: Engine, browser: WebDriver, session_id: str, folder: Path, event_id: int) -> None:
    """The pictures for the docs, of a settled page: every run ended and shown, every lane idle."""
    await eventually(lambda: _runs_ended(engine, session_id, 5), what="every run ended")
    for summary in ("#write-object", "#post-item", "#emit-event", "#simulate-panel"):
        await asyncio.to_thread(browser.execute_script, f"document.querySelector('{summary}').open = false")

    def settled() -> bool:
        why = _text(browser, ".lane-why").split("\n")
        running = _text(browser, "#executions .run-state")
        return all(w == "idle" for w in why) and "running" not in running

    await until(settled, "the page settled")
    await asyncio.to_thread(browser.execute_script, "window.scrollTo(0, 0)")
    await asyncio.to_thread(_whole_page, browser, folder / "dashboard.png")
    await until(lambda: _click(browser, '#objects [data-open="object"][data-id="missions/2"]'), "an object")
    await until(lambda: _text(browser, "#detail:not([hidden]) .object-value"), "the object opened")
    await asyncio.to_thread(browser.save_screenshot, str(folder / "dashboard-object.png"))
    await until(lambda: _click(browser, f'#stream [data-open="event"][data-id="{event_id}"]'), "an event")
    await until(lambda: _text(browser, "#detail:not([hidden]) ul.caused"), "the event opened")
    await asyncio.to_thread(browser.save_screenshot, str(folder / "dashboard-event.png"))
    await until(lambda: _click(browser, "#detail-close"), "the detail closed")
    await until(lambda: _click(browser, '[data-listener="orchestrate"] [data-act="try"]'), "orchestrate tried")
    await until(lambda: _click(browser, "#simulate-form button[type=submit]"), "simulated")
    await until(lambda: _text(browser, "#simulate-result.ok"), "the simulation drawn")
    panel = await asyncio.to_thread(browser.find_element, By.ID, "simulate-panel")
    await asyncio.to_thread(panel.screenshot, str(folder / "dashboard-simulate.png"))


async def test_the_dashboard_writes_as_the_signed_in_key_and_only_what_it_may(
    platform: Platform, browser: WebDriver
) -> None:
    """Signed in with a key that may write `missions/**`: the page's write goes through as that key (its cookie
    and the CSRF token the platform requires of it), and a write outside the key's scopes is refused on the
    page with the platform's `access_denied`, writing nothing."""
    scopes = ["read:**", "listen:**", "write:**:missions/**"]
    async with guarded_page(platform, browser, "editor", scopes, "edited", on_session=False) as page:
        sid = page.session_id
        await asyncio.to_thread(page.field.send_keys, page.secret + "\n")
        await until(lambda: "edited" in browser.find_element(By.ID, "session-title").text, "the session, signed in")
        await until(lambda: _click(browser, "#write-object summary"), "the object form")
        await asyncio.to_thread(_fill, browser, "object-form", alias="missions/9", value='{"type": "m"}')
        assert "wrote missions/9, rev 1" in await until(lambda: _text(browser, "#object-result.ok"), "written")
        await asyncio.to_thread(_fill, browser, "object-form", alias="secrets/1", value='{"type": "m"}', if_rev="")
        refused = await until(lambda: _text(browser, "#object-result.error"), "refused")
        assert refused.startswith("access_denied: "), refused
        # The same command from the page's origin without the CSRF token: the cookie alone does not do.
        status = await asyncio.to_thread(
            browser.execute_async_script,
            "const done = arguments[arguments.length - 1];"
            "fetch('/v1/commands', {method: 'POST', headers: {'content-type': 'application/json'},"
            f" body: JSON.stringify({{command: 'write_object', session_id: '{sid}', alias: 'missions/10',"
            " value: {type: 'm'}})}).then((r) => done(r.status));",
        )
        assert status == 403

    events = (await platform.command({"command": "list_session_events", "session_id": sid}))["events"]
    assert [(e["alias"], e["actor"]) for e in events] == [("missions/9", {"key": "editor"})]


async def test_a_platform_with_no_session_says_so_and_shows_the_first_one_opened(
    dashboard: tuple[Engine, str], browser: WebDriver
) -> None:
    """Connected to a platform that holds no session, the page says there is none yet, not `connecting…` for
    ever; the first session opened shows without a reload."""
    engine, url = dashboard
    await asyncio.to_thread(browser.get, f"{url}/")

    said = await until(lambda: "no session yet" in (t := browser.find_element(By.ID, "connection").text) and t, "none")
    assert "open_session" in said
    assert not _visible(browser, "session")

    sid = str((await engine.command("open_session", alias="first"))["session"]["id"])
    await until(lambda: "first" in browser.find_element(By.ID, "session-title").text, "the first session shown")
    assert f"session={sid}" in browser.current_url


async def test_an_address_naming_an_id_no_session_can_have_says_so_and_stops_asking(
    dashboard: tuple[Engine, str], browser: WebDriver
) -> None:
    """An id past what a session id can be (a paste with more to it) is refused as `invalid_request` naming
    `session_id`, not `not_found`: the page showed an empty session saying `stream reconnecting…` and asked again
    every 2 s for ever."""
    _, url = dashboard
    await asyncio.to_thread(browser.get, f"{url}/?session={'ses_' + 'x' * 70}")

    said = await until(
        lambda: "no session ses_x" in (t := browser.find_element(By.ID, "connection").text) and t, "told so"
    )
    assert "session_id" in said
    await asyncio.sleep(3)  # a refresh or a stream's retry would say something else by now
    assert "no session ses_x" in await asyncio.to_thread(lambda: browser.find_element(By.ID, "connection").text)
    assert not _visible(browser, "session")


async def test_a_keyed_listener_of_many_lanes_lists_a_screenful_and_counts_the_rest(
    dashboard: tuple[Engine, str], browser: WebDriver
) -> None:
    """A lane per key: a card listed every lane, 400 idle ones 11,000 pixels tall, pushing the rest of the page
    away. It lists those with something to say first, twenty in all, and counts the others."""
    engine, url = dashboard
    per_key = {
        "name": "per-key",
        "filter": {"types": ["object.written"], "aliases": ["k/*"]},
        "concurrency": {"mode": "keyed", "key": "alias"},
        "batch": {"window_seconds": 0},
        "action": {"type": "object", "alias": "out/last", "value": {"type": "t"}},
    }
    await engine.command("save_listener", listener=per_key)
    sid = str((await engine.command("open_session", alias="keys"))["session"]["id"])
    for n in range(30):
        await engine.command("write_object", session_id=sid, alias=f"k/{n}", value={"type": "t"})

    async def all_done() -> bool:
        [listener] = [
            item
            for item in (await engine.command("list_session_listeners", session_id=sid))["listeners"]
            if item["name"] == "per-key"
        ]
        return len(listener["lanes"]) == 30 and not any(lane["pending"] for lane in listener["lanes"])

    await eventually(all_done, what="thirty lanes, each done")
    await asyncio.to_thread(browser.get, f"{url}/?session={sid}")

    said = await until(lambda: _text(browser, '[data-listener="per-key"] .more-lanes'), "the lanes not listed counted")
    assert said == "10 more lanes, idle"
    assert (
        len(await asyncio.to_thread(browser.find_elements, By.CSS_SELECTOR, '[data-listener="per-key"] [data-lane]'))
        == 20
    )


async def test_a_lane_s_window_closes_at_a_time_of_day_like_every_time_on_the_page(
    dashboard: tuple[Engine, str], browser: WebDriver
) -> None:
    """Why a lane waits is the platform's text, its times shown as the page shows every time: the time of day,
    the whole instant on hover."""
    engine, url = dashboard
    held = {
        "name": "held",
        "filter": {"types": ["object.written"], "aliases": ["h/*"]},
        "batch": {"window_seconds": 300},
        "action": {"type": "object", "alias": "out/held", "value": {"type": "t"}},
    }
    await engine.command("save_listener", listener=held)
    sid = str((await engine.command("open_session", alias="held"))["session"]["id"])
    await engine.command("write_object", session_id=sid, alias="h/1", value={"type": "t"})
    await asyncio.to_thread(browser.get, f"{url}/?session={sid}")

    why = '[data-listener="held"] [data-lane="_"] .lane-why'
    said = await until(lambda: (text := _text(browser, why)).startswith("window open until") and text, "the window")
    until_iso = (await lane_state(engine, sid, "held"))["waiting"]["until"]
    assert said == f"window open until {until_iso[11:19]}", said
    shown = await asyncio.to_thread(browser.find_element, By.CSS_SELECTOR, f"{why} time")
    assert await asyncio.to_thread(shown.get_attribute, "title") == until_iso


async def test_a_session_older_than_the_listed_ones_shows_its_alias_and_its_last_events(
    dashboard: tuple[Engine, str], browser: WebDriver
) -> None:
    """The list holds the newest 50 sessions; an older one opened by its address is read by its id
    (`get_session`): it showed no alias in its title and an empty stream, the page knowing a session's alias and
    end only from that list."""
    engine, url = dashboard
    sid = str((await engine.command("open_session", alias="the-old-one"))["session"]["id"])
    await engine.command("write_object", session_id=sid, alias="notes/kept", value={"type": "t"})
    for n in range(51):
        await engine.command("open_session", alias=f"newer/{n}")
    listed = (await engine.command("list_sessions", limit=50))["sessions"]
    assert sid not in {s["id"] for s in listed}

    await asyncio.to_thread(browser.get, f"{url}/?session={sid}")
    await until(lambda: "the-old-one" in browser.find_element(By.ID, "session-title").text, "its alias in the title")
    await until(lambda: "notes/kept" in browser.find_element(By.ID, "stream").text, "its last event in the stream")
