"""Whose a declaration is, as an app's plan applies it: a capture's event types stay the capture's (an app neither
declares nor removes one while the capture lasts, and its earlier version starts again), and another app's
declaration is not taken unless the app takes it over; the app is named as it owns its declarations."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from orchestrator.app_loader import AppLoadError, UserApp, load_app
from orchestrator.core.errors import CommandError
from orchestrator.core.plan import changes
from orchestrator.dev.app_plan import InvalidApp, plan_of
from orchestrator.dev.runtime import ConfigurationError, migrate_and_apply
from orchestrator.platform import Platform
from orchestrator.store.captures import captured_schema

CLI = str(Path(sys.executable).parent / "orchestrator")
ROOT = Path(__file__).resolve().parents[1]


async def _make_items(url: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS items (id bigint PRIMARY KEY, session_id text NOT NULL, note text)"
        )
    finally:
        await conn.close()


def items_app(on: str, *types: dict[str, Any], **more: Any) -> UserApp:
    """The newcomer's app: its `migrate` makes `items`, captured as `item.*`, and a listener on `on`."""
    return UserApp(
        name="tests.items_app",
        migrate=_make_items,
        captures=[{"table": "items", "type_prefix": "item", "session_column": "session_id"}],
        listeners=[
            {
                "name": "seen",
                "filter": {"types": [on]},
                "action": {"type": "object", "alias": "items/seen", "value": {"type": "seen"}},
            }
        ],
        event_types=list(types),
        **more,
    )


OWN_CREATED = {"name": "item.created", "schema": {"type": "object"}}


async def lines(platform: Platform, app: UserApp) -> list[str]:
    return [step.line() for step in changes(await plan_of(platform, app))]


async def _start(platform: Platform, app: UserApp) -> None:
    """As `dev` and `worker --app` start with the app: its `migrate`, then its plan applied."""
    await migrate_and_apply(platform, app, lambda _: None)


@pytest.mark.parametrize("on", ["item.created", "item.updated"])
async def test_an_app_may_not_declare_its_captures_type_and_its_earlier_version_starts_again(
    platform: Platform, on: str
) -> None:
    """v1 captures `items`; v2 also lists `item.created` under `event_types`: refused naming the field and the
    capture, nothing applied, and v1 starts again as it did (the type was never the app's to remove)."""
    v1 = items_app(on)
    await _start(platform, v1)
    with pytest.raises(ConfigurationError) as refused:
        await _start(platform, items_app(on, OWN_CREATED))
    assert (
        "event_types.0.name: 'item.created' is a type of the capture of public.items (captures.0): its schema is"
        " the capture's" in str(refused.value)
    )
    held = (await platform.command({"command": "get_event_type", "name": "item.created"}))["event_type"]
    assert held["schema"] == captured_schema("created"), "the refused plan changed the capture's type"
    assert await lines(platform, v1) == []
    await _start(platform, v1)
    assert (await platform.command({"command": "get_event_type", "name": "item.created"}))["status"] == "success"


async def test_a_capture_a_person_made_keeps_its_types_from_an_app(platform: Platform, fresh_db: str) -> None:
    """The capture is held (a person's, through the commands), not the app's: its types are refused the same."""
    await _make_items(fresh_db)
    made = {"command": "capture_table", "table": "items", "type_prefix": "item", "session_column": "session_id"}
    assert (await platform.command(made))["status"] == "success"
    typed = UserApp(name="tests.items_app", event_types=[{**OWN_CREATED, "name": "item.deleted"}])
    with pytest.raises(InvalidApp, match=r"event_types\.0\.name: 'item\.deleted' is a type of the capture of public"):
        await plan_of(platform, typed)


@pytest.mark.parametrize("on", ["item.created", "item.updated"])
async def test_a_captured_type_an_app_adopted_before_is_restored_to_its_capture_not_removed(
    platform: Platform, on: str
) -> None:
    """A platform where an earlier plan let the app adopt its capture's `item.created` (its schema replaced): the
    app's version that no longer lists it restores the capture's type (schema, no app's), neither refusing the
    start nor removing a type the capture goes on writing, and the capture can be changed again after."""
    v1 = items_app(on)
    await _start(platform, v1)
    await platform.store.save_event_type("item.created", {"type": "object"}, None, None)
    await platform.store.declare("event_type", "item.created", v1.declarer)

    assert await lines(platform, v1) == ["restore event type item.created (its capture's again)"]
    await _start(platform, v1)
    held = (await platform.command({"command": "get_event_type", "name": "item.created"}))["event_type"]
    assert (held["schema"], held["description"]) == (captured_schema("created"), "a row of public.items created")
    assert ("event_type", "item.created") not in await platform.store.declared_by()
    assert await lines(platform, v1) == []
    private = items_app(on)
    private.captures[0]["exclude"] = ["note"]
    assert await lines(platform, private) == ["change  capture public.items"]
    await _start(platform, private)


