"""Commands on threads: post an item, list items."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, JsonValue

from orchestrator.commands.explanation import Explanation
from orchestrator.commands.fields import (
    BULK,
    BULK_KEY,
    Alias,
    ClientId,
    IdempotencyKey,
    Limit,
    SessionId,
    check_payload,
)
from orchestrator.commands.registry import Request, command
from orchestrator.commands.replies import Reply, Shape
from orchestrator.core.errors import CommandError
from orchestrator.core.events import EventSource
from orchestrator.core.limits import MAX_WRITES_PER_REQUEST
from orchestrator.core.written import ThreadItem, item_payloads
from orchestrator.store.postgres import thread_item_row
from orchestrator.telemetry import TRACER

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext


def check_item(item: ThreadItem, max_bytes: int, field: str = "item") -> None:
    """The size limits of an item's message and metadata (the model checks their shape)."""
    for part, value in item_payloads(item, field):
        check_payload(part, value, max_bytes)


class PostThreadItem(Request):
    command: Literal["post_thread_item"]
    session_id: SessionId
    alias: Alias
    item: ThreadItem = Field(description="the item to post")
    client: ClientId | None = None
    idempotency_key: IdempotencyKey | None = None
    # Waits a few seconds for the router at most.
    explain: bool = Field(default=False, description="answer, beside the post, what routing made of its event")


class PostThreadItems(Request):
    command: Literal["post_thread_items"]
    session_id: SessionId
    alias: Alias
    items: Annotated[list[ThreadItem], Field(min_length=1, max_length=MAX_WRITES_PER_REQUEST, description=BULK)]
    client: ClientId | None = None
    idempotency_key: IdempotencyKey | None = Field(default=None, description=BULK_KEY)


class ListThreadItems(Request):
    command: Literal["list_thread_items"]
    session_id: SessionId
    alias: Alias
    after: str | None = Field(default=None, description="an item id: only the items posted after it")
    limit: Limit = Field(default=100, description="the most items answered")


class PostedItem(Shape):
    id: str
    alias: str


class PostThreadItemReply(Reply):
    item: PostedItem
    event_id: int = Field(description="its `thread.item_posted` event")
    explain: Explanation | None = Field(default=None, description="with `explain`: as `explain_event` answers")


class PostedItemId(Shape):
    id: str


class PostThreadItemsReply(Reply):
    items: list[PostedItemId] = Field(description="in the order given")
    event_ids: list[int]


class ListedItem(Shape):
    """A thread item, whole."""

    id: str
    type: str
    role: str | None
    message: JsonValue
    metadata: dict[str, Any] | None = None
    source: EventSource
    event_id: int
    created_at: datetime


class ListThreadItemsReply(Reply):
    items: list[ListedItem] = Field(description="oldest first")


@command(
    "post_thread_item",
    PostThreadItem,
    reply=PostThreadItemReply,
    errors=("not_found", "session_not_open", "limit_exceeded"),
    example={
        "command": "post_thread_item",
        "session_id": "ses_...",
        "alias": "chats/7",
        "item": {"type": "text", "role": "request", "message": "Is it still open?"},
        "client": "web",
    },
)
async def post_thread_item(platform: CommandContext, req: PostThreadItem) -> dict[str, Any]:
    """Append an item to a thread, with a `thread.item_posted` event; an item id already there answers the first
    post (items never change)."""
    limit = platform.settings.limits.max_payload_bytes
    check_item(req.item, limit)
    # Under the caller's span when there is one, else a new trace: the event keeps this span's traceparent.
    attributes = {"orchestrator.session": req.session_id, "orchestrator.alias": req.alias}
    with TRACER.start_as_current_span("post_thread_item", attributes=attributes) as span:
        item, event_id = await platform.store.post_thread_item(
            req.session_id,
            req.alias,
            req.item.model_dump(exclude_none=True),
            source={"client": req.client},
            idempotency_key=req.idempotency_key,
        )
        span.set_attribute("orchestrator.event_id", event_id)
    reply: dict[str, Any] = {"item": item, "event_id": event_id}
    if req.explain:
        from orchestrator.commands.explain import explained_once_routed

        reply["explain"] = await explained_once_routed(platform, req.session_id, event_id)
    return reply


@command(
    "post_thread_items",
    PostThreadItems,
    reply=PostThreadItemsReply,
    errors=("not_found", "session_not_open", "limit_exceeded"),
    example={
        "command": "post_thread_items",
        "session_id": "ses_...",
        "alias": "chats/7",
        "items": [
            {"type": "text", "role": "assistant", "message": "Yes, until six."},
            {"type": "json", "role": "system", "message": {"answered": True}},
        ],
    },
)
async def post_thread_items(platform: CommandContext, req: PostThreadItems) -> dict[str, Any]:
    """Many items on one thread in one transaction, all or none."""
    limits = platform.settings.limits
    if len(req.items) > limits.max_writes_per_request:
        raise CommandError(
            "limit_exceeded", f"items: {len(req.items)} items is over the limit of {limits.max_writes_per_request}"
        )
    rows = []
    for index, item in enumerate(req.items):
        check_item(item, limits.max_payload_bytes, f"items.{index}")
        rows.append(thread_item_row(item.model_dump(exclude_none=True)))
    attributes: dict[str, str | int] = {"orchestrator.session": req.session_id, "orchestrator.items": len(rows)}
    with TRACER.start_as_current_span("post_thread_items", attributes=attributes):
        posted = await platform.store.post_thread_items(
            req.session_id, req.alias, rows, source={"client": req.client}, idempotency_key=req.idempotency_key
        )
    return {"items": [{"id": item_id} for item_id, _ in posted], "event_ids": [event_id for _, event_id in posted]}


@command(
    "list_thread_items",
    ListThreadItems,
    reply=ListThreadItemsReply,
    errors=("not_found",),
    example={"command": "list_thread_items", "session_id": "ses_...", "alias": "chats/7", "limit": 50},
)
async def list_thread_items(platform: CommandContext, req: ListThreadItems) -> dict[str, Any]:
    """A thread's items, oldest first; with `after` (an item id), those posted after it."""
    items = await platform.store.list_thread_items(req.session_id, req.alias, after=req.after, limit=req.limit)
    return {"items": items}
