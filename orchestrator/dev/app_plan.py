"""An app's declarations, checked whole and applied as a plan (`core/plan.py`) when a worker or `dev` starts.

Owns reading an app's event types, captured tables and listeners into the bodies the platform keeps, refusing
the whole app when any of them is invalid (every problem named by its field, nothing applied: a start never goes
on over an older version), and applying the plan through the commands, recording which app declares what. A
capture's event types are the capture's: an app neither declares them nor removes them while the capture lasts,
and what another app declares is not taken unless the app says so (`take_over`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pydantic

from orchestrator.app_loader import UserApp, workflow_names
from orchestrator.commands.captures import CaptureTable, qualified
from orchestrator.commands.fields import Alias
from orchestrator.commands.listeners import listener_warnings
from orchestrator.commands.schedules import BODY_FIELDS, CreateSchedule
from orchestrator.core.declaration import ListenerDeclaration, parse_declaration, stranded_by, stranded_by_schemas
from orchestrator.core.errors import CommandError
from orchestrator.core.event_types import HELD, EventTypeDeclaration
from orchestrator.core.plan import Held, Kind, Step, changes, declared_name, plan, schedule_of
from orchestrator.core.schedule_spec import ScheduleDefinition, parse_schedule, refuse_past
from orchestrator.core.validation import field_errors_message
from orchestrator.lanes.registry import FRESH_SECONDS, NOT_REGISTERED
from orchestrator.platform import Platform
from orchestrator.store.app_events import CAPTURED_SCHEMA
from orchestrator.store.captures import captured_types


class InvalidApp(Exception):
    """An app whose declarations are refused: nothing of it was applied; the message names each field."""


@dataclass(frozen=True)
class Applied:
    steps: list[Step]
    # When the last listener it saved takes effect (None: none saved).
    effective: datetime | None


def _event_type(body: Mapping[str, Any]) -> dict[str, Any]:
    """An event type's body as the platform compares it."""
    return {k: body.get(k) for k in ("name", "schema", "allow", "description")}


def _capture(body: Mapping[str, Any]) -> dict[str, Any]:
    """A capture's body as the platform compares it (its table named with its schema)."""
    found = {k: body.get(k) for k in ("table", "type_prefix", "session_column", "session_id")}
    found["table"] = qualified(str(found["table"]))
    return {**{k: v for k, v in found.items() if v is not None}, "exclude": list(body.get("exclude") or [])}


async def _captures(
    platform: Platform, app: UserApp, problems: list[str], tables_to_come: list[str] | None
) -> list[dict[str, Any]]:
    """The app's captures as the platform compares them. A table that is not there is a problem, unless
    `tables_to_come` is given (a plan shown before the app's `migrate` runs): then it is listed there."""
    captures: list[dict[str, Any]] = []
    for n, body in enumerate(app.captures):
        try:
            capture = CaptureTable.model_validate({**body, "command": "capture_table"})
        except pydantic.ValidationError as err:
            problems.append(field_errors_message(err, f"captures.{n}"))
            continue
        table = qualified(capture.table)
        # The capture is a trigger on the table: the app's `migrate` makes it, or its own migrations before it starts.
        if not await platform.store.table_exists(table):
            if tables_to_come is None:
                made_by = "its migrate ran and did not make it" if app.migrate else "make it in the app's `migrate`"
                problems.append(f"captures.{n}.table: no table {table!r} ({made_by})")
                continue
            tables_to_come.append(table)
        elif refused := await platform.store.capture_refusal(table, capture.session_column, list(capture.exclude)):
            # Its columns and key, checked as the capture itself checks them: said before anything is applied.
            problems.append(f"captures.{n}.{refused}")
            continue
        captures.append(_capture(capture.model_dump(exclude={"command"})))
    return captures


_SESSION_ALIAS: pydantic.TypeAdapter[str] = pydantic.TypeAdapter(Alias)


