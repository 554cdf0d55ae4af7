"""Commands that make an application's own table an event source: `capture_table`, `uncapture_table`,
`list_captures` (docs/transactions.md). The trigger and its events are SQL (store/captures.py)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, StringConstraints, model_validator

from orchestrator.commands.fields import SessionId
from orchestrator.commands.registry import Request, command
from orchestrator.commands.replies import Reply, Shape
from orchestrator.core.errors import CommandError
from orchestrator.core.event_types import check_type_name
from orchestrator.core.validation import FieldProblem
from orchestrator.store.captures import declared_by_a_capture

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext

# `schema.table` or `table` (in `public`): plain lower-case names, as an application's migrations write them.
TableName = Annotated[
    str, StringConstraints(min_length=1, max_length=127, pattern=r"^([a-z_][a-z0-9_]{0,62}\.)?[a-z_][a-z0-9_]{0,62}$")
]
ColumnName = Annotated[str, StringConstraints(min_length=1, max_length=63, pattern=r"^[a-z_][a-z0-9_]*$")]
TypePrefix = Annotated[
    str, StringConstraints(min_length=1, max_length=100, pattern=r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")
]


def qualified(table: str) -> str:
    return table if "." in table else f"public.{table}"


class CaptureTable(Request):
    command: Literal["capture_table"]
    table: TableName = Field(description="the application's table, `schema.table` or `table` (in `public`)")
    type_prefix: TypePrefix = Field(description="its events are `<type_prefix>.created`, `.updated`, `.deleted`")
    session_column: ColumnName | None = Field(default=None, description="the column that holds each row's session")
    session_id: SessionId | None = Field(default=None, description="or one session every change goes to")
    exclude: list[ColumnName] = Field(
        default_factory=list, max_length=100, description="columns left out of the events (private)"
    )

    @model_validator(mode="after")
    def _one_session(self) -> CaptureTable:
        if (self.session_column is None) == (self.session_id is None):
            raise ValueError("session_column or session_id: exactly one says where the events go")
        for n, column in enumerate(self.exclude):
            if column in self.exclude[:n]:
                raise FieldProblem(
                    f"exclude.{n}", f"{column!r} is given twice (first as exclude.{self.exclude.index(column)})"
                )
        return self


class TableRef(Request):
    command: Literal["uncapture_table"]
    table: TableName = Field(description="a captured table")


class ListCaptures(Request):
    command: Literal["list_captures"]


class CaptureView(Shape):
    """A captured table."""

    table: str = Field(description="`schema.table`")
    type_prefix: str
    id_column: str
    session_column: str | None = Field(default=None, description="the column that names each row's session")
    session_id: str | None = Field(default=None, description="the one session every row's events go to")
    exclude: list[str] = Field(description="the columns left out of its events")
    types: list[str] = Field(description="the event types it declares")
    saved_at: datetime


class CaptureReply(Reply):
    capture: CaptureView


class UncaptureTableReply(CaptureReply):
    """The capture as it was."""


class ListCapturesReply(Reply):
    captures: list[CaptureView]


@command(
    "capture_table",
    CaptureTable,
    reply=CaptureReply,
    errors=("not_found",),
    example={
        "command": "capture_table",
        "table": "tickets",
        "type_prefix": "ticket",
        "session_column": "session_id",
        "exclude": ["internal_notes"],
    },
)
async def capture_table(platform: CommandContext, req: CaptureTable) -> dict[str, Any]:
    """Make the table's changes events, in the commit of each change: `<type_prefix>.created`, `.updated` and
    `.deleted` with `{_id, doc}` (and `changed`, `removed` on an update), declared as event types. Capturing a
    captured table again replaces its capture."""
    for kind in ("created", "updated", "deleted"):
        try:
            check_type_name(f"{req.type_prefix}.{kind}")
        except ValueError as err:
            raise CommandError("invalid_request", f"type_prefix: {err}") from None
    prefixes = await platform.store.capture_prefixes()
    table = qualified(req.table)
    owner, live = prefixes.get(req.type_prefix, (table, False))
    if live and owner != table:
        raise CommandError(
            "invalid_request", f"type_prefix: {req.type_prefix!r} is the prefix of the capture of {owner}"
        )
    # Types a capture declared (of this table, before, or of one dropped since) are a capture's to take again;
    # a type declared otherwise is not.
    declared = (await platform.store.event_schemas()).get(f"{req.type_prefix}.created")
    if declared is not None and not declared_by_a_capture(declared):
        raise CommandError(
            "invalid_request",
            f"type_prefix: {req.type_prefix}.created is already a declared event type; choose another prefix",
        )
    capture = await platform.store.capture_table(
        table, req.type_prefix, req.session_column, req.session_id, req.exclude
    )
    return {"capture": capture}


@command(
    "uncapture_table",
    TableRef,
    reply=UncaptureTableReply,
    errors=("not_found",),
    example={"command": "uncapture_table", "table": "tickets"},
)
async def uncapture_table(platform: CommandContext, req: TableRef) -> dict[str, Any]:
    """End a table's capture: its trigger goes; its event types and the events already written stay."""
    return {"capture": await platform.store.uncapture_table(qualified(req.table))}


@command("list_captures", ListCaptures, reply=ListCapturesReply, example={"command": "list_captures"})
async def list_captures(platform: CommandContext, req: ListCaptures) -> dict[str, Any]:
    """Every captured table."""
    return {"captures": await platform.store.list_captures()}
