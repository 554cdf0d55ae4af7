"""The listener declaration body of SPEC section 3, as pydantic models, and its parsing.

Owns the shape and the static rules of a declaration (globs, paths, concurrency fields, batch bounds, the
deployment's limits); what a declaration does to events is `filters.py`'s, `lane_keys.py`'s, `batch_cuts.py`'s,
`throttles.py`'s and `lane_step.py`'s. Every model forbids unknown fields, so a misspelt field is refused rather
than ignored. The bounds are the specification's: 1000 events and 300 s per batch, 20 retries and 900 s of
delay (the backoff cap), and an idle timer of at most seven days (a lane that sleeps longer is not a lane). A
throttle's window is at most a day and its runs at most 1,000: the store keeps each key's newest `runs` start
times in one row, rewritten at each start.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping, Sequence
from typing import Annotated, Any, Literal

import pydantic
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from orchestrator.core.backoff import MAX_RETRY_DELAY_SECONDS
from orchestrator.core.envelope_paths import EVENT_FIELDS, why_unresolvable
from orchestrator.core.errors import CommandError
from orchestrator.core.globs import compile_type_glob, owned, validate_alias, validate_glob
from orchestrator.core.instants import INSTANT_PATH, instant_of
from orchestrator.core.limits import MAX_EVENTS_PER_BATCH, MAX_WINDOW_SECONDS, Limits
from orchestrator.core.paths import validate_path
from orchestrator.core.templates import holes, why_no_hole
from orchestrator.core.validation import FieldProblem, field_errors_message
from orchestrator.core.written import never_written

MAX_RETRY_ATTEMPTS = 20
DEFAULT_RETRY_DELAY_SECONDS = 30.0
MAX_IDLE_SECONDS = 7 * 24 * 3600
MIN_PRIORITY, MAX_PRIORITY = 1, 5
MAX_THROTTLE_SECONDS = 86_400.0
MAX_THROTTLE_RUNS = 1_000
# What the store keeps a count in (PostgreSQL's integer).
MAX_INT32 = 2_147_483_647
NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"
ACTION_TYPES = ("workflow", "thread_item", "object")

WhereOp = Literal["eq", "neq", "in", "not_in", "exists", "gt", "gte", "lt", "lte", "prefix", "contains"]
_ORDERING_OPS = ("gt", "gte", "lt", "lte")


class _Strict(BaseModel):
    # Dumped by alias (`not`, never the field's name `not_`): a stored or planned body is what the user wrote.
    model_config = ConfigDict(extra="forbid", frozen=True, serialize_by_alias=True)


def _type_glob(glob: str) -> str:
    return validate_glob(glob, "type")


def _alias_glob(glob: str) -> str:
    return validate_glob(glob, "alias")


# Validated one by one, so that an error names the glob's index (`listener.owns.1`).
TypeGlob = Annotated[str, AfterValidator(_type_glob)]
AliasGlob = Annotated[str, AfterValidator(_alias_glob)]


def _alias_or_template(alias: str) -> str:
    # A template alias is checked once rendered; a literal one is checked now.
    return alias if "{{" in alias else validate_alias(alias)


class WhereCondition(_Strict):
    path: str
    op: WhereOp
    # Validated even when left out, so that `exists` gets its default of true and other ops are told.
    value: Any = Field(default=None, validate_default=True)

    _path = field_validator("path")(validate_path)

    @model_validator(mode="before")
    @classmethod
    def _exists_is_never_null(cls, data: Any) -> Any:
        # Left out, `exists` is true; a null written out would be kept as true, not as written: refused instead.
        if isinstance(data, dict) and data.get("op") == "exists" and "value" in data and data["value"] is None:
            raise FieldProblem("value", "op exists takes true (present) or false (missing), or no value (true)")
        return data

    @field_validator("value")
    @classmethod
    def _value_fits_op(cls, value: Any, info: ValidationInfo) -> Any:
        op = info.data.get("op")
        if op is None:
            return value
        if op in ("in", "not_in"):
            if not isinstance(value, list):
                raise ValueError(f"op {op} needs a list value")
            # Checked on input (validated with a context), not when a stored body is read: a listener saved before
            # the bound still routes.
            if len(value) > MAX_WHERE_VALUES and isinstance(info.context, dict):
                raise ValueError(f"op {op} takes at most {MAX_WHERE_VALUES} values ({len(value)} given)")
        elif op == "exists":
            if value is None:
                return True
            if not isinstance(value, bool):
                raise ValueError("op exists takes a boolean value (true: present, false: missing)")
        elif value is None:
            raise ValueError(f"op {op} needs a value (null never matches; use op exists)")
        elif op in _ORDERING_OPS and (isinstance(value, bool) or not isinstance(value, int | float | str)):
            raise ValueError(f"op {op} needs a number or a string value")
        elif (
            op in _ORDERING_OPS
            and info.data.get("path") == INSTANT_PATH
            # When input is checked (a save, a stream, a wait: each validates with a context), not when a stored
            # body is read: one saved before the check compares as text, in Python and SQL alike.
            and isinstance(info.context, dict)
            and instant_of(value) is None
        ):
            raise ValueError(
                f"{INSTANT_PATH} compares with an instant: ISO 8601 with seconds and a zone (2026-12-06T14:00:00Z,"
                " 2026-12-06T15:00:00.250+01:00)"
            )
        elif op == "prefix" and not isinstance(value, str):
            raise ValueError("op prefix needs a string value (what the string at path starts with)")
        return value


# How deep `any` and `not` groups may nest (a filter is data a person writes, not a program).
MAX_WHERE_DEPTH = 4


# The most globs one list of a listener holds, and the most conditions (or groups) at one level of `where`.
MAX_GLOBS = 100
MAX_WHERE_ITEMS = 50
# The most conditions and `in`/`not_in` values one filter holds, its groups' counted in: each is a check of every
# event the listener could take, in the routing statement and in the API's process (`simulate_listener`,
# `explain_event`), where 100,000 values held a simulation of 330 events for 24 s.
MAX_WHERE_VALUES = 1_000


class WhereAny(_Strict):
    """Holds when one of its conditions (or groups) holds."""

    any: list[WhereItem] = Field(min_length=1, max_length=MAX_WHERE_ITEMS)


class WhereNot(_Strict):
    """Holds when its condition (or group) does not."""

    not_: WhereItem = Field(alias="not")

    @model_validator(mode="before")
    @classmethod
    def _one_in_a_list(cls, data: Any) -> Any:
        # A group written as `any`'s is (`{"not": [condition]}`): one item is that item. Two or more are refused:
        # "none of them" and "not all of them" are both fair readings, and a filter must not guess.
        if isinstance(data, dict) and isinstance(data.get("not"), list):
            items = data["not"]
            if len(items) != 1:
                raise FieldProblem(
                    "not",
                    'takes one condition or group: for none of several, {"not": {"any": [...]}}; for not all of'
                    ' them, {"any": [{"not": ...}, ...]}',
                )
            return {**data, "not": items[0]}
        return data


def _where_kind(item: Any) -> str:
    if isinstance(item, dict):
        return "where_any" if "any" in item else "where_not" if "not" in item else "where_condition"
    return (
        "where_any" if isinstance(item, WhereAny) else "where_not" if isinstance(item, WhereNot) else "where_condition"
    )


# Told apart by their keys, so a bad condition is refused as a condition (`filter.where.0.op: ...`), not as each
# thing it might have been. The tags are left out of an error's location (`WHERE_TAGS`).
WhereItem = Annotated[
    Annotated[WhereCondition, Tag("where_condition")]
    | Annotated[WhereAny, Tag("where_any")]
    | Annotated[WhereNot, Tag("where_not")],
    Discriminator(_where_kind),
]
WHERE_TAGS = ("where_condition", "where_any", "where_not")
WhereAny.model_rebuild()
WhereNot.model_rebuild()


def where_conditions(items: Sequence[WhereItem], field: str = "filter.where") -> list[tuple[str, WhereCondition]]:
    """Every condition of a `where`, groups opened, each with its field (`filter.where.1.any.0`)."""
    found: list[tuple[str, WhereCondition]] = []
    for n, item in enumerate(items):
        here = f"{field}.{n}"
        if isinstance(item, WhereAny):
            found += where_conditions(item.any, f"{here}.any")
        elif isinstance(item, WhereNot):
            found += where_conditions([item.not_], f"{here}.not")
        else:
            found.append((here, item))
    return found


def _holds_always(item: WhereItem) -> bool | None:
    """True when a `where` item holds whatever the event, False when it never does, None when that depends on the
    event: `in` with no values is never, `not_in` with none always (a path missing passes `not_in`). A `null` among
    them is none: a path that reaches null counts as missing."""
    if isinstance(item, WhereAny):
        found = [_holds_always(inner) for inner in item.any]
        return True if True in found else False if all(f is False for f in found) else None
    if isinstance(item, WhereNot):
        inner = _holds_always(item.not_)
        return None if inner is None else not inner
    if item.op in ("in", "not_in") and all(v is None for v in item.value):
        return item.op == "not_in"
    return None


def never_holding(flt: ListenerFilter) -> list[str]:
    """The `where` items that no event can pass (`in: []`, alone or in a group that holds only so), each as `field:
    why`: the filter would never let an event through."""
    return [
        f"filter.where.{n}: never holds (it needs an `in` of no value but null, which no path holds), so nothing"
        " would ever pass the filter"
        for n, item in enumerate(flt.where)
        if _holds_always(item) is False
    ]


# The platform's types whose events `aliases` can take: those at an alias, and a graph change by its nodes' ids.
# Every other type (an execution's, a listener's, the application's own) has no place.
PLACED_TYPES = tuple(t for t, fields in EVENT_FIELDS.items() if "alias" in fields or "graph" in fields)


def placeless(flt: ListenerFilter) -> list[str]:
    """`aliases` on types none of whose events has a place, as `field: why`: nothing would pass the filter."""
    if flt.aliases is None or flt.types is None:
        return []
    if any(compile_type_glob(glob).matches(t) for glob in flt.types for t in PLACED_TYPES):
        return []
    return [
        f"filter.aliases: no event of types {flt.types} is at an alias (only {', '.join(PLACED_TYPES)} are), so"
        " nothing would ever pass the filter; leave aliases out"
    ]


def _weight(item: WhereItem) -> int:
    """The checks a `where` item asks of each event: one a condition, and one more for each `in`/`not_in` value."""
    if isinstance(item, WhereAny):
        return sum(_weight(i) for i in item.any)
    if isinstance(item, WhereNot):
        return _weight(item.not_)
    return 1 + (len(item.value) if item.op in ("in", "not_in") else 0)


def _depth(item: WhereItem) -> int:
    if isinstance(item, WhereAny):
        return 1 + max(_depth(i) for i in item.any)
    if isinstance(item, WhereNot):
        return 1 + _depth(item.not_)
    return 0


class ListenerFilter(_Strict):
    # An empty list would match nothing, ever: refused as a mistake rather than kept as a dead listener. A
    # listener is read by people and compiled per event: a few globs say what thousands would (`tickets/**`).
    types: list[TypeGlob] | None = Field(default=None, min_length=1, max_length=MAX_GLOBS)
    aliases: list[AliasGlob] | None = Field(default=None, min_length=1, max_length=MAX_GLOBS)
    # Conditions that must all hold; `any` and `not` groups nest (at most MAX_WHERE_DEPTH deep).
    where: list[WhereItem] = Field(default_factory=list, max_length=MAX_WHERE_ITEMS)

    @field_validator("where")
    @classmethod
    def _shallow(cls, where: list[WhereItem], info: ValidationInfo) -> list[WhereItem]:
        if any(_depth(item) > MAX_WHERE_DEPTH for item in where):
            raise ValueError(f"any and not groups nest at most {MAX_WHERE_DEPTH} deep")
        # On input only, as an `in`'s own bound: a stored body saved before it is read as it was saved.
        weight = sum(_weight(item) for item in where) if isinstance(info.context, dict) else 0
        if weight > MAX_WHERE_VALUES:
            raise ValueError(
                f"at most {MAX_WHERE_VALUES} conditions and in/not_in values in all, its groups' counted in"
                f" ({weight} given)"
            )
        return where


class WaitCondition(ListenerFilter):
    """What a run's wait hears: a listener's filter (no `types`: events of any type, as a listener's)."""


# How long a cancelled run may clean up before it is terminated, by default and at most.
DEFAULT_CANCEL_GRACE_SECONDS = 10.0
MAX_CANCEL_GRACE_SECONDS = 3600.0
MAX_CANCEL_ON = 10


class CancelOn(WaitCondition):
    """An event that cancels the listener's running runs in its session: those whose lane key equals the event's
    value at `key` (no key: every running run of the listener in the session), if it committed after the run's
    batch. The run gets Temporal's cancellation and `grace_seconds` to clean up, then is terminated. Its types
    are required (SPEC 17: `[{types, where?, key?}]`): a cancellation on any event is too easy to write by mistake."""

    types: list[TypeGlob] = Field(min_length=1, max_length=MAX_GLOBS)
    key: str | None = None
    grace_seconds: float = Field(default=DEFAULT_CANCEL_GRACE_SECONDS, ge=0, le=MAX_CANCEL_GRACE_SECONDS)

    @field_validator("key")
    @classmethod
    def _key_path(cls, value: str | None) -> str | None:
        return None if value is None else validate_path(value)


class Concurrency(_Strict):
    mode: Literal["serial", "keyed", "parallel", "none"] = "serial"
    key: str | None = None
    # Bounded by what the store keeps (a 32-bit integer): past it, a clear refusal rather than the store's error.
    key_segments: int | None = Field(default=None, ge=1, le=MAX_INT32)
    # Above the deployment's `listener_parallel_runs` it is lowered to that, not refused.
    max_parallel: int = Field(default=4, ge=1, le=MAX_INT32)

    @field_validator("key")
    @classmethod
    def _key_path(cls, value: str | None) -> str | None:
        return None if value is None else validate_path(value)

    @model_validator(mode="after")
    def _fields_fit_mode(self) -> Concurrency:
        if self.mode == "none":
            raise ValueError(
                "mode none names a connection listener, which is not saved: open it as a stream"
                " (GET /v1/sessions/{id}/stream with the filter and batch)"
            )
        if self.mode == "keyed" and self.key is None:
            raise FieldProblem("key", "mode keyed needs a key (a dotted path into the event)")
        if self.mode != "keyed" and (self.key is not None or self.key_segments is not None):
            field = "key" if self.key is not None else "key_segments"
            raise FieldProblem(field, f"key and key_segments belong to mode keyed, not {self.mode}")
        if self.mode == "serial" and "max_parallel" in self.model_fields_set:
            raise FieldProblem("max_parallel", "does not apply to mode serial (one run at a time)")
        return self


class BatchSpec(_Strict):
    window_seconds: float = Field(default=0, ge=0, le=MAX_WINDOW_SECONDS)
    max_events: int = Field(default=100, ge=1, le=MAX_EVENTS_PER_BATCH)
    distinct_by: str | None = None
    # Debounce: the window closes only after this long with no new event (and not before `window_seconds` after
    # its first), and never later than `max_wait_seconds` after its first event.
    debounce_seconds: float | None = Field(default=None, gt=0, le=MAX_WINDOW_SECONDS)
    max_wait_seconds: float | None = Field(default=None, gt=0, le=MAX_WINDOW_SECONDS)

    @field_validator("debounce_seconds", "max_wait_seconds")
    @classmethod
    def _wait_within_limit(cls, value: float | None, info: ValidationInfo) -> float | None:
        limits = info.context.get("limits") if isinstance(info.context, dict) else None
        if value is not None and isinstance(limits, Limits) and value > limits.max_window_seconds:
            raise ValueError(f"must be at most {limits.max_window_seconds:g} (the deployment's longest window)")
        return value

    @model_validator(mode="after")
    def _fires_as_declared(self) -> BatchSpec:
        if self.max_wait_seconds is not None and self.debounce_seconds is None:
            raise FieldProblem("max_wait_seconds", "caps a debounce: declare debounce_seconds too")
        if (
            self.debounce_seconds is not None
            and self.max_wait_seconds is not None
            and self.max_wait_seconds < self.debounce_seconds
        ):
            raise FieldProblem(
                "max_wait_seconds",
                f"max_wait_seconds ({self.max_wait_seconds:g}) below debounce_seconds ({self.debounce_seconds:g})"
                " could never let a quiet period end the window",
            )
        if self.max_wait_seconds is not None and self.max_wait_seconds < self.window_seconds:
            # With a debounce, `window_seconds` is the least a window stays open (`lane_clock.window_close`).
            raise FieldProblem(
                "max_wait_seconds",
                f"max_wait_seconds ({self.max_wait_seconds:g}) below window_seconds ({self.window_seconds:g})"
                " would close the window before it had been open window_seconds",
            )
        return self

    @field_validator("distinct_by")
    @classmethod
    def _distinct_path(cls, value: str | None) -> str | None:
        return None if value is None else validate_path(value)

    @field_validator("window_seconds")
    @classmethod
    def _window_within_limit(cls, value: float, info: ValidationInfo) -> float:
        limits = info.context.get("limits") if isinstance(info.context, dict) else None
        if isinstance(limits, Limits) and value > limits.max_window_seconds:
            raise ValueError(f"must be at most {limits.max_window_seconds:g}")
        return value

    @field_validator("max_events")
    @classmethod
    def _events_within_limit(cls, value: int, info: ValidationInfo) -> int:
        limits = info.context.get("limits") if isinstance(info.context, dict) else None
        if isinstance(limits, Limits) and value > limits.max_events_per_batch:
            raise ValueError(f"must be at most {limits.max_events_per_batch}")
        return value


# A Temporal task queue's name: what a worker of any language polls. The `/_sys/` names are Temporal's own.
TASK_QUEUE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,199}$"