def _schedules(app: UserApp, problems: list[str], past: dict[str, str]) -> list[dict[str, Any]]:
    """The app's schedules as the platform keeps them (their definitions as stored, beside the alias of the
    session each belongs to: that session is opened at its alias when the plan is applied). A time already past
    (a `one_time` that fired, an `end_date` gone by) goes to `past` by name, not `problems`: refused only when the
    plan would add or change that schedule, so an app whose one-off fired long ago still starts."""
    schedules: list[dict[str, Any]] = []
    for n, body in enumerate(app.schedules):
        rest = {k: v for k, v in body.items() if k != "session_alias"}
        if body.get("session_alias") is None or body.get("session_id") is not None:
            # The field at fault: the alias when it is missing, else the session_id given beside it.
            field = "session_alias: is required" if body.get("session_alias") is None else "session_id: is not known"
            problems.append(
                f"schedules.{n}.{field}: a declared schedule names its session by its alias"
                " (opened at it when the plan is applied), not by a session_id"
            )
            continue
        try:
            session_alias = _SESSION_ALIAS.validate_python(body["session_alias"])
        except pydantic.ValidationError as err:
            problems.append(field_errors_message(err, f"schedules.{n}.session_alias"))
            continue
        try:
            req = CreateSchedule.model_validate({**rest, "command": "create_schedule", "session_id": "declared"})
            # Each field at fault named under the schedule's place in the app's list.
            definition = parse_schedule({k: getattr(req, k) for k in BODY_FIELDS}, now=None, field=f"schedules.{n}")
            try:
                refuse_past(definition, datetime.now(UTC))
            except CommandError as err:  # one field, named from the schedule
                past[declared_name("schedule", {"alias": req.alias, "session_alias": session_alias})] = (
                    f"schedules.{n}.{err.message}"
                )
        except pydantic.ValidationError as err:
            problems.append(field_errors_message(err, f"schedules.{n}"))
            continue
        except CommandError as err:
            problems.append(err.message)
            continue
        schedules.append(
            {
                "session_alias": session_alias,
                "alias": req.alias,
                **definition.model_dump(mode="json"),
                "enabled": req.enabled,
            }
        )
    return schedules


async def _held_schedule(platform: Platform, name: str) -> dict[str, Any] | None:
    session_alias, alias = schedule_of(name)
    session_id = await platform.store.session_by_alias(session_alias)
    row = None if session_id is None else await platform.store.find_schedule(session_id, alias)
    if row is None:
        return None
    stored = {k: row.get(k) for k in ScheduleDefinition.model_fields}
    return {"session_alias": session_alias, "alias": alias, **stored, "enabled": row["enabled"]}


def _declared_twice(app: UserApp) -> list[str]:
    """Each declaration that names what an earlier one of its list names: one of them would silently win."""
    named: list[tuple[str, Sequence[Mapping[str, Any]], Callable[[Mapping[str, Any]], Any], str]] = [
        ("event_types", app.event_types, lambda b: b.get("name"), "name"),
        ("listeners", app.listeners, lambda b: b.get("name"), "name"),
        (
            "captures",
            app.captures,
            lambda b: qualified(b["table"]) if isinstance(b.get("table"), str) else None,
            "table",
        ),
        ("schedules", app.schedules, lambda b: (b.get("session_alias"), b.get("alias")), "alias"),
    ]
    problems = []
    for kind, bodies, key, field in named:
        first: dict[Any, int] = {}
        for n, body in enumerate(bodies):
            found = key(body) if isinstance(body, Mapping) else None
            # A name that is no string is refused by its own validation; only names that are are compared.
            if not all(isinstance(part, str) for part in (found if isinstance(found, tuple) else (found,))):
                continue
            if found in first:
                shown = found[1] if isinstance(found, tuple) else found
                problems.append(f"{kind}.{n}.{field}: {shown!r} is declared twice (first as {kind}.{first[found]})")
            else:
                first[found] = n
    return problems


