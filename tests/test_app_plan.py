"""An app's declarations applied as a plan: added, changed, removed (only what the app declared), and an app
with an invalid declaration refused whole, naming the field, with nothing applied."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from temporalio import workflow

from orchestrator.app_loader import AppLoadError, UserApp, load_app
from orchestrator.core.plan import Step, changes
from orchestrator.dev.app_plan import InvalidApp, _no_news, apply, plan_of
from orchestrator.dev.embedded import start_postgres
from orchestrator.platform import Platform

CLI = str(Path(sys.executable).parent / "orchestrator")
ROOT = Path(__file__).resolve().parents[1]


def listener(name: str, window: float = 1.0, types: list[str] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "filter": {"types": types or ["object.written"]},
        "batch": {"window_seconds": window},
        "action": {"type": "workflow", "workflow": "w"},
    }


SHIPPED = {"name": "shipment.delayed", "schema": {"type": "object"}}


def app(*listeners: dict[str, Any], types: tuple[dict[str, Any], ...] = (SHIPPED,)) -> UserApp:
    return UserApp(name="tests.plan_app", listeners=list(listeners), event_types=list(types))


async def lines(platform: Platform, declared: UserApp) -> list[str]:
    return [step.line() for step in changes(await plan_of(platform, declared))]


async def test_a_plan_adds_changes_and_removes_what_the_app_declared_and_then_is_empty(platform: Platform) -> None:
    said: list[str] = []
    first = app(listener("a"), listener("b"), listener("c", types=["shipment.*"]))
    assert await lines(platform, first) == [
        "add     event type shipment.delayed",
        "add     listener a",
        "add     listener b",
        "add     listener c",
    ]
    await apply(platform, first, said.append)
    assert await lines(platform, first) == [], "applied, the same app plans nothing"
    # A listener a person saved through the commands is nobody's app's: never removed by one.
    await platform.command({"command": "save_listener", "listener": listener("by-hand")})

    second = app(listener("a"), listener("b", window=2.0), listener("d"))
    assert await lines(platform, second) == ["change  listener b", "add     listener d", "remove  listener c"]
    await apply(platform, second, said.append)
    assert await lines(platform, second) == []
    names = {found["name"] for found in (await platform.command({"command": "list_listeners"}))["listeners"]}
    assert names == {"a", "b", "d", "by-hand"}
    assert "plan         remove  listener c" in said


async def test_replicas_starting_with_the_same_app_remove_what_it_dropped_once_and_neither_fails(
    platform: Platform,
) -> None:
    """Three worker replicas start with the app's new version at once: each plans the removal of a listener and
    an event type the app dropped; the first to apply removes them, the others find them gone, and go on."""
    await apply(platform, app(listener("a"), listener("gone", types=["shipment.*"])), lambda _: None)
    newer = app(listener("a"), types=())
    planned = [await plan_of(platform, newer) for _ in range(3)]
    assert all(any(step.action == "remove" for step in steps) for steps in planned)
    await asyncio.gather(*(apply(platform, newer, lambda _: None) for _ in range(3)))
    names = {found["name"] for found in (await platform.command({"command": "list_listeners"}))["listeners"]}
    assert names == {"a"}
    declared = (await platform.command({"command": "list_event_types"}))["event_types"]
    assert "shipment.delayed" not in {found["name"] for found in declared}


async def test_an_app_with_an_invalid_declaration_is_refused_whole_naming_the_field(platform: Platform) -> None:
    typo = {**listener("b"), "batch": {"max_event": 10}}
    with pytest.raises(InvalidApp) as refused:
        await apply(platform, app(listener("a"), typo), lambda _: None)
    assert "listeners.1 (b): listener.batch.max_event" in str(refused.value)
    assert (await platform.command({"command": "list_listeners"}))["listeners"] == [], "nothing was applied"
    with pytest.raises(InvalidApp, match=r"did you mean 'shipment\.delayed'"):
        await apply(platform, app(listener("a", types=["shipment.delayd"])), lambda _: None)
    # Each kind of declaration is checked, whichever else fails: a bad listener and a bad schedule both named.
    clock = {
        "session_alias": "ops",
        "alias": "clock",
        "repeat": {"type": "interval", "every_seconds": 0},
        "invocation_target_type": "object",
        "target": {"alias": "ops/clock", "value": {"type": "tick"}},
    }
    both = UserApp(name="tests.plan_app", listeners=[typo], event_types=[SHIPPED], schedules=[clock])
    with pytest.raises(InvalidApp) as refused:
        await apply(platform, both, lambda _: None)
    assert "listeners.0 (b)" in str(refused.value) and "schedules.0.repeat.every_seconds" in str(refused.value)
    # Every field a schedule's refusal names is named under the schedule's place, not only the first.
    misspelt = {**clock, "repeat": {"type": "interval", "every_second": 60}}
    with pytest.raises(InvalidApp) as refused:
        await apply(platform, UserApp(name="tests.plan_app", schedules=[misspelt]), lambda _: None)
    assert "schedules.0.repeat.every_seconds: is required" in str(refused.value)
    assert "; schedules.0.repeat.every_second: is not known" in str(refused.value)
    # A schedule's session: by its alias, named as the field at fault whatever is wrong with it.
    for session, words in (
        ({"session_alias": "bad alias"}, "schedules.0.session_alias: alias segments may hold only"),
        ({"session_alias": None}, "schedules.0.session_alias: is required"),
        ({"session_id": "ses_1"}, "schedules.0.session_id: is not known"),
    ):
        hourly = {**clock, "repeat": {"type": "interval", "every_seconds": 60}, **session}
        placed = UserApp(name="tests.plan_app", schedules=[hourly])
        with pytest.raises(InvalidApp, match=words):
            await apply(platform, placed, lambda _: None)
    # A null session_id says nothing, as a null says nothing elsewhere.
    unset = {**clock, "repeat": {"type": "interval", "every_seconds": 60}, "session_id": None}
    planned = await plan_of(platform, UserApp(name="tests.plan_app", schedules=[unset]))
    assert [step.line() for step in changes(planned)] == ["add     schedule clock in ops"]


async def test_an_app_that_stops_declaring_a_type_a_listener_still_names_is_refused_and_nothing_changes(
    platform: Platform,
) -> None:
    """Removing a type the app declared is `delete_event_type`'s removal: refused while a listener (a person's, or
    the app's own) would then match no type, naming both; once the listener lets go, the type goes."""
    await apply(platform, app(), lambda _: None)
    by_hand = listener("by-hand", types=["shipment.delayed"])
    await platform.command({"command": "save_listener", "listener": by_hand})

    with pytest.raises(InvalidApp) as refused:
        await apply(platform, app(types=()), lambda _: None)
    said = str(refused.value)
    assert "'shipment.delayed' of listener 'by-hand' (filter.types.0)" in said, said
    assert "no longer declares 'shipment.delayed'" in said, said
    types = (await platform.command({"command": "list_event_types"}))["event_types"]
    assert [t["name"] for t in types] == ["shipment.delayed"], "nothing was removed"
    with pytest.raises(InvalidApp, match="listener 'own'"):
        await plan_of(platform, app(listener("own", types=["shipment.*"]), types=()))

    await platform.command({"command": "delete_listener", "name": "by-hand"})
    await apply(platform, app(types=()), lambda _: None)
    assert (await platform.command({"command": "list_event_types"}))["event_types"] == []