class WorkflowAction(_Strict):
    type: Literal["workflow"]
    workflow: str = Field(min_length=1, max_length=200)
    input: Any = None
    task_queue: str | None = Field(
        default=None,
        pattern=TASK_QUEUE_PATTERN,
        description="the Temporal task queue the run starts on, where a worker of any language polls (default:"
        " the platform's); its run reads and writes the session through the platform's activities by name",
    )


def _typed_or_template(written: Any) -> Any:
    # What a write action writes is rendered per batch: an object, or a string that is a template. Whether it can
    # ever be written (its `type`, a whole hole's path, the write's own model and limits) is one check's,
    # `written.never_written`'s (`parse_declaration`), as the run checks it rendered.
    if not isinstance(written, dict | str):
        raise ValueError("must be an object (or a template that renders to one)")
    return written


class ThreadItemAction(_Strict):
    type: Literal["thread_item"]
    alias: str
    item: Any

    _alias = field_validator("alias")(_alias_or_template)
    _item = field_validator("item")(_typed_or_template)


class ObjectAction(_Strict):
    type: Literal["object"]
    alias: str
    value: Any

    _alias = field_validator("alias")(_alias_or_template)
    _value = field_validator("value")(_typed_or_template)


Action = Annotated[WorkflowAction | ThreadItemAction | ObjectAction, Field(discriminator="type")]


