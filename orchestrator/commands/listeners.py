"""Commands on listener declarations: save, get, list, delete, the per-session switch, pause and resume."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from orchestrator.commands.fields import ListenerName, SessionId
from orchestrator.commands.registry import Request, command
from orchestrator.core.declaration import parse_declaration
from orchestrator.nudges import nudge_lanes

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext


class SaveListener(Request):
    command: Literal["save_listener"]
    listener: Any


class ListenerRef(Request):
    command: Literal["get_listener", "delete_listener"]
    name: ListenerName


class ListListeners(Request):
    command: Literal["list_listeners"]


class SwitchListener(Request):
    command: Literal["switch_listener"]
    session_id: SessionId
    name: ListenerName
    enabled: bool


class PauseListener(Request):
    command: Literal["pause_listener", "resume_listener"]
    name: ListenerName
    # A pause in one session; without it, in every session.
    session_id: SessionId | None = None


@command("pause_listener", PauseListener)
async def pause_listener(platform: CommandContext, req: PauseListener) -> dict[str, Any]:
    """Stop firing, keep routing: the listener's events wait in its lanes (pending), and nothing is lost."""
    await platform.store.get_listener(req.name)
    if req.session_id is not None:
        await platform.store.get_session(req.session_id)
    await platform.store.pause_listener(req.name, req.session_id)
    return {"listener": {"name": req.name, "session_id": req.session_id, "paused": True}}


@command("resume_listener", PauseListener)
async def resume_listener(platform: CommandContext, req: PauseListener) -> dict[str, Any]:
    """Fire what waited, as batches by the usual rules: the lanes that hold events are nudged."""
    await platform.store.get_listener(req.name)
    if req.session_id is not None:
        await platform.store.get_session(req.session_id)
    lanes = await platform.store.resume_listener(req.name, req.session_id)
    await nudge_lanes(platform.temporal, platform.settings, lanes)
    return {"listener": {"name": req.name, "session_id": req.session_id, "paused": False}, "lanes_resumed": len(lanes)}


@command("save_listener", SaveListener)
async def save_listener(platform: CommandContext, req: SaveListener) -> dict[str, Any]:
    """Validate the body and store it as the listener's next version, in effect after the activation delay."""
    limits = platform.settings.limits
    declaration = parse_declaration(req.listener, limits, await platform.store.event_schemas())
    body = declaration.model_dump(mode="json", exclude_unset=True)
    saved = await platform.store.save_listener(declaration.name, body, limits.activation_delay_seconds)
    return {"listener": saved}


@command("get_listener", ListenerRef)
async def get_listener(platform: CommandContext, req: ListenerRef) -> dict[str, Any]:
    return {"listener": await platform.store.get_listener(req.name)}


@command("delete_listener", ListenerRef)
async def delete_listener(platform: CommandContext, req: ListenerRef) -> dict[str, Any]:
    return {"listener": await platform.store.delete_listener(req.name)}


@command("list_listeners", ListListeners)
async def list_listeners(platform: CommandContext, req: ListListeners) -> dict[str, Any]:
    return {"listeners": await platform.store.list_listeners()}


@command("switch_listener", SwitchListener)
async def switch_listener(platform: CommandContext, req: SwitchListener) -> dict[str, Any]:
    enabled = await platform.store.switch_listener(req.session_id, req.name, req.enabled)
    return {"enabled": enabled}
