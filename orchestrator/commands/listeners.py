"""Commands on listener declarations: save, get, list, delete, the per-session switch, pause and resume."""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

import pydantic
from pydantic import ConfigDict, Field

from orchestrator.commands.fields import ListenerName, SchemaOf, SessionId
from orchestrator.commands.registry import Request, command
from orchestrator.commands.replies import Reply, Shape
from orchestrator.core.declaration import ListenerDeclaration, WorkflowAction, parse_declaration
from orchestrator.core.errors import CommandError
from orchestrator.core.limits import Limits
from orchestrator.lanes.nudges import nudge_lanes
from orchestrator.lanes.registry import FRESH_SECONDS, not_registered, registered_text

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext


# Validated by the handler (`parse_declaration`), so that its errors read `listener.<field>`.
ListenerBody = Annotated[
    Any, SchemaOf(ListenerDeclaration), Field(description="a listener body: every field in docs/listeners.md")
]


class SaveListener(Request):
    command: Literal["save_listener"]
    listener: ListenerBody


class ListenerRef(Request):
    command: Literal["get_listener", "delete_listener"]
    name: ListenerName


class ListListeners(Request):
    command: Literal["list_listeners"]


class SwitchListener(Request):
    command: Literal["switch_listener"]
    session_id: SessionId
    name: ListenerName
    enabled: bool = Field(description="false: the listener's batches in this session are consumed with no run")


class PauseListener(Request):
    command: Literal["pause_listener", "resume_listener"]
    name: ListenerName
    session_id: SessionId | None = Field(default=None, description="in this session only; without it, in every one")


class SavedListener(Shape):
    """A listener's version, as a save answers it."""

    name: str
    version: int
    effective_at: datetime


class StoredListener(SavedListener):
    """A listener's version and its body as saved."""

    saved_at: datetime
    body: dict[str, Any] = Field(description="the listener body as saved (docs/listeners.md)")


class ShownListener(StoredListener):
    """A listener as `get_listener` answers it: its version, its body as saved, and beside them the body's own
    fields (`filter`, `action`, ...) with the defaults it left out filled in."""

    model_config = ConfigDict(extra="allow")


WARNINGS = (
    "when its workflow is one no worker has said it runs, its throttle lets more batches start a minute than the"
    " deployment's `listener_fires_per_minute`, or its `max_parallel` is above the deployment's"
    " `listener_parallel_runs` (lowered to it)"
)


class SaveListenerReply(Reply):
    listener: SavedListener
    warnings: list[str] | None = Field(default=None, description=WARNINGS)


class GetListenerReply(Reply):
    listener: ShownListener


class DeleteListenerReply(Reply):
    """The listener as it was."""

    listener: StoredListener


class ListListenersReply(Reply):
    listeners: list[ShownListener] = Field(description="by name")


class SwitchListenerReply(Reply):
    enabled: bool


class PausedListener(Shape):
    name: str
    session_id: str | None = Field(description="the session it is paused or resumed in; null: every session")
    paused: bool


class PauseListenerReply(Reply):
    listener: PausedListener


class ResumeListenerReply(Reply):
    """Without `session_id` it lifts the listener's pauses in single sessions too; with one it is refused while
    the listener is paused in every session."""

    listener: PausedListener
    lanes_resumed: int = Field(description="how many lanes that held events it nudged")


@command(
    "pause_listener",
    PauseListener,
    reply=PauseListenerReply,
    errors=("not_found",),
    example={"command": "pause_listener", "name": "respond", "session_id": "ses_..."},
)
async def pause_listener(platform: CommandContext, req: PauseListener) -> dict[str, Any]:
    """Stop firing, keep routing: the listener's events wait in its lanes (pending), and nothing is lost."""
    await platform.store.get_listener(req.name)
    if req.session_id is not None:
        await platform.store.get_session(req.session_id)
    await platform.store.pause_listener(req.name, req.session_id)
    return {"listener": {"name": req.name, "session_id": req.session_id, "paused": True}}