class RetrySpec(_Strict):
    # 0 is refused at save (`parse_declaration`: a retry that would do nothing), but read back from versions
    # saved before that rule, where it means no repeat.
    attempts: int = Field(ge=0, le=MAX_RETRY_ATTEMPTS)
    # The seed's `{"attempts": 2}` means a repeat 30 s after the failure, another 60 s after that.
    delay_seconds: float = Field(default=DEFAULT_RETRY_DELAY_SECONDS, ge=0, le=MAX_RETRY_DELAY_SECONDS)


class ReceiptSpec(_Strict):
    alias: str

    _alias = field_validator("alias")(validate_alias)


class IdleSpec(_Strict):
    after_seconds: float = Field(gt=0, le=MAX_IDLE_SECONDS)


class ThrottleSpec(_Strict):
    """At most `runs` of the listener's batches act (start a run, or write) per `per_seconds`, per the value at
    `key` (made a key as a lane key is: text, `~` when missing), else per listener; in each session. A batch
    beyond it waits in its lane until the throttle lets it go (`throttles.py`): none is dropped."""

    per_seconds: float = Field(gt=0, le=MAX_THROTTLE_SECONDS)
    runs: int = Field(ge=1, le=MAX_THROTTLE_RUNS)
    key: str | None = None

    @field_validator("key")
    @classmethod
    def _key_path(cls, value: str | None) -> str | None:
        return None if value is None else validate_path(value)