async def test_an_apps_new_schema_is_held_to_the_listeners_it_would_leave_never_firing(platform: Platform) -> None:
    """As `save_event_type` refuses it: a schema the app narrows is refused while another's listener reads what it no
    longer holds, naming it; the app's own listener changed in the same plan is held to the new schema alone, so
    the type and its listener change together."""
    closed = {"type": "object", "properties": {"delay": {"type": "integer"}}, "additionalProperties": False}
    reads = [{"path": "data.delay", "op": "gt", "value": 1}]
    own = {**listener("own", types=["shipment.delayed"]), "filter": {"types": ["shipment.delayed"], "where": reads}}
    typed = {**SHIPPED, "schema": closed}
    await apply(platform, app(own, types=(typed,)), lambda _: None)
    narrowed = {**SHIPPED, "schema": {**closed, "properties": {"hours": {"type": "integer"}}}}
    moved = {**own, "filter": {"types": ["shipment.delayed"], "where": [{**reads[0], "path": "data.hours"}]}}
    by_hand = {**own, "name": "by-hand"}
    await platform.command({"command": "save_listener", "listener": by_hand})

    with pytest.raises(InvalidApp) as refused:
        await apply(platform, app(moved, types=(narrowed,)), lambda _: None)
    assert "listener 'by-hand' (listener.filter.where.0.path:" in str(refused.value), str(refused.value)
    kept = (await platform.command({"command": "get_event_type", "name": "shipment.delayed"}))["event_type"]
    assert kept["schema"] == closed, "nothing was applied"

    await platform.command({"command": "delete_listener", "name": "by-hand"})
    await apply(platform, app(moved, types=(narrowed,)), lambda _: None)
    kept = (await platform.command({"command": "get_event_type", "name": "shipment.delayed"}))["event_type"]
    assert kept["schema"] == narrowed["schema"]


