"""What a save refuses because it can never fire, and what it saves with a warning."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.client import Client
from orchestrator.dev.inspect import format_status, session_status
from orchestrator.platform import Platform
from tests.store.helpers import ok, refused


def body(types: list[str], workflow: str = "recorder") -> dict[str, Any]:
    return {"name": "l", "filter": {"types": types}, "action": {"type": "workflow", "workflow": workflow}}


@pytest.mark.parametrize(
    ("types", "hint"),
    [
        (["objekt.written"], "did you mean 'object.written'?"),
        (["object.written", "shipment.delayd"], "did you mean 'shipment.delayed'?"),
        (["nothing.like.it"], "declare it first"),
        (["objekt.*"], None),
    ],
)
async def test_a_type_no_event_can_have_is_refused_naming_it(
    platform: Platform, types: list[str], hint: str | None
) -> None:
    await ok(platform, "save_event_type", name="shipment.delayed", schema={"type": "object"})
    index = len(types) - 1
    reply = await refused(
        platform, "invalid_request", f"listener.filter.types.{index}", "save_listener", listener=body(types)
    )
    assert hint is None or hint in reply["message"], reply
    assert (await ok(platform, "list_listeners"))["listeners"] == [], "nothing was saved"


async def test_a_declared_type_and_the_platforms_globs_are_taken(platform: Platform) -> None:
    await ok(platform, "save_event_type", name="shipment.delayed", schema={"type": "object"})
    await ok(platform, "save_listener", listener=body(["shipment.*", "object.**", "**.idle"]))


async def test_a_workflow_no_worker_runs_is_saved_with_a_warning(platform: Platform) -> None:
    reply = await ok(platform, "save_listener", listener=body(["object.written"], "no_such_workflow"))
    (warning,) = reply["warnings"]
    assert warning.startswith("listener.action.workflow: no worker has registered 'no_such_workflow'"), warning
    # The session's view says it too, as long as it holds (`orchestrator status` and the dashboard show it).
    sid = (await ok(platform, "open_session"))["session"]["id"]
    [shown] = (await ok(platform, "list_session_listeners", session_id=sid))["listeners"]
    assert shown["warnings"] == [warning], shown
    text = format_status(await session_status(Client.local(platform), sid))
    assert "  warning: listener.action.workflow: no worker has registered 'no_such_workflow'" in text, text
    await platform.store.register_workflows(["recorder"])
    assert "warnings" not in await ok(platform, "save_listener", listener=body(["object.written"]))
    [shown] = (await ok(platform, "list_session_listeners", session_id=sid))["listeners"]
    assert shown["warnings"] == []


async def test_a_listener_of_thousands_of_globs_is_refused_naming_the_list(platform: Platform) -> None:
    many = {**body(["object.written"]), "filter": {"aliases": [f"tickets/{n}" for n in range(20_000)]}}
    reply = await refused(platform, "invalid_request", "listener.filter.aliases", "save_listener", listener=many)
    assert "at most 100" in reply["message"], reply
    wide = {**body(["object.written"]), "filter": {"types": ["object.written"] * 101}}
    await refused(platform, "invalid_request", "listener.filter.types", "save_listener", listener=wide)
    assert (await ok(platform, "list_listeners"))["listeners"] == []


@pytest.mark.parametrize(
    ("throttle", "warned"),
    [
        ({"per_seconds": 1, "runs": 3}, "lets up to 180 batches start a minute"),
        ({"per_seconds": 7, "runs": 14}, "lets up to 126 batches start a minute"),
        ({"per_seconds": 30, "runs": 60}, None),
        ({"per_seconds": 3600, "runs": 121}, "lets up to 121 batches start a minute"),
        # A window past what a double can divide a minute by (the save answered internal_error).
        ({"per_seconds": 1e-320, "runs": 1}, "lets any number of batches start a minute"),
    ],
)
async def test_a_throttle_past_the_deployments_fires_per_minute_is_saved_with_a_warning(
    platform: Platform, throttle: dict[str, Any], warned: str | None
) -> None:
    # The deployment drops what passes its limit (120 a minute): a throttle that would let more go says so.
    await platform.store.register_workflows(["recorder"])
    reply = await ok(platform, "save_listener", listener={**body(["object.written"]), "throttle": throttle})
    if warned is None:
        assert "warnings" not in reply, reply
        return
    (warning,) = reply["warnings"]
    assert warning.startswith(f"listener.throttle: {warned}, past the deployment's listener_fires_per_minute (120)")
    sid = (await ok(platform, "open_session"))["session"]["id"]
    [shown] = (await ok(platform, "list_session_listeners", session_id=sid))["listeners"]
    assert shown["warnings"] == [warning], shown


@pytest.mark.parametrize(("mode", "at_once"), [("parallel", "runs"), ("keyed", "keys")])
async def test_a_max_parallel_past_the_deployments_limit_is_saved_with_a_warning_its_view_repeats(
    platform: Platform, mode: str, at_once: str
) -> None:
    """Lowered to `listener_parallel_runs` (16 here), not refused: the save says so, and the session's view of the
    listener (what the dashboard shows) says it again, where both showed the number declared alone."""
    await platform.store.register_workflows(["recorder"])
    concurrency = {"mode": mode, "max_parallel": 40, **({"key": "alias"} if mode == "keyed" else {})}
    reply = await ok(platform, "save_listener", listener={**body(["object.written"]), "concurrency": concurrency})
    (warning,) = reply["warnings"]
    limit = platform.settings.limits.listener_parallel_runs
    assert warning == (
        f"listener.concurrency.max_parallel: 40 is above the deployment's listener_parallel_runs ({limit}):"
        f" at most {limit} {at_once} at once"
    )
    sid = (await ok(platform, "open_session"))["session"]["id"]
    [shown] = (await ok(platform, "list_session_listeners", session_id=sid))["listeners"]
    assert shown["warnings"] == [warning], shown
    within = {**concurrency, "max_parallel": limit}
    again = await ok(platform, "save_listener", listener={**body(["object.written"]), "concurrency": within})
    assert "warnings" not in again, again