class ListenerDeclaration(_Strict):
    name: str = Field(pattern=NAME_PATTERN)
    filter: ListenerFilter
    concurrency: Concurrency = Field(default_factory=Concurrency)
    batch: BatchSpec = Field(default_factory=BatchSpec)
    action: Action
    retry: RetrySpec | None = None
    receipt: ReceiptSpec | None = None
    idle: IdleSpec | None = None
    # Alias globs this listener's actions and runs may write; None means anywhere.
    owns: list[AliasGlob] | None = Field(default=None, max_length=MAX_GLOBS)
    # 1 to 5, higher first when workers are short: its runs' workflow tasks go ahead of lower ones' on the
    # task queue (Temporal's priority keys, where the server has them). None: Temporal's default (3).
    priority: int | None = Field(default=None, ge=MIN_PRIORITY, le=MAX_PRIORITY)
    description: str | None = Field(default=None, max_length=2000)
    # Events that cancel this listener's running runs (a workflow action's).
    cancel_on: list[CancelOn] | None = Field(default=None, min_length=1, max_length=MAX_CANCEL_ON)
    # How often its batches may act; those beyond wait in their lane.
    throttle: ThrottleSpec | None = None

    @field_validator("cancel_on")
    @classmethod
    def _cancels_runs(cls, cancel_on: list[CancelOn] | None, info: ValidationInfo) -> list[CancelOn] | None:
        action = info.data.get("action")
        if cancel_on is not None and action is not None and not isinstance(action, WorkflowAction):
            raise ValueError(f"{action.type} actions start no run to cancel (only a workflow action's runs are)")
        return cancel_on

    @field_validator("retry")
    @classmethod
    def _retry_repeats_runs(cls, retry: RetrySpec | None, info: ValidationInfo) -> RetrySpec | None:
        action = info.data.get("action")
        if retry is not None and action is not None and not isinstance(action, WorkflowAction):
            raise ValueError(f"{action.type} actions are never repeated (only a workflow action's failed run is)")
        return retry