def _captured_schemas(captures: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The event types the captures declare, each kind's schema by name."""
    return {t["name"]: t["schema"] for c in captures for t in captured_types(c["type_prefix"], c["table"])}


async def declarations(
    platform: Platform,
    app: UserApp,
    held: Mapping[str, Any],
    *,
    tables_to_come: list[str] | None = None,
    past: dict[str, str] | None = None,
) -> dict[Kind, list[dict[str, Any]]]:
    """The app's event types and listeners as the platform would keep them (`held`: the types' schemas as the
    platform holds them); raises InvalidApp naming every bad field when any is refused. With `tables_to_come`, a
    captured table that is not there yet is listed in it instead of refused (a plan shown before the app's
    `migrate` has run). `past` receives the schedules whose time has gone by (`_schedules`)."""
    problems: list[str] = []
    types: list[dict[str, Any]] = []
    for n, body in enumerate(app.event_types):
        try:
            name = body.get("name") if isinstance(body, Mapping) else None
            context = {HELD: held.get(name)} if isinstance(name, str) else None
            event_type = EventTypeDeclaration.model_validate(body, context=context)
        except pydantic.ValidationError as err:
            problems.append(field_errors_message(err, f"event_types.{n}"))
            continue
        types.append(_event_type(event_type.model_dump(by_alias=True)))
    captures = await _captures(platform, app, problems, tables_to_come)
    captured = _captured_schemas(captures)
    schemas = {**held, **captured, **{t["name"]: t["schema"] for t in types}}
    listeners: list[dict[str, Any]] = []
    for n, body in enumerate(app.listeners):
        try:
            listener = parse_declaration(body, platform.settings.limits, schemas)
        except CommandError as err:
            problems.append(f"listeners.{n} ({body.get('name', '?')}): {err.message}")
            continue
        listeners.append(listener.model_dump(mode="json", exclude_unset=True))
    problems.extend(_declared_twice(app))
    schedules = _schedules(app, problems, past if past is not None else {})
    if problems:
        raise InvalidApp(f"app {app.title}: " + "; ".join(problems))
    return {"event_type": types, "capture": captures, "listener": listeners, "schedule": schedules}


async def plan_of(platform: Platform, app: UserApp, *, tables_to_come: list[str] | None = None) -> list[Step]:
    """What applying the app's declarations would do (`tables_to_come`: as `declarations` takes it)."""
    past: dict[str, str] = {}
    schemas = await platform.store.event_schemas()
    declared = await declarations(platform, app, schemas, tables_to_come=tables_to_come, past=past)
    owners = await platform.store.declared_by()
    held: dict[Kind, dict[str, Held]] = {
        "event_type": {
            t["name"]: Held(_event_type(t), owners.get(("event_type", t["name"])))
            for t in await platform.store.list_event_types()
        },
        "capture": {
            found["table"]: Held(_capture(found), owners.get(("capture", found["table"])))
            for found in await platform.store.list_captures()
        },
        "listener": {
            found["name"]: Held(found["body"], owners.get(("listener", found["name"])))
            for found in await platform.store.list_listeners()
        },
        "schedule": {},
    }
    names = {declared_name("schedule", s) for s in declared["schedule"]}
    names |= {name for (kind, name) in owners if kind == "schedule"}
    for name in sorted(names):
        found = await _held_schedule(platform, name)
        if found is not None:
            held["schedule"][name] = Held(found, owners.get(("schedule", name)))
    captured = _captured_after(app, declared, held)
    steps = plan(app.declarer, declared, held, {name: body for name, (body, _) in captured.items()})
    refused = [past[s.name] for s in steps if s.kind == "schedule" and s.action in ("add", "change") and s.name in past]
    refused += _captured_declared(declared, captured)
    refused += _taken(app, declared, steps)
    refused += _stranded(schemas, declared, held, steps)
    refused += _stranded_by_schemas(platform, schemas, declared, held, steps)
    if refused:
        raise InvalidApp(f"app {app.title}: " + "; ".join(refused))
    return steps


# Each kind's list in an app module, and the field that names a declaration of it.
_FIELDS: dict[Kind, tuple[str, str]] = {
    "event_type": ("event_types", "name"),
    "capture": ("captures", "table"),
    "listener": ("listeners", "name"),
    "schedule": ("schedules", "alias"),
}


def _captured_after(
    app: UserApp, declared: Mapping[Kind, Sequence[Mapping[str, Any]]], held: Mapping[Kind, Mapping[str, Held]]
) -> dict[str, tuple[dict[str, Any], str]]:
    """The event types the captures declare once the plan is applied (the app's, and those held that it does not
    remove), each as its capture declares it (its schema and description), beside where that capture is named
    (`captures.N` for the app's)."""
    captures = {
        table: (found.body, f"the capture of {table}")
        for table, found in held.get("capture", {}).items()
        if found.app != app.declarer
    }
    captures.update(
        {c["table"]: (c, f"the capture of {c['table']} (captures.{n})") for n, c in enumerate(declared["capture"])}
    )
    return {
        t["name"]: ({**t, "allow": None}, where)
        for table, (body, where) in captures.items()
        for t in captured_types(body["type_prefix"], table)
    }


def _captured_declared(
    declared: Mapping[Kind, Sequence[Mapping[str, Any]]], captured: Mapping[str, tuple[dict[str, Any], str]]
) -> list[str]:
    """The app's event types that a capture declares: its types are the capture's, their schemas what its events
    hold (`save_event_type` refuses them the same way), so an app neither declares nor refines one."""
    return [
        f"event_types.{n}.name: {t['name']!r} is a type of {captured[t['name']][1]}: {CAPTURED_SCHEMA}"
        for n, t in enumerate(declared["event_type"])
        if t["name"] in captured
    ]


def _same_app(was: str, app: UserApp) -> bool:
    """Whether the owner `was` is this app under the name it had: its module's, before it set `app_name`, or its
    module's under another import path (`examples.missions.app`, then the file `examples/missions/app.py`)."""
    module = app.name
    return was == module or was.endswith(f".{module}") or module.endswith(f".{was}")


def _taken(app: UserApp, declared: Mapping[Kind, Sequence[Mapping[str, Any]]], steps: Sequence[Step]) -> list[str]:
    """What the app declares that another app holds: refused unless the app takes it over (`take_over`), so two
    apps never trade a declaration back and forth, each start taking it from the other. A person's (nobody's
    app's) is adopted."""
    problems = []
    for step in steps:
        if step.was is None or step.was == "nobody" or step.name in app.take_over or _same_app(step.was, app):
            continue
        listed, field = _FIELDS[step.kind]
        n = next(i for i, body in enumerate(declared[step.kind]) if declared_name(step.kind, body) == step.name)
        problems.append(
            f"{listed}.{n}.{field}: {step.kind.replace('_', ' ')} {step.name!r} is app {step.was!r}'s: remove it from"
            f" that app first, or take it over with `take_over = [{step.name!r}]` in this app"
            + ("" if app.owner else f" (an app with no `app_name` is named by its module, here {app.name!r})")
        )
    return problems


def _stranded(
    before_app: Mapping[str, Any],
    declared: Mapping[Kind, Sequence[Mapping[str, Any]]],
    held: Mapping[Kind, Mapping[str, Held]],
    steps: Sequence[Step],
) -> list[str]:
    """What the plan's removal of event types would leave matching no type, as `delete_event_type` refuses it: a
    listener (the app's, another's or a person's) whose filter names a type the app no longer declares
    (`before_app`: the types' schemas as the platform holds them)."""
    removed = {s.name for s in steps if s.kind == "event_type" and s.action == "remove"}
    if not removed:
        return []
    captured = set(_captured_schemas(declared["capture"]))
    before = {*before_app, *captured, *(t["name"] for t in declared["event_type"])}
    after = before - removed
    gone = {s.name for s in steps if s.kind == "listener" and s.action == "remove"}
    listeners = {name: found.body for name, found in held["listener"].items() if name not in gone}
    listeners.update({body["name"]: body for body in declared["listener"]})
    problems = []
    for name, body in sorted(listeners.items()):
        for where, glob in stranded_by(body, before, after):
            problems.append(
                f"event_types: {glob!r} of listener {name!r} ({where}) would match no event type once"
                f" the app no longer declares {', '.join(sorted(repr(t) for t in removed))}: declare it still, or"
                " change or delete that listener first"
            )
    return problems


def _stranded_by_schemas(
    platform: Platform,
    before: Mapping[str, Any],
    declared: Mapping[Kind, Sequence[Mapping[str, Any]]],
    held: Mapping[Kind, Mapping[str, Held]],
    steps: Sequence[Step],
) -> list[str]:
    """What the app's new schemas would leave another's listener (one the app does not declare, and does not
    remove) reading a path no event of its types has, as `save_event_type` refuses it (`before`: the schemas as the
    platform holds them); the app's own listeners are held to its schemas already (`declarations`)."""
    after = {**before, **{t["name"]: t["schema"] for t in declared["event_type"]}}
    after.update(_captured_schemas(declared["capture"]))
    after.update({s.name: s.body["schema"] for s in steps if s.action == "restore" and s.body is not None})
    ours = {str(body["name"]) for body in declared["listener"]}
    ours |= {s.name for s in steps if s.kind == "listener" and s.action == "remove"}
    others = {name: found.body for name, found in held["listener"].items() if name not in ours}
    return [
        f"event_types: the app's schemas would leave listener {stranded} never firing: change or delete it first"
        for stranded in stranded_by_schemas(others, platform.settings.limits, before, after)
    ]


async def apply(platform: Platform, app: UserApp, announce: Callable[[str], None]) -> Applied:
    """Apply the app's plan, announcing each change; answers when its listeners take effect."""
    steps = await plan_of(platform, app)
    effective: datetime | None = None
    for step in steps:
        if step.action in ("add", "change", "restore"):
            assert step.body is not None
            if step.kind == "event_type":
                # Saved as the plan checked it, against the app's listeners as they will be, not as they are
                # (`save_event_type` would hold a new schema to the listener versions it replaces).
                body = step.body
                saved = await platform.store.save_event_type(
                    body["name"], body["schema"], body.get("allow"), body.get("description")
                )
                reply: dict[str, Any] = {"status": "success", "event_type": saved}
            elif step.kind == "capture":
                reply = await platform.command({**step.body, "command": "capture_table"})
            elif step.kind == "schedule":
                reply = await _put_schedule(platform, step.body)
            else:
                reply = await platform.command({"command": "save_listener", "listener": dict(step.body)})
            if reply.get("status") != "success":
                raise InvalidApp(f"app {app.title}: {step.kind} {step.name}: {json.dumps(reply)}")
            if step.kind == "listener":
                at = datetime.fromisoformat(reply["listener"]["effective_at"])
                effective = at if effective is None else max(effective, at)
            for warning in reply.get("warnings", []):
                if not _no_news(app, step, warning):
                    announce(f"warning      {step.kind} {step.name}: {warning}")
        elif step.action == "remove":
            await _remove(platform, step)
        # A restored type is its capture's again, as a capture's types are: no app's.
        owner = None if step.action in ("remove", "restore") else app.declarer
        await platform.store.declare(step.kind, step.name, owner)
    for step in changes(steps):
        announce(f"plan         {step.line()}")
    return Applied(steps, effective)


async def _remove(platform: Platform, step: Step) -> None:
    """Remove what the app no longer declares; gone already is removed (another replica of the worker, starting
    with the same app, applied the same plan first)."""
    try:
        if step.kind == "listener":
            _done(await platform.command({"command": "delete_listener", "name": step.name}))
        elif step.kind == "capture":
            await platform.store.uncapture_table(step.name)
        elif step.kind == "schedule":
            await _remove_schedule(platform, step.name)
        else:
            await platform.store.delete_event_type(step.name)
    except CommandError as err:
        if err.code != "not_found":
            raise


async def plan_warnings(platform: Platform, app: UserApp, steps: Sequence[Step]) -> list[str]:
    """What applying the plan would warn of, as its saves will (`listener_warnings`), but that no worker has the
    app's own workflow yet, which its worker registers as it starts: `orchestrator plan` says it beforehand."""
    registered = await platform.store.registered_workflows(FRESH_SECONDS)
    said = []
    for step in steps:
        if step.kind != "listener" or step.action not in ("add", "change") or step.body is None:
            continue
        declaration = ListenerDeclaration.model_validate(step.body)
        for warning in listener_warnings(
            declaration, registered, platform.settings.task_queue, platform.settings.limits
        ):
            if not _no_news(app, step, warning):
                said.append(f"warning {step.kind} {step.name}: {warning}")
    return said


def _no_news(app: UserApp, step: Step, warning: str) -> bool:
    """Whether a warning says only that no worker has registered a workflow of the app's own (a listener's, or a
    schedule's): its worker registers it as it starts, and the plan is applied before the worker runs."""
    body = step.body or {}
    started = {"listener": body.get("action"), "schedule": body.get("target")}.get(step.kind)
    workflow = started.get("workflow") if isinstance(started, Mapping) else None
    return workflow in workflow_names(app.workflows) and NOT_REGISTERED in warning


async def _put_schedule(platform: Platform, body: Mapping[str, Any]) -> dict[str, Any]:
    """Open the schedule's session at its alias (the one there, if any) and make the schedule, replacing one."""
    opened = await platform.command({"command": "open_session", "alias": body["session_alias"]})
    if opened.get("status") != "success":
        return opened
    schedule = {k: v for k, v in body.items() if k != "session_alias" and v is not None}
    session_id = opened["session"]["id"]
    return await platform.command({**schedule, "command": "create_schedule", "session_id": session_id, "replace": True})


async def _remove_schedule(platform: Platform, name: str) -> None:
    session_alias, alias = schedule_of(name)
    session_id = await platform.store.session_by_alias(session_alias)
    if session_id is not None:
        _done(await platform.command({"command": "delete_schedule", "session_id": session_id, "alias": alias}))


def _done(reply: dict[str, Any]) -> None:
    """A command's reply as the store's calls answer: an error reply raised (a `not_found` among them)."""
    if reply.get("status") != "success":
        raise CommandError.of_reply(reply)


__all__ = ["Applied", "InvalidApp", "apply", "declarations", "plan_of", "plan_warnings"]