@command(
    "resume_listener",
    PauseListener,
    reply=ResumeListenerReply,
    errors=("not_found",),
    example={"command": "resume_listener", "name": "respond", "session_id": "ses_..."},
)
async def resume_listener(platform: CommandContext, req: PauseListener) -> dict[str, Any]:
    """Fire what waited, as batches by the usual rules: the lanes that hold events are nudged."""
    await platform.store.get_listener(req.name)
    if req.session_id is not None:
        await platform.store.get_session(req.session_id)
        # One session cannot be let out of a pause of every session: the pause would stand there all the same.
        if await platform.store.paused_in_every_session(req.name):
            raise CommandError(
                "invalid_request",
                f"session_id: {req.name!r} is paused in every session; resume_listener without session_id lifts it",
            )
    lanes = await platform.store.resume_listener(req.name, req.session_id)
    await nudge_lanes(platform.temporal, platform.settings, lanes)
    return {"listener": {"name": req.name, "session_id": req.session_id, "paused": False}, "lanes_resumed": len(lanes)}


@command(
    "save_listener",
    SaveListener,
    reply=SaveListenerReply,
    example={
        "command": "save_listener",
        "listener": {
            "name": "ticket_changes",
            "filter": {"types": ["object.written"], "aliases": ["tickets/*/meta"]},
            "batch": {"window_seconds": 2, "distinct_by": "alias"},
            "action": {"type": "workflow", "workflow": "responder"},
        },
    },
)
async def save_listener(platform: CommandContext, req: SaveListener) -> dict[str, Any]:
    """Validate the body and store it as the listener's next version, in effect after the activation delay. A
    type no event can have is refused; a workflow no worker has registered lately is saved with a warning
    (workers may deploy after their listeners), and its batches answer `invocation_error` until one does; so is a
    throttle that lets more batches start a minute than `listener_fires_per_minute`, past which they are dropped."""
    limits = platform.settings.limits
    declaration = parse_declaration(req.listener, limits, await platform.store.event_schemas())
    body = declaration.model_dump(mode="json", exclude_unset=True)
    saved = await platform.store.save_listener(declaration.name, body, limits.activation_delay_seconds)
    reply: dict[str, Any] = {"listener": saved}
    registered = await platform.store.registered_workflows(FRESH_SECONDS)
    warnings = listener_warnings(declaration, registered, platform.settings.task_queue, limits)
    if warnings:
        reply["warnings"] = warnings
    return reply


def listener_warnings(
    declaration: ListenerDeclaration, registered: list[str], task_queue: str, limits: Limits
) -> list[str]:
    """What a save says of a listener it keeps, and its session's view says again: a workflow no worker runs, a
    throttle past the fires per minute, more runs at once than the deployment lets a listener have."""
    said = (
        unregistered_workflow(declaration, registered, task_queue),
        throttle_past_fires(declaration, limits),
        parallel_past_limit(declaration, limits),
    )
    return [w for w in said if w is not None]


def parallel_past_limit(declaration: ListenerDeclaration, limits: Limits) -> str | None:
    """What to say of a `max_parallel` above the deployment's `listener_parallel_runs`, which lowers it (None:
    nothing)."""
    concurrency = declaration.concurrency
    if concurrency.mode not in ("keyed", "parallel") or concurrency.max_parallel <= limits.listener_parallel_runs:
        return None
    at_once = "keys" if concurrency.mode == "keyed" else "runs"
    return (
        f"listener.concurrency.max_parallel: {concurrency.max_parallel} is above the deployment's"
        f" listener_parallel_runs ({limits.listener_parallel_runs}): at most {limits.listener_parallel_runs}"
        f" {at_once} at once"
    )