def parse_declaration(
    body: Any, limits: Limits, event_types: Mapping[str, Mapping[str, Any]] | None = None
) -> ListenerDeclaration:
    """Validate a declaration body against the models, the deployment's limits and the application's event
    types (name to schema: a `data` path none of its types can hold is refused).

    Raises CommandError("invalid_request") whose message names each bad field as `listener.<path>`.
    """
    try:
        # Strict, like every command's arguments: a declaration is JSON a person wrote, and `"100"` or `true`
        # where a number belongs is a mistake to name, not a value to guess (lax parsing made `true` one).
        decl = ListenerDeclaration.model_validate(body, strict=True, context={"limits": limits})
    except pydantic.ValidationError as exc:
        message = field_errors_message(exc, "listener", union_tags=(*ACTION_TYPES, *WHERE_TAGS))
        raise CommandError("invalid_request", message) from None
    unresolvable = unresolvable_paths(decl.filter, decl.batch, decl.concurrency.key, event_types)
    # A lane with `idle` also gets its own `lane.idle`, whatever the filter says: its templates may read it.
    types = decl.filter.types
    template_types = [*types, "lane.idle"] if types is not None and decl.idle is not None else types
    unresolvable += unresolvable_holes(decl.action, template_types, event_types)
    if decl.throttle is not None and decl.throttle.key is not None:
        why = why_unresolvable(decl.throttle.key, types, event_types)
        if why is not None:
            unresolvable.append(f"throttle.key: path {decl.throttle.key!r} never resolves: {why}")
    problems = [f"listener.{problem}" for problem in unresolvable]
    problems += [f"listener.{problem}" for problem in unknown_types(decl.filter.types, event_types)]
    problems += [f"listener.{problem}" for problem in never_holding(decl.filter) + placeless(decl.filter)]
    for n, cancel in enumerate(decl.cancel_on or ()):
        if cancel.key is not None and decl.concurrency.mode != "keyed":
            problems.append(
                f"listener.cancel_on.{n}.key: a key finds the run by its lane's key, which only a keyed listener's"
                f" lanes have (this one is {decl.concurrency.mode}); leave it out to cancel every run of the listener"
            )
        found = (
            unresolvable_paths(cancel, BatchSpec(), cancel.key, event_types)
            + unknown_types(cancel.types, event_types)
            + never_holding(cancel)
            + placeless(cancel)
        )
        problems += [
            f"listener.cancel_on.{n}.{problem.removeprefix('filter.').replace('concurrency.key', 'key')}"
            for problem in found
        ]
    if decl.retry is not None and decl.retry.attempts == 0:
        problems.append("listener.retry.attempts: 0 would repeat nothing; leave retry out (SPEC: refused, not ignored)")
    action = decl.action
    # A literal alias outside `owns` would answer `access_error` on every batch: refused now (a template alias
    # is checked once rendered).
    if not isinstance(action, WorkflowAction) and "{{" not in action.alias and not owned(decl.owns, action.alias):
        problems.append(f"listener.action.alias: {action.alias!r} is outside owns {decl.owns}")
    # What it writes, as far as the declaration decides it, passes what the run will check it with: every batch
    # of an item or value that never could would end `invocation_error` or `refused`.
    if isinstance(action, ThreadItemAction):
        problems += never_written("listener.action.item", action.item, item=True, max_bytes=limits.max_payload_bytes)
    elif isinstance(action, ObjectAction):
        problems += never_written("listener.action.value", action.value, item=False, max_bytes=limits.max_payload_bytes)
    if problems:
        raise CommandError("invalid_request", "; ".join(problems))
    batch = batch_in_effect(decl.batch, limits)
    return decl if batch is decl.batch else decl.model_copy(update={"batch": batch})