async def test_an_app_that_declares_a_name_twice_is_refused_naming_the_second(platform: Platform) -> None:
    schedule = {
        "session_alias": "ops",
        "alias": "clock",
        "repeat": {"type": "interval", "every_seconds": 60},
        "invocation_target_type": "object",
        "target": {"alias": "ops/clock", "value": {"type": "tick"}},
    }
    twice = UserApp(
        name="tests.plan_app",
        listeners=[listener("a"), listener("b"), listener("a", window=2.0)],
        event_types=[SHIPPED, SHIPPED],
        schedules=[schedule, {**schedule, "session_alias": "other"}, schedule],
    )
    with pytest.raises(InvalidApp) as refused:
        await apply(platform, twice, lambda _: None)

    said = str(refused.value)
    assert "event_types.1.name: 'shipment.delayed' is declared twice (first as event_types.0)" in said
    assert "listeners.2.name: 'a' is declared twice (first as listeners.0)" in said
    assert "schedules.2.alias: 'clock' is declared twice (first as schedules.0)" in said
    assert "schedules.1" not in said, "one alias in two sessions is two schedules"
    assert (await platform.command({"command": "list_listeners"}))["listeners"] == [], "nothing was applied"
    # A name that is no string is its own validation's to refuse, not a crash of the comparison.
    with pytest.raises(InvalidApp, match=r"listeners\.1 \(\['a'\]\)"):
        await apply(platform, app(listener("a"), {**listener("b"), "name": ["a"]}), lambda _: None)


@workflow.defn(name="ticker")
class Ticker:
    @workflow.run
    async def run(self) -> None:
        return None


def test_only_a_warning_that_no_worker_has_the_apps_own_workflow_yet_is_no_news() -> None:
    """The plan is applied before the app's worker runs: that its own workflow is not registered yet is no news,
    for a listener's action and a schedule's target alike; any other warning, or another's workflow, is said."""
    own = UserApp(name="tests.plan_app", workflows=[Ticker])
    unregistered = "no worker has registered 'ticker' in the last 5 minutes; ..."
    schedule = Step("schedule", "ops/tick", "add", {"target": {"workflow": "ticker"}})
    listener_step = Step("listener", "l", "add", {"action": {"type": "workflow", "workflow": "ticker"}})
    others = Step("schedule", "ops/tock", "add", {"target": {"workflow": "tocker"}})

    assert _no_news(own, schedule, "target.workflow: " + unregistered)
    assert _no_news(own, listener_step, "listener.action.workflow: " + unregistered)
    assert not _no_news(own, others, "target.workflow: no worker has registered 'tocker' ...")
    assert not _no_news(own, listener_step, "listener.throttle: lets more batches start a minute than ...")


PLANNED_APP = (
    "workflows = []\n"
    "listeners = [{'name': 'p', 'filter': {'types': ['object.written']},"
    " 'action': {'type': 'workflow', 'workflow': 'w'}}]\n"
)


