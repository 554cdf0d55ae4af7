"""`any` and `not` groups through every surface a user touches: saved and simulated over HTTP and the command
line, routed, and declared in an app that `orchestrator plan` prints and the start applies. A stored body is the
body as written (`not`, never the model's field name `not_`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from orchestrator.app_loader import UserApp
from orchestrator.client import Client
from orchestrator.config import Settings
from orchestrator.dev.app_plan import InvalidApp, apply, plan_of
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform
from tests.test_doors import cli_call

CLI = str(Path(sys.executable).parent / "orchestrator")

NOT_SKIPPED: dict[str, Any] = {
    "name": "nottest",
    "filter": {
        "types": ["object.written"],
        "where": [
            {"not": {"path": "alias", "op": "eq", "value": "skip/me"}},
            {
                "any": [
                    {"path": "alias", "op": "eq", "value": "a/1"},
                    {"not": {"path": "alias", "op": "neq", "value": "b/2"}},
                ]
            },
        ],
    },
    "action": {"type": "object", "alias": "seen/{{ event.id }}", "value": {"type": "seen"}},
}


async def test_a_not_group_is_saved_simulated_and_read_back_as_written_over_http_and_the_cli(
    platform: Platform, settings: Settings
) -> None:
    async with serve_api(create_app(platform, settings), "127.0.0.1", 0) as url:
        code, out, err = await cli_call("--url", url, json.dumps({"command": "save_listener", "listener": NOT_SKIPPED}))
        assert code == 0, (out, err)
        assert json.loads(out)["listener"]["version"] == 1
        async with Client.http(url) as client:
            got = await client.command({"command": "get_listener", "name": "nottest"})
            assert got["listener"]["body"]["filter"] == NOT_SKIPPED["filter"]
            sid = (await client.command({"command": "open_session"}))["session"]["id"]
            for alias in ("skip/me", "a/1", "b/2", "c/3"):
                await client.command(
                    {"command": "write_object", "session_id": sid, "alias": alias, "value": {"type": "t"}}
                )
            simulated = await client.command(
                {"command": "simulate_listener", "session_id": sid, "listener": NOT_SKIPPED}
            )
            assert simulated["status"] == "success", simulated
            taken = [e for batch in simulated["batches"] for e in batch["event_ids"]]
            events = (await client.command({"command": "list_session_events", "session_id": sid}))["events"]
            by_alias = {e["alias"]: e["id"] for e in events}
            assert sorted(taken) == sorted([by_alias["a/1"], by_alias["b/2"]])
            # Saved again unchanged through the other door: the same body, so no new version.
            again = await client.command({"command": "save_listener", "listener": got["listener"]["body"]})
            assert again["status"] == "success", again


async def test_an_app_with_a_not_group_plans_add_and_the_start_applies_it(platform: Platform) -> None:
    declared = UserApp(name="tests.not_app", listeners=[NOT_SKIPPED])
    assert [step.line() for step in await plan_of(platform, declared)] == ["add     listener nottest"]
    await apply(platform, declared, lambda _: None)
    assert await plan_of(platform, declared) != [] and all(
        step.action == "keep" for step in await plan_of(platform, declared)
    ), "applied, the app plans nothing more"
    got = await platform.command({"command": "get_listener", "name": "nottest"})
    assert got["listener"]["body"]["filter"]["where"][0] == {"not": {"path": "alias", "op": "eq", "value": "skip/me"}}


def test_orchestrator_plan_prints_add_for_a_not_group(fresh_db: str, tmp_path: Path) -> None:
    module = tmp_path / "not_app.py"
    module.write_text(f"workflows = []\nlisteners = [{NOT_SKIPPED!r}]\n")
    env = {**os.environ, "ORCHESTRATOR_DATABASE_URL": fresh_db}
    shown = subprocess.run([CLI, "plan", "--app", str(module)], env=env, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == "add     listener nottest"


async def test_a_where_no_event_can_pass_is_refused_naming_it_and_one_that_can_is_saved(
    platform: Platform, settings: Settings
) -> None:
    """`in` with no values (or none but null) never holds: a listener, a `cancel_on` or a stream whose `where`
    needs one would never let an event through, which is refused as a type no event has is (over HTTP and the
    CLI), and nothing is saved. A group that holds otherwise (`any` with another way through, `not` of it) is
    kept."""
    never_in = {"path": "alias", "op": "in", "value": []}
    never = [
        [never_in],
        [{"path": "alias", "op": "exists"}, {"any": [never_in, never_in]}],
        [{"not": {"path": "alias", "op": "not_in", "value": []}}],
        [{"path": "alias", "op": "in", "value": [None]}],  # a path that reaches null counts as missing
    ]
    fine = [
        [{"not": never_in}],
        [{"any": [never_in, {"path": "alias", "op": "eq", "value": "a/1"}]}],
        [{"path": "alias", "op": "not_in", "value": []}],
    ]

    def body(where: list[Any], name: str = "never") -> dict[str, Any]:
        return {**NOT_SKIPPED, "name": name, "filter": {"types": ["object.written"], "where": where}}

    def cancelled_by(where: list[Any]) -> dict[str, Any]:
        return {
            "name": "cancelled",
            "filter": {"types": ["object.written"]},
            "action": {"type": "workflow", "workflow": "w"},
            "cancel_on": [{"types": ["object.deleted"], "where": where}],
        }

    async with serve_api(create_app(platform, settings), "127.0.0.1", 0) as url, Client.http(url) as client:
        sid = (await client.command({"command": "open_session"}))["session"]["id"]
        for where in never:
            place = len(where) - 1
            for listener, says in [
                (body(where), f"listener.filter.where.{place}: never holds"),
                (cancelled_by(where), f"listener.cancel_on.0.where.{place}: never holds"),
            ]:
                refused = await client.command({"command": "save_listener", "listener": listener})
                assert (refused["status"], refused["error"]) == ("error", "invalid_request"), refused
                assert says in refused["message"], refused
            code, out, _ = await cli_call(
                "--url", url, json.dumps({"command": "save_listener", "listener": body(where)})
            )
            assert code != 0 and "never holds" in out, out
            flt = json.dumps({"types": ["object.written"], "where": where})
            async with httpx.AsyncClient(base_url=url) as http:
                response = await http.get(f"/v1/sessions/{sid}/stream", params={"filter": flt})
            assert response.status_code == 400, response.text
            assert json.loads(response.text)["message"].startswith(f"filter.where.{place}: never holds"), response.text
        assert (await client.command({"command": "list_listeners"}))["listeners"] == [], "nothing saved"
        # An app declaring one does not start: the plan names it.
        with pytest.raises(InvalidApp, match=r"listeners\.0 \(never\): listener\.filter\.where\.0: never holds"):
            await plan_of(platform, UserApp(name="tests.never_app", listeners=[body(never[0])]))
        for n, where in enumerate(fine):
            saved = await client.command({"command": "save_listener", "listener": body(where, f"fine{n}")})
            assert saved["status"] == "success", saved


async def test_a_not_group_written_as_a_list_of_one_is_its_item_and_of_two_is_refused_naming_it(
    platform: Platform, settings: Settings
) -> None:
    """`{"not": [condition]}`, a group written as `any`'s is: the item itself, saved as such; two or more are
    refused naming `not` (none of them, or not all of them, would be a guess), and nothing is saved."""
    listed = {**NOT_SKIPPED, "name": "notlisted"}
    listed["filter"] = {
        **NOT_SKIPPED["filter"],
        "where": [{"not": [{"path": "alias", "op": "eq", "value": "skip/me"}]}],
    }
    async with serve_api(create_app(platform, settings), "127.0.0.1", 0) as url, Client.http(url) as client:
        saved = await client.command({"command": "save_listener", "listener": listed})
        assert saved["status"] == "success", saved
        got = await client.command({"command": "get_listener", "name": "notlisted"})
        assert got["listener"]["body"]["filter"]["where"] == NOT_SKIPPED["filter"]["where"][:1]
        two = {**listed, "name": "nottwo"}
        two["filter"] = {**listed["filter"], "where": [{"not": [{"path": "alias", "op": "eq", "value": "a"}] * 2}]}
        refused = await client.command({"command": "save_listener", "listener": two})
        assert refused["error"] == "invalid_request", refused
        assert refused["message"].startswith("listener.filter.where.0.not: takes one condition or group"), refused
        assert (await client.command({"command": "get_listener", "name": "nottwo"}))["error"] == "not_found"