def batch_in_effect(batch: BatchSpec, limits: Limits) -> BatchSpec:
    """A batch as the deployment cuts it: `max_events` left out is the default, unless the deployment allows fewer
    (then it is that, and a saved listener saves it)."""
    if "max_events" in batch.model_fields_set or batch.max_events <= limits.max_events_per_batch:
        return batch
    return batch.model_copy(update={"max_events": limits.max_events_per_batch})


def dead_globs(types: Sequence[str] | None, event_types: Collection[str] | None) -> list[int]:
    """Where in a filter's `types` a glob matches no event type, neither the platform's nor one of `event_types`."""
    known = [*EVENT_FIELDS, *(event_types or ())]
    return [n for n, glob in enumerate(types or ()) if not any(compile_type_glob(glob).matches(t) for t in known)]


def stranded_globs(types: Sequence[str] | None, before: Collection[str], after: Collection[str]) -> list[int]:
    """The globs of a filter that match an event type while `before` are declared and none once `after` are: what a
    type's deletion would leave able to never fire (a glob that matched nothing before is not the deletion's)."""
    dead = set(dead_globs(types, before))
    return [n for n in dead_globs(types, after) if n not in dead]


def stranded_by(body: Mapping[str, Any], before: Collection[str], after: Collection[str]) -> list[tuple[str, str]]:
    """Where and which type globs of a stored listener body (`filter.types`, each `cancel_on`'s `types`) the change
    of declared types from `before` to `after` leaves matching nothing (`stranded_globs`)."""
    groups: list[tuple[str, Any]] = [("filter.types", (body.get("filter") or {}).get("types"))]
    groups += [(f"cancel_on.{n}.types", c.get("types")) for n, c in enumerate(body.get("cancel_on") or ()) if c]
    return [(f"{where}.{n}", types[n]) for where, types in groups for n in stranded_globs(types, before, after)]