async def test_a_captured_type_is_neither_deleted_nor_declared_otherwise_whoever_asks(
    platform: Platform, fresh_db: str
) -> None:
    """The door refuses `save_event_type` and `delete_event_type` of a type a capture declares, and the store's
    delete refuses it too (an app's plan removes through it); once the capture ends, both may."""
    await _make_items(fresh_db)
    made = {"command": "capture_table", "table": "items", "type_prefix": "item", "session_column": "session_id"}
    assert (await platform.command(made))["status"] == "success"
    saved = await platform.command({"command": "save_event_type", **OWN_CREATED})
    assert saved["message"].startswith("name: 'item.created' is a type of the capture of public.items: ")
    deleted = await platform.command({"command": "delete_event_type", "name": "item.updated"})
    assert deleted["message"] == (
        "name: 'item.updated' is a type of the capture of public.items: uncapture_table it first"
    )
    with pytest.raises(CommandError, match=r"is a type of the capture of public\.items"):
        await platform.store.delete_event_type("item.created")
    assert (await platform.command({"command": "get_event_type", "name": "item.created"}))["status"] == "success"

    assert (await platform.command({"command": "uncapture_table", "table": "items"}))["status"] == "success"
    assert (await platform.command({"command": "save_event_type", **OWN_CREATED}))["status"] == "success"
    assert (await platform.store.delete_event_type("item.updated"))["name"] == "item.updated"


def _app_file(folder: Path, module: str, text: str) -> UserApp:
    """An app loaded from its file, its module forgotten after (the next loads as in a process of its own)."""
    path = folder / f"{module}.py"
    path.write_text(text)
    try:
        return load_app(str(path))
    finally:
        sys.modules.pop(module, None)
        sys.path.remove(str(folder))


BIG_ORDERS = (
    "listeners = [{'name': 'big-orders', 'filter': {'types': ['object.written']}, 'batch': {'window_seconds': %s},"
    " 'action': {'type': 'object', 'alias': 'big', 'value': {'type': 'seen'}}}]\n"
)


async def test_an_app_takes_another_apps_declaration_only_when_it_says_so(platform: Platform, tmp_path: Path) -> None:
    """`other` declares the listener `shop` holds: refused naming the field and the owner, changed or the same, and
    nothing taken; with `take_over` it takes it, and then `shop` is refused in turn (no trading it on each
    deploy). A listener a person saved is adopted as before."""
    shop = _app_file(tmp_path, "shopapp", "app_name = 'shop'\n" + BIG_ORDERS % 1)
    await _start(platform, shop)
    for window in (1, 2):
        other = _app_file(tmp_path, "otherapp", "app_name = 'other'\n" + BIG_ORDERS % window)
        with pytest.raises(InvalidApp) as refused:
            await plan_of(platform, other)
        assert str(refused.value) == (
            "app other (otherapp): listeners.0.name: listener 'big-orders' is app 'shop''s: remove it from that app"
            " first, or take it over with `take_over = ['big-orders']` in this app"
        )
    assert await lines(platform, shop) == [], "nothing was taken"

    taker = _app_file(tmp_path, "otherapp", "app_name = 'other'\ntake_over = ['big-orders']\n" + BIG_ORDERS % 2)
    assert await lines(platform, taker) == ["change  listener big-orders (was shop's)"]
    await _start(platform, taker)
    with pytest.raises(InvalidApp, match=r"listeners\.0\.name: listener 'big-orders' is app 'other''s"):
        await plan_of(platform, shop)

    by_hand = {
        "name": "by-hand",
        "filter": {"types": ["object.written"]},
        "action": {"type": "workflow", "workflow": "w"},
    }
    assert (await platform.command({"command": "save_listener", "listener": by_hand}))["status"] == "success"
    adopting = UserApp(name="tests.adopter", listeners=[{**by_hand, "batch": {"window_seconds": 3}}])
    assert await lines(platform, adopting) == ["change  listener by-hand (was nobody's)"]

    with pytest.raises(AppLoadError, match="take_over"):
        _app_file(tmp_path, "badapp", "take_over = [3]\n" + BIG_ORDERS % 1)


async def test_an_app_under_another_name_of_its_own_is_no_other_app(platform: Platform, tmp_path: Path) -> None:
    """The same module loaded by another import path (a dotted name, then its file), and an app that names itself
    (`app_name`) after it went by its module: its own declarations, taken back with no refusal."""
    body = {
        "name": "big-orders",
        "filter": {"types": ["object.written"]},
        "batch": {"window_seconds": 1},
        "action": {"type": "object", "alias": "big", "value": {"type": "seen"}},
    }
    dotted = UserApp(name="shop.app", listeners=[body])
    await _start(platform, dotted)
    by_file = _app_file(tmp_path, "app", BIG_ORDERS % 1)
    assert await lines(platform, by_file) == []
    await _start(platform, by_file)
    named = _app_file(tmp_path, "app", "app_name = 'shop'\n" + BIG_ORDERS % 2)
    assert await lines(platform, named) == ["change  listener big-orders (was app's)"]


def test_orchestrator_plan_names_the_app_by_its_app_name_beside_its_module(fresh_db: str, tmp_path: Path) -> None:
    """The refusal names the app as it owns its declarations (`was shop's`), its module beside it."""
    module = tmp_path / "shopapp.py"
    module.write_text("app_name = 'shop'\n" + (BIG_ORDERS % 1).replace("'types'", "'typez'"))
    # This checkout's code, whichever the `orchestrator` script was installed from.
    env = {**os.environ, "ORCHESTRATOR_DATABASE_URL": fresh_db, "PYTHONPATH": str(ROOT)}
    refused = subprocess.run([CLI, "plan", "--app", str(module)], env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert refused.stderr.startswith("orchestrator plan: app shop (shopapp): listeners.0 (big-orders):"), refused.stderr