def throttle_past_fires(declaration: ListenerDeclaration, limits: Limits) -> str | None:
    """What to say of a throttle that lets more batches start in a minute than the deployment's fires per minute,
    past which batches are dropped as `throttled` (None: nothing)."""
    throttle = declaration.throttle
    if throttle is None:
        return None
    windows = 60 / throttle.per_seconds if throttle.per_seconds < 60 else 1.0
    # A window so small that a minute divided by it is past a double's range (1e-320 s) lets any number start.
    most = throttle.runs * math.ceil(windows) if math.isfinite(windows) else math.inf
    if most <= limits.listener_fires_per_minute:
        return None
    shown = "any number of" if most == math.inf else f"up to {most}"
    return (
        f"listener.throttle: lets {shown} batches start a minute, past the deployment's"
        f" listener_fires_per_minute ({limits.listener_fires_per_minute}): those past it are dropped as throttled"
        " rather than held"
    )


def unregistered_workflow(declaration: ListenerDeclaration, registered: list[str], task_queue: str) -> str | None:
    """What to say of a listener whose workflow no worker has registered lately (None: nothing). A run on a
    task queue the action names, not the platform's `task_queue`, is another worker's: it says nothing here."""
    action = declaration.action
    if not isinstance(action, WorkflowAction) or action.workflow in registered:
        return None
    if action.task_queue not in (None, task_queue):
        return None
    return (
        f"{not_registered('listener.action.workflow', action.workflow)}; its batches fail until one does"
        f" (registered: {registered_text(registered)})"
    )


@command(
    "get_listener",
    ListenerRef,
    reply=GetListenerReply,
    errors=("not_found",),
    example={"command": "get_listener", "name": "respond"},
)
async def get_listener(platform: CommandContext, req: ListenerRef) -> dict[str, Any]:
    """A listener's newest saved version: its body as saved, and when it takes effect (`effective_at`, in the
    future until its activation delay has passed; the version before handles events until then). The body's fields
    are also beside the version's, with the defaults it left out (`listener.retry.delay_seconds` 30)."""
    return {"listener": shown(await platform.store.get_listener(req.name))}


def shown(found: dict[str, Any]) -> dict[str, Any]:
    """A listener as the commands answer it: its version (`name`, `version`, `effective_at`, ...), its `body` as
    saved, and beside them the body's fields with each default it left out filled in (a body a later release's
    model does not read: its fields as saved)."""
    try:
        fields = ListenerDeclaration.model_validate(found["body"]).model_dump(mode="json")
    except pydantic.ValidationError:
        fields = dict(found["body"])
    return {**fields, **found}


@command(
    "delete_listener",
    ListenerRef,
    reply=DeleteListenerReply,
    errors=("not_found",),
    example={"command": "delete_listener", "name": "respond"},
)
async def delete_listener(platform: CommandContext, req: ListenerRef) -> dict[str, Any]:
    """Delete a listener: no batch is cut for it any more (what it did stays recorded)."""
    return {"listener": await platform.store.delete_listener(req.name)}


@command(
    "list_listeners",
    ListListeners,
    reply=ListListenersReply,
    example={"command": "list_listeners"},
)
async def list_listeners(platform: CommandContext, req: ListListeners) -> dict[str, Any]:
    """Every listener declared and not deleted, by name, each as `get_listener` answers it."""
    return {"listeners": [shown(found) for found in await platform.store.list_listeners()]}


@command(
    "switch_listener",
    SwitchListener,
    reply=SwitchListenerReply,
    errors=("not_found",),
    example={"command": "switch_listener", "session_id": "ses_...", "name": "respond", "enabled": False},
)
async def switch_listener(platform: CommandContext, req: SwitchListener) -> dict[str, Any]:
    """Switch a listener off or on in one session: while it is off, its batches come due and are consumed with no
    run and no outcome."""
    enabled = await platform.store.switch_listener(req.session_id, req.name, req.enabled)
    return {"enabled": enabled}