def stranded_by_schemas(
    listeners: Mapping[str, Mapping[str, Any]], limits: Limits, before: Mapping[str, Any], after: Mapping[str, Any]
) -> list[str]:
    """The stored listeners (by name) that the change of event type schemas from `before` to `after` would leave
    reading a path no event of their types has (they could never fire), each with what its save would then say. One
    its save refuses already (saved before a check it fails) is not the change's."""
    stranded = []
    for name, body in sorted(listeners.items()):
        try:
            parse_declaration(dict(body), limits, before)
        except CommandError:
            continue
        try:
            parse_declaration(dict(body), limits, after)
        except CommandError as err:
            stranded.append(f"{name!r} ({err.message})")
    return stranded


def unknown_types(types: Sequence[str] | None, event_types: Mapping[str, Any] | None) -> list[str]:
    """The type globs of a filter that no event type can ever match, neither the platform's nor one the
    application declared (a typo, or a type not declared yet), each with the closest known name."""
    known = [*EVENT_FIELDS, *(event_types or {})]
    problems = []
    for n in dead_globs(types, list(event_types or {})):
        glob = (types or [])[n]
        hint = type_hint(glob, known)
        problems.append(f"filter.types.{n}: {glob!r} matches no event type, the platform's nor the app's{hint}")
    return problems