def test_orchestrator_plan_prints_the_plan_and_refuses_an_invalid_app(fresh_db: str, tmp_path: Path) -> None:
    module = tmp_path / "planned_app.py"
    module.write_text(PLANNED_APP)
    env = {**os.environ, "ORCHESTRATOR_DATABASE_URL": fresh_db}
    shown = subprocess.run([CLI, "plan", "--app", str(module)], env=env, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    # A workflow neither the app nor any worker runs: said now, as the start would say it (the plan said nothing).
    added, warned = shown.stdout.splitlines()
    assert added == "add     listener p"
    assert warned.startswith("warning listener p: listener.action.workflow: no worker has registered 'w'"), warned
    module.write_text(module.read_text().replace("'types'", "'typez'"))
    refused = subprocess.run([CLI, "plan", "--app", str(module)], env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert "listeners.0 (p): listener.filter.typez" in refused.stderr


async def test_an_apps_captured_tables_are_planned_with_its_listeners(platform: Platform, fresh_db: str) -> None:
    """A capture the app declares is added before the listener that names its types, changed when its body
    changes, and removed (its trigger gone) when the app no longer declares it; a table that does not exist yet
    refuses the app whole."""
    capture = {"table": "tickets", "type_prefix": "desk", "session_column": "session"}
    on_desk = listener("desk", types=["desk.*"])
    missing = UserApp(name="tests.plan_app", captures=[capture], listeners=[on_desk])
    with pytest.raises(InvalidApp, match=r"captures\.0\.table: no table 'public\.tickets'"):
        await apply(platform, missing, lambda _: None)
    assert (await platform.command({"command": "list_listeners"}))["listeners"] == [], "nothing was applied"

    conn = await asyncpg.connect(fresh_db)
    try:
        await conn.execute("CREATE TABLE tickets (id int PRIMARY KEY, sesion text, secret text)")
        # A column the capture names and the table lacks refuses the app whole, before anything is applied.
        with pytest.raises(InvalidApp, match=r"captures\.0\.session_column: 'public\.tickets' has no column 'session'"):
            await apply(platform, missing, lambda _: None)
        assert (await platform.command({"command": "list_captures"}))["captures"] == []
        assert not await conn.fetchval("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'tickets'::regclass")
        await conn.execute("ALTER TABLE tickets RENAME COLUMN sesion TO session")
        assert await lines(platform, missing) == ["add     capture public.tickets", "add     listener desk"]
        await apply(platform, missing, lambda _: None)
        assert await lines(platform, missing) == []
        private = UserApp(name="tests.plan_app", captures=[{**capture, "exclude": ["secret"]}], listeners=[on_desk])
        assert await lines(platform, private) == ["change  capture public.tickets"]
        await apply(platform, private, lambda _: None)
        [held] = (await platform.command({"command": "list_captures"}))["captures"]
        assert held["exclude"] == ["secret"]

        await apply(platform, UserApp(name="tests.plan_app"), lambda _: None)
        assert (await platform.command({"command": "list_captures"}))["captures"] == []
        triggers = await conn.fetchval("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'tickets'::regclass")
        assert triggers == 0
    finally:
        await conn.close()


@workflow.defn(name="w")
class W:
    @workflow.run
    async def run(self) -> None:
        return None


async def test_a_listener_of_the_apps_own_workflow_is_applied_without_a_warning(platform: Platform) -> None:
    """The plan is applied before the app's worker registers its workflows: a warning that none has is no news
    for the app's own, and still said for another's."""
    said: list[str] = []
    own = UserApp(
        name="tests.plan_app",
        workflows=[W],
        listeners=[listener("mine"), {**listener("theirs"), "action": {"type": "workflow", "workflow": "elsewhere"}}],
    )
    await apply(platform, own, said.append)
    warnings = [line for line in said if line.startswith("warning")]
    assert len(warnings) == 1 and "listener theirs" in warnings[0] and "'elsewhere'" in warnings[0], said


def test_the_tutorials_app_plans_as_the_page_says(fresh_db: str, tmp_path: Path) -> None:
    """docs/tutorial.md step 12: its module, planned by `orchestrator plan`, prints the lines the page shows, and a
    typo in it is refused naming the field."""
    page = (Path(__file__).parents[1] / "docs" / "tutorial.md").read_text(encoding="utf-8")
    step = page.split("## 12.", 1)[1]
    code = step.split("```python\n", 1)[1].split("```", 1)[0]
    shown = step.split("would do, and changes nothing:\n\n```\n", 1)[1].split("```", 1)[0]
    module = tmp_path / "tutorial_app.py"
    module.write_text(code)
    env = {**os.environ, "ORCHESTRATOR_DATABASE_URL": fresh_db}
    planned = subprocess.run([CLI, "plan", "--app", str(module)], env=env, capture_output=True, text=True, timeout=60)
    assert planned.returncode == 0, planned.stderr
    assert planned.stdout.splitlines() == shown.splitlines()
    module.write_text(code.replace('"window_seconds": 2', '"window_seconds": 2, "max_event": 10'))
    refused = subprocess.run([CLI, "plan", "--app", str(module)], env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "listener.batch.max_event" in refused.stderr, refused.stderr


async def test_orchestrator_plan_of_an_app_whose_migrate_has_not_run_says_what_it_would_do_and_changes_nothing(
    fresh_db: str, platform: Platform
) -> None:
    """The desk's table is made by its `migrate`, which a plan does not run: the capture is planned all the same,
    a note says the table is to come, and neither the table nor anything of the app's is made."""
    env = {**os.environ, "ORCHESTRATOR_DATABASE_URL": fresh_db}
    command = [CLI, "plan", "--app", "examples.desk.app"]
    run = functools.partial(subprocess.run, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    shown = await asyncio.to_thread(run, command)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        "add     event type ticket.escalated",
        "add     capture public.tickets",
        "add     listener desk",
        "note    no table public.tickets yet: the app's migrate makes it when `dev` or a worker starts"
        " (plan does not run migrate)",
    ]
    assert not await platform.store.table_exists("public.tickets"), "plan ran the app's migrate"
    for listing, key in (("list_listeners", "listeners"), ("list_captures", "captures")):
        assert (await platform.command({"command": listing}))[key] == [], listing


async def test_orchestrator_plan_reads_the_database_of_the_dev_running_in_dot_orchestrator(tmp_path: Path) -> None:
    """As `status` finds a running `dev` by its default address, `plan` finds its embedded PostgreSQL in the
    data folder (`./.orchestrator` unless `--data-dir` or ORCHESTRATOR_DATA_DIR says another), no URL exported."""
    (tmp_path / "planned_app.py").write_text(PLANNED_APP)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}

    def plan(*args: str) -> subprocess.CompletedProcess[str]:
        command = [CLI, "plan", "--app", "planned_app.py", *args]
        return subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)

    def local(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [CLI, *args, "--local"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
        )

    postgres = await start_postgres(tmp_path / ".orchestrator")
    try:
        shown = await asyncio.to_thread(plan)
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.splitlines()[0] == "add     listener p"
        # So do the in-process doors of `call`, `status`, `events` and `keys` (`--local`).
        called = await asyncio.to_thread(local, "call", '{"command": "list_listeners"}')
        assert (called.returncode, json.loads(called.stdout)) == (0, {"status": "success", "listeners": []}), called
        listed = await asyncio.to_thread(local, "keys", "list")
        assert listed.returncode == 0, listed.stderr
    finally:
        await postgres.stop()
    elsewhere = await start_postgres(tmp_path / "elsewhere")
    try:
        shown = await asyncio.to_thread(plan, "--data-dir", "elsewhere")
        assert shown.stdout.splitlines()[0] == "add     listener p", shown.stderr
    finally:
        await elsewhere.stop()

    refused = await asyncio.to_thread(plan)
    assert refused.returncode == 2
    assert "set ORCHESTRATOR_DATABASE_URL, or start `orchestrator dev`" in refused.stderr
    assert "no embedded PostgreSQL runs in .orchestrator/postgres" in refused.stderr
    alone = await asyncio.to_thread(local, "call", '{"command": "list_listeners"}')
    assert alone.returncode == 2
    assert "--local needs the platform's database: set ORCHESTRATOR_DATABASE_URL" in alone.stderr


def _loaded(path: Path) -> UserApp:
    """An app loaded from its file, its module forgotten after (another project's file of the same name loads next,
    as it would in a process of its own)."""
    try:
        return load_app(str(path))
    finally:
        sys.modules.pop(path.stem, None)
        sys.path.remove(str(path.parent))


async def test_two_projects_apps_of_the_same_file_name_are_two_apps_when_they_name_themselves(
    platform: Platform, tmp_path: Path
) -> None:
    """Each project's `app.py` names itself (`app_name`) and owns what it declares: one's plan never removes the
    other's listener. Without a name they would be one app, `app` (its module's name, however it is spelled)."""
    for project, event in (("desk", "object.written"), ("shop", "thread.item_posted")):
        (tmp_path / project).mkdir()
        (tmp_path / project / "app.py").write_text(
            f"app_name = '{project}'\n"
            f"listeners = [{{'name': '{project}', 'filter': {{'types': ['{event}']}},"
            " 'action': {'type': 'workflow', 'workflow': 'w'}}]\n"
        )
    desk, shop = (_loaded(tmp_path / project / "app.py") for project in ("desk", "shop"))
    assert (desk.declarer, shop.declarer) == ("desk", "shop")
    await apply(platform, desk, lambda _: None)
    await apply(platform, shop, lambda _: None)
    assert await lines(platform, desk) == [], "the shop's plan removed nothing of the desk's"
    listed = (await platform.command({"command": "list_listeners"}))["listeners"]
    assert sorted(item["name"] for item in listed) == ["desk", "shop"]

    (tmp_path / "shop" / "app.py").write_text("listeners = []\n")
    unnamed = _loaded(tmp_path / "shop" / "app.py")
    assert unnamed.declarer == "app"
    assert await lines(platform, unnamed) == [], "another name's declarations are not its to remove"
    (tmp_path / "shop" / "app.py").write_text("app_name = ''\nlisteners = []\n")
    with pytest.raises(AppLoadError, match="app_name"):
        _loaded(tmp_path / "shop" / "app.py")
