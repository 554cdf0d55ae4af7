"""Commands on schedules (SPEC section 6): create, get, list, update, delete, and a schedule's runs.

A schedule belongs to a session and is addressed by its `alias` there, so two sessions may each have a
`clock`. Its definition lives in PostgreSQL (what a firing performs); its clock `schedule:<session>:<alias>`
decides when it fires: a Temporal Schedule starting `OrchestratorScheduleFire` with overlapping firings skipped,
or, on a server without Schedules, the platform's own clock workflow (`schedule_clocks.py`). The body is checked
by the pure core (`schedule_spec`). A refused body changes nothing: validation comes before the row, and the row
is removed again when Temporal refuses the schedule.
"""

from __future__ import annotations

import contextlib
import logging
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import (
    Field,
    GetJsonSchemaHandler,
    ModelWrapValidatorHandler,
    PrivateAttr,
    ValidationError,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.commands.fields import Alias, Limit, SchemaOf, SessionId, check_payload
from orchestrator.commands.registry import Request, command
from orchestrator.commands.schedule_clocks import clock_of
from orchestrator.commands.schedule_views import (
    DeleteScheduleReply,
    GetScheduleReply,
    ListScheduleRunsReply,
    ListSchedulesReply,
    ScheduleReply,
)
from orchestrator.core.errors import CommandError
from orchestrator.core.globs import owned
from orchestrator.core.schedule_spec import (
    IsoDate,
    ObjectTarget,
    Repeat,
    ScheduleDefinition,
    WorkflowTarget,
    parse_schedule,
    schedule_id,
    schedule_timing,
)
from orchestrator.crossings import crossing
from orchestrator.lanes.registry import FRESH_SECONDS, not_registered, registered_text

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext
    from orchestrator.config import Settings

log = logging.getLogger(__name__)

# How long a schedule's row may wait for its Temporal Schedule before the upkeep makes it (its command died).
UNMADE_GRACE_SECONDS = 10.0
BODY_FIELDS = ("repeat", "start_date", "end_date", "invocation_target_type", "target", "origin")
TIMING_FIELDS = ("repeat", "start_date", "end_date")


# The seed's flat form names the repeat by a string and keeps its fields beside it, and addresses the target
# as `invocation_target {target {session, blob, revision}, alias, value}`.
FLAT_REPEAT_FIELDS = ("cron_expression", "timezone", "every_seconds", "invocation_time")
FLAT_TARGET_FIELDS = ("alias", "value", "workflow", "input")


def nested_form(data: Any) -> Any:
    """The seed's flat `create_schedule` body as the nested one (a nested body is answered as it is).

    A `repeat` named by a string takes its fields from beside it. `invocation_target {target {session, ...},
    alias, value}` is the target (with either form of `repeat`): the session comes from its `target.session`,
    whose other names (`blob`, `revision`) are kept as the schedule's `origin`. What a body leaves out that its
    target says is filled in: `invocation_target_type` (a `workflow` starts a run, a `value` writes an object)
    and the schedule's `alias`, the object's it writes.
    """
    if not isinstance(data, dict):
        return data
    data = dict(data)
    if isinstance(data.get("repeat"), dict):
        # A nested repeat beside (or holding) the flat form's fields left null, as a body built for either form or
        # dumped from a model has them: a null says nothing.
        data = _without_null_repeat_fields(data)
        data["repeat"] = _without_null_repeat_fields(data["repeat"])
    if isinstance(data.get("repeat"), str):
        repeat: dict[str, Any] = {"type": data.pop("repeat")}
        # A flat body often carries every field, null where its repeat or target has no use for it: left out.
        for name in FLAT_REPEAT_FIELDS:
            value = data.pop(name, None)
            if value is not None:
                repeat[name] = value
        data["repeat"] = repeat
    if "invocation_target" in data and "target" not in data:
        given = data.pop("invocation_target")
        if not isinstance(given, dict):
            raise ValueError("invocation_target: must be a JSON object")
        names = given.get("target", {})
        if not isinstance(names, dict):
            raise ValueError("invocation_target.target: must be a JSON object")
        if "session_id" not in data and "session" in names:
            data["session_id"] = names["session"]
        origin = {k: v for k, v in names.items() if k != "session"}
        if origin:
            data["origin"] = origin
        data["target"] = {k: given[k] for k in FLAT_TARGET_FIELDS if given.get(k) is not None}
        unknown = sorted(set(given) - {"target", *FLAT_TARGET_FIELDS})
        if unknown:
            raise ValueError(f"invocation_target.{unknown[0]}: not a field of a schedule's target")
    target = data.get("target")
    if isinstance(target, dict):
        if data.get("invocation_target_type") is None:
            kind = (
                "workflow"
                if target.get("workflow") is not None
                else "object"
                if target.get("value") is not None
                else None
            )
            if kind is not None:
                data["invocation_target_type"] = kind
        if data.get("alias") is None and isinstance(target.get("alias"), str):
            data["alias"] = target["alias"]
    return data


def _without_null_repeat_fields(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if not (k in FLAT_REPEAT_FIELDS and v is None)}


# Checked by the core's `parse_schedule`, which names nested fields as the caller wrote them.
RepeatArg = Annotated[Any, SchemaOf(Repeat), Field(description="when it fires: a cron, an interval, or one time")]
DateArg = Annotated[Any, SchemaOf(IsoDate | None)]
TargetTypeArg = Annotated[
    Any,
    SchemaOf(Literal["object", "workflow"]),
    Field(description="what a firing does: write an object or start a run"),
]
TargetArg = Annotated[
    Any,
    SchemaOf(ObjectTarget | WorkflowTarget),
    Field(description="the object to write ({alias, value}) or the workflow to start ({workflow, input})"),
]
START_DATE = "no firing before this date (in the repeat's time zone)"
END_DATE = "no firing after this date (in the repeat's time zone)"


class CreateSchedule(Request):
    command: Literal["create_schedule"]
    session_id: SessionId
    alias: Alias
    repeat: RepeatArg
    start_date: DateArg = Field(default=None, description=START_DATE)
    end_date: DateArg = Field(default=None, description=END_DATE)
    invocation_target_type: TargetTypeArg
    target: TargetArg
    # What the seed's flat form named the target by besides its session (`blob`, `revision`), kept as given.
    origin: dict[str, Any] | None = Field(default=None, description="kept as given (the seed's `blob`, `revision`)")
    enabled: bool = Field(default=True, description="false: created paused")
    # A run setting its timer again replaces it.
    replace: bool = Field(default=False, description="replace a schedule already at the alias instead of refusing")

    # Whether the body came in the seed's flat form: its refusals name the fields as it gave them.
    _flat_form: bool = PrivateAttr(default=False)

    @model_validator(mode="wrap")
    @classmethod
    def _flat(cls, data: Any, handler: ModelWrapValidatorHandler[CreateSchedule]) -> CreateSchedule:
        made = handler(nested_form(data))
        made._flat_form = isinstance(data, dict) and isinstance(data.get("repeat"), str)
        return made

    def definition(self) -> ScheduleDefinition:
        """The schedule the body defines; raises CommandError naming the field as the body named it."""
        try:
            return parse_schedule({name: getattr(self, name) for name in BODY_FIELDS}, now=datetime.now(UTC))
        except CommandError as err:
            if not self._flat_form:
                raise
            # `repeat` a string and its fields beside it: `repeat.every_seconds` is `every_seconds` there.
            said = re.sub(rf"(^|; )repeat\.({'|'.join(FLAT_REPEAT_FIELDS)})\b", r"\1\2", err.message)
            raise CommandError(err.code, re.sub(r"(^|; )repeat\.type\b", r"\1repeat", said)) from None

    # What the seed's flat form names beside the fields: in the schema, read by `nested_form` before validation.
    flat_fields: ClassVar[tuple[str, ...]] = (*FLAT_REPEAT_FIELDS, "invocation_target")

    @classmethod
    def __get_pydantic_json_schema__(cls, core: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        # The body before `nested_form`: the schema says what the door takes, both forms, and what a target
        # fills in (the type, the alias) is not required of it. A body that says neither is refused naming it.
        schema = handler.resolve_ref_schema(handler(core))
        props = schema["properties"]
        props["repeat"] = {
            "description": props["repeat"].pop("description"),
            "anyOf": [props["repeat"], {"enum": REPEAT_TYPES, "description": "the flat form: fields beside it"}],
        }
        props.update({name: FLAT_PROPERTIES[name] for name in cls.flat_fields})
        schema["required"] = ["command", "repeat"]
        return schema


REPEAT_TYPES = ["recurring_cron", "interval", "one_time"]
_FLAT = "the flat form (`repeat` a string): "
_NULL = {"type": "null"}
FLAT_PROPERTIES: dict[str, Any] = {
    "cron_expression": {"anyOf": [{"type": "string"}, _NULL], "description": _FLAT + "the cron of `recurring_cron`"},
    "timezone": {"anyOf": [{"type": "string"}, _NULL], "description": _FLAT + "an IANA time zone"},
    "every_seconds": {"anyOf": [{"type": "integer"}, _NULL], "description": _FLAT + "the seconds of `interval`"},
    "invocation_time": {"anyOf": [{"type": "string"}, _NULL], "description": _FLAT + "the date-time of `one_time`"},
    "invocation_target": {
        "type": "object",
        "description": "the seed's target: `target.session` the session (its other names kept as `origin`), "
        "`alias` and `value` an object to write, or `workflow` and `input` a run to start",
        "properties": {
            "target": {"type": "object", "properties": {"session": {"type": "string"}}},
            "alias": {"anyOf": [{"type": "string"}, _NULL]},
            "value": {},
            "workflow": {"anyOf": [{"type": "string"}, _NULL]},
            "input": {},
        },
        "additionalProperties": False,
    },
}


class UpdateSchedule(Request):
    command: Literal["update_schedule"]
    session_id: SessionId
    alias: Alias
    repeat: RepeatArg = None
    start_date: DateArg = Field(default=None, description=START_DATE)
    end_date: DateArg = Field(default=None, description=END_DATE)
    invocation_target_type: TargetTypeArg = None
    target: TargetArg = None
    enabled: bool | None = Field(default=None, description="false: paused; true: running again")


class ScheduleRef(Request):
    command: Literal["get_schedule", "delete_schedule"]
    session_id: SessionId
    alias: Alias


class ListSchedules(Request):
    command: Literal["list_schedules"]
    session_id: SessionId


class ListScheduleRuns(Request):
    command: Literal["list_schedule_runs"]
    session_id: SessionId
    alias: Alias
    limit: Limit = 100


def schedule_owns(settings: Settings) -> list[str] | None:
    """The deployment's `schedule_owns` globs, the aliases schedules may write (unset: any alias)."""
    owns = settings.schedule_owns
    return None if owns is None else [str(glob) for glob in owns]


def written_alias(req: CreateSchedule) -> str | None:
    """The alias a schedule's firings write (None: it starts a workflow); raises CommandError on a bad body."""
    definition = req.definition()
    return definition.object_target().alias if definition.invocation_target_type == "object" else None


def _check_target(platform: CommandContext, definition: ScheduleDefinition) -> None:
    if definition.invocation_target_type != "object":
        check_payload("target.input", definition.workflow_target().input, platform.settings.limits.max_payload_bytes)
        return
    target = definition.object_target()
    if not owned(schedule_owns(platform.settings), target.alias):
        raise CommandError("access_denied", f"target.alias: {target.alias!r} is outside what schedules may write")
    check_payload("target.value", target.value, platform.settings.limits.max_payload_bytes)


async def _warnings(platform: CommandContext, definition: ScheduleDefinition, reply: dict[str, Any]) -> dict[str, Any]:
    """The reply with `warnings` when the schedule starts a workflow no worker has registered lately (saved all the
    same, as a listener is: workers may deploy after it; its firings fail until one does)."""
    if definition.invocation_target_type != "workflow":
        return reply
    workflow = definition.workflow_target().workflow
    registered = await platform.store.registered_workflows(FRESH_SECONDS)
    if workflow not in registered:
        reply["warnings"] = [
            f"{not_registered('target.workflow', workflow)}; its firings fail until one does"
            f" (registered: {registered_text(registered)})"
        ]
    return reply


def _refused(err: RPCError) -> Exception:
    """A schedule Temporal refuses as invalid is the caller's error; any other failure stays what it is."""
    if err.status == RPCStatusCode.INVALID_ARGUMENT:
        return CommandError("invalid_request", f"repeat: Temporal refused the schedule: {err.message}")
    return err


async def _open_session(platform: CommandContext, session_id: str) -> None:
    session = await platform.store.get_session(session_id)
    if session["status"] != "open":
        raise CommandError("session_not_open", f"session_id: session {session_id!r} is {session['status']}")


@command(
    "create_schedule",
    CreateSchedule,
    reply=ScheduleReply,
    errors=("not_found", "session_not_open", "access_denied", "limit_exceeded"),
    example={
        "command": "create_schedule",
        "session_id": "ses_...",
        "alias": "ops/digest",
        "repeat": {"type": "recurring_cron", "cron_expression": "0 9 * * 1-5", "timezone": "Europe/Paris"},
        "invocation_target_type": "object",
        "target": {"alias": "ops/digest", "value": {"type": "digest"}},
    },
)
async def create_schedule(platform: CommandContext, req: CreateSchedule) -> dict[str, Any]:
    """Create a schedule at an alias, backed by a Temporal Schedule: on each firing it writes an object or starts
    a workflow in the session. The seed's flat body (`repeat` a string, `cron_expression`, `timezone`,
    `invocation_target`) is accepted too."""
    return await make_schedule(platform, req)


async def make_schedule(
    platform: CommandContext, req: CreateSchedule, depth: int = 0, set_by: str | None = None
) -> dict[str, Any]:
    """`create_schedule`; for a run's timer, `depth` its firings' writes carry (the run's writes') and `set_by`
    the run's execution."""
    await _open_session(platform, req.session_id)
    definition = req.definition()
    _check_target(platform, definition)
    clock_of(platform)
    sid = schedule_id(req.session_id, req.alias)
    stored = _stored(definition, depth, set_by)
    row, version, replaced = await platform.store.put_schedule(
        req.session_id, req.alias, sid, stored, req.enabled, req.replace
    )
    crossing("schedule.written")
    try:
        await _make(platform, row, version)
    except Exception as err:
        if replaced is not None:
            # A refused replace keeps the schedule it would have replaced: its row and records go back, and its
            # clock is brought to it (Temporal kept the old one; the upkeep makes it if this does not).
            back = await platform.store.put_back_schedule(req.session_id, req.alias, version, replaced)
            if back is not None:
                # Whatever this make meets, the refusal is what the caller hears: the row stays unmade for the upkeep.
                with contextlib.suppress(Exception):
                    await _make(platform, *back)
        elif await platform.store.forget_schedule(req.session_id, req.alias, version):
            # Its clock goes with it: one a replace found stays under the id, firing into a row that is gone.
            with contextlib.suppress(RPCError):
                await clock_of(platform).remove(sid)
        if isinstance(err, RPCError):
            raise _refused(err) from None
        raise
    return await _warnings(platform, definition, {"schedule": row})


def _stored(definition: ScheduleDefinition, depth: int, set_by: str | None) -> dict[str, Any]:
    """A schedule's row body: its definition, and for a timer a run set, the depth of that run's writes, which its
    firings' writes carry (so a run that sets a timer waking its own listener is a chain the limit stops), and
    the run (`set_by`, its execution), which its firings' causes name."""
    stored = definition.model_dump(mode="json")
    if depth:
        stored["depth"] = depth
    if set_by is not None:
        stored["set_by"] = set_by
    return stored


# How often a make goes again from the row as written since (others setting the same schedule at once).
MAKE_AGAIN = 5


async def _make(platform: CommandContext, row: dict[str, Any], version: str) -> None:
    """Make a schedule's clock from its row (at `version`), and mark the row made. A clock found under its id is
    brought to this row (the row is the truth), so a replace, or a make that died before its mark, ends with the
    clock the row says. A row written again meanwhile is made again from what it holds now, so the clock ends as the
    last row written says; one deleted meanwhile takes its clock with it."""
    clock = clock_of(platform)
    for _ in range(MAKE_AGAIN):
        await clock.make(row, schedule_timing(_definition(row)))
        if await platform.store.schedule_made(row["session_id"], row["alias"], version):
            return
        now = await platform.store.schedule_version(row["session_id"], row["alias"])
        if now is None:
            await clock.remove(row["schedule_id"])
            return
        row, version = now
    log.warning(
        "schedule %s written again %d times while it was made; the upkeep makes it", row["schedule_id"], MAKE_AGAIN
    )


def _definition(row: dict[str, Any]) -> ScheduleDefinition:
    return ScheduleDefinition.model_validate({k: row[k] for k in ScheduleDefinition.model_fields if k in row})


async def make_unmade_schedules(platform: CommandContext, older_than_seconds: float = UNMADE_GRACE_SECONDS) -> int:
    """Make the Temporal Schedules of rows a process wrote and died before making (`create_schedule`'s crossing);
    answers how many. Run by each worker's router every few seconds."""
    made = 0
    for row, version in await platform.store.unmade_schedules(older_than_seconds):
        try:
            await _make(platform, row, version)
        except (RPCError, ValidationError) as err:
            # One row this release cannot read (a later release's form, during a rolling upgrade) stops no other.
            log.warning("could not make the schedule %s: %s", row["schedule_id"], err)
            continue
        made += 1
    return made


@command(
    "update_schedule",
    UpdateSchedule,
    reply=ScheduleReply,
    errors=("not_found", "access_denied", "limit_exceeded"),
    example={
        "command": "update_schedule",
        "session_id": "ses_...",
        "alias": "ops/clock",
        "repeat": {"type": "interval", "every_seconds": 300},
    },
)
async def update_schedule(platform: CommandContext, req: UpdateSchedule) -> dict[str, Any]:
    """Change a schedule: the fields given replace the stored ones, the rest are kept."""
    row = await platform.store.get_schedule(req.session_id, req.alias)
    given = req.model_fields_set
    body = {name: (getattr(req, name) if name in given else row.get(name)) for name in BODY_FIELDS}
    retimed = any(name in given for name in TIMING_FIELDS)
    definition = parse_schedule(body, now=datetime.now(UTC) if retimed else None)
    _check_target(platform, definition)
    enabled = row["enabled"] if req.enabled is None else req.enabled
    try:
        await clock_of(platform).change(row, schedule_timing(definition), enabled)
    except RPCError as err:
        raise _refused(err) from None
    stored = _stored(definition, int(row.get("depth") or 0), row.get("set_by"))
    updated = await platform.store.update_schedule(req.session_id, req.alias, stored, enabled)
    return await _warnings(platform, definition, {"schedule": updated})


@command(
    "get_schedule",
    ScheduleRef,
    reply=GetScheduleReply,
    errors=("not_found",),
    example={"command": "get_schedule", "session_id": "ses_...", "alias": "ops/clock"},
)
async def get_schedule(platform: CommandContext, req: ScheduleRef) -> dict[str, Any]:
    """A schedule, with its next invocation times and how often it has fired."""
    row = await platform.store.get_schedule(req.session_id, req.alias)
    if platform.temporal is not None:
        row.update(await clock_of(platform).describe(row, schedule_timing(_definition(row))))
    return {"schedule": row}


@command(
    "list_schedules",
    ListSchedules,
    reply=ListSchedulesReply,
    errors=("not_found",),
    example={"command": "list_schedules", "session_id": "ses_..."},
)
async def list_schedules(platform: CommandContext, req: ListSchedules) -> dict[str, Any]:
    """The session's schedules."""
    await platform.store.get_session(req.session_id)
    return {"schedules": await platform.store.list_schedules(req.session_id)}


@command(
    "delete_schedule",
    ScheduleRef,
    reply=DeleteScheduleReply,
    errors=("not_found",),
    example={"command": "delete_schedule", "session_id": "ses_...", "alias": "ops/clock"},
)
async def delete_schedule(platform: CommandContext, req: ScheduleRef) -> dict[str, Any]:
    """Delete a schedule (and its Temporal Schedule)."""
    row = await platform.store.get_schedule(req.session_id, req.alias)
    await clock_of(platform).remove(row["schedule_id"])
    return {"schedule": await platform.store.delete_schedule(req.session_id, req.alias)}


@command(
    "list_schedule_runs",
    ListScheduleRuns,
    reply=ListScheduleRunsReply,
    errors=("not_found",),
    example={"command": "list_schedule_runs", "session_id": "ses_...", "alias": "ops/clock", "limit": 20},
)
async def list_schedule_runs(platform: CommandContext, req: ListScheduleRuns) -> dict[str, Any]:
    """A schedule's most recent firings, oldest first."""
    return {"runs": await platform.store.list_schedule_runs(req.session_id, req.alias, req.limit)}