def type_hint(name: str, known: Sequence[str]) -> str:
    """What to say of a type name or glob no known type answers to: the closest known one (a glob with each of its
    segments put closest), or where to declare one."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6) or _close_glob(name, known)
    return f"; did you mean {close[0]!r}?" if close else "; declare it first (save_event_type)"


def _close_glob(glob: str, known: Sequence[str]) -> list[str]:
    """A glob with its literal segments each put closest to a known type's segment at that place (`widgt.*` ->
    `widget.*`), when that matches a known type; else nothing."""
    if "*" not in glob:
        return []
    parts = glob.split(".")
    near = []
    for place, part in enumerate(parts):
        if "*" in part:
            near.append(part)
            continue
        seen = sorted({name.split(".")[place] for name in known if len(name.split(".")) > place})
        near.append((difflib.get_close_matches(part, seen, n=1, cutoff=0.6) or [part])[0])
    guess = ".".join(near)
    return [guess] if guess != glob and any(compile_type_glob(guess).matches(name) for name in known) else []


def unresolvable_paths(
    flt: ListenerFilter,
    batch: BatchSpec,
    key: str | None = None,
    event_types: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[str]:
    """The paths into events (`where` conditions, the lane key, `distinct_by`) that can never resolve for the
    filter's types, each as `field: path ... never resolves: why` (a saved listener's and a stream's alike)."""
    paths = [(f"{field}.path", c.path) for field, c in where_conditions(flt.where)]
    if key is not None:
        paths.append(("concurrency.key", key))
    if batch.distinct_by is not None:
        paths.append(("batch.distinct_by", batch.distinct_by))
    return [
        f"{field}: path {path!r} never resolves: {why}"
        for field, path in paths
        if (why := why_unresolvable(path, flt.types, event_types)) is not None
    ]


def action_templates(action: WorkflowAction | ThreadItemAction | ObjectAction) -> dict[str, Any]:
    """What an action renders per batch, by field: a workflow's input, a write's alias and its item or value."""
    if isinstance(action, WorkflowAction):
        return {"input": action.input}
    if isinstance(action, ThreadItemAction):
        return {"alias": action.alias, "item": action.item}
    return {"alias": action.alias, "value": action.value}


def unresolvable_holes(
    action: WorkflowAction | ThreadItemAction | ObjectAction,
    types: list[str] | None,
    event_types: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[str]:
    """The template holes of an action that no batch of the listener's types can fill, as `field: ... why`."""
    fields = action_templates(action)
    return [
        f"action.{field}: template path {path!r} never resolves: {why}"
        for field, template in fields.items()
        for path in holes(template)
        if (why := why_no_hole(path, types, event_types)) is not None
    ]


def effective_max_parallel(concurrency: Concurrency, limits: Limits) -> int:
    """How many runs may be in flight: the declared max_parallel, capped (not refused) by the limit.

    Serial is always one, whatever max_parallel holds.
    """
    if concurrency.mode == "serial":
        return 1
    return min(concurrency.max_parallel, limits.listener_parallel_runs)


def lane_run_slots(decl: ListenerDeclaration, limits: Limits) -> int | None:
    """How many runs one lane of this listener may hold at once: one under `serial` and `keyed` (a keyed
    listener's cap across keys is its key slots), `max_parallel` under `parallel`; None for a write action,
    whose fire holds no slot beyond itself."""
    if not isinstance(decl.action, WorkflowAction):
        return None
    return effective_max_parallel(decl.concurrency, limits) if decl.concurrency.mode == "parallel" else 1


def lane_timing(decl: ListenerDeclaration) -> dict[str, float | None]:
    """What a lane's clock needs of the declaration (`lane_clock.Declared`'s fields)."""
    batch = decl.batch
    return {
        "window_seconds": batch.window_seconds,
        "idle_after_seconds": decl.idle.after_seconds if decl.idle else None,
        "debounce_seconds": batch.debounce_seconds,
        "max_wait_seconds": batch.max_wait_seconds,
    }
