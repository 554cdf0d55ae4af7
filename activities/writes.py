"""A listener's write actions (`thread_item`, `object`): rendered, checked as the command would check them,
written with the listener as their source.

Owns the rule that both doors agree: a rendered item or value passes the same models and limits as a
`post_thread_item` or `write_object` sent by hand, so what the store would refuse is refused here, named by
its field, as an `invocation_error` (or `refused` over a limit), never retried. The write's idempotency key
is the lane and the batch's ids, so a fire that runs again writes once.
"""

from __future__ import annotations

from typing import Any

import pydantic

from orchestrator.commands.fields import check_payload
from orchestrator.commands.threads import check_item
from orchestrator.config import Settings
from orchestrator.core.declaration import ListenerDeclaration, ThreadItemAction
from orchestrator.core.errors import CommandError
from orchestrator.core.globs import owned, validate_alias
from orchestrator.core.templates import TemplateError, render
from orchestrator.core.validation import field_errors_message
from orchestrator.core.written import OBJECT_VALUE, ThreadItem
from orchestrator.store.engine_records import EngineRecords


async def write_action(
    store: EngineRecords,
    decl: ListenerDeclaration,
    session_id: str,
    context: dict[str, Any],
    depth: int,
    idempotency_key: str,
    max_payload_bytes: int,
) -> tuple[str, str | None]:
    """Render and write the action; answer the outcome's status and message."""
    action = decl.action
    assert not isinstance(action, dict)
    is_item = isinstance(action, ThreadItemAction)
    field = "action.item" if is_item else "action.value"
    try:
        alias = render(action.alias, context)  # type: ignore[union-attr]
        body = render(action.item if is_item else action.value, context)  # type: ignore[union-attr]
    except TemplateError as err:
        return "invocation_error", f"action: {err}"
    if not isinstance(alias, str):
        return "invocation_error", "action.alias: must render to a string"
    try:
        validate_alias(alias)
    except ValueError as err:
        return "invocation_error", f"action.alias: {err}"
    if not owned(decl.owns, alias):
        return "access_error", f"action.alias: {alias!r} is outside what the listener owns"
    source = {"listener": decl.name}
    try:
        if is_item:
            item = ThreadItem.model_validate(body)
            check_item(item, max_payload_bytes, field)
            await store.post_thread_item(
                session_id,
                alias,
                item.model_dump(exclude_none=True),
                source=source,
                depth=depth,
                idempotency_key=idempotency_key,
            )
        else:
            value = OBJECT_VALUE.validate_python(body)
            check_payload(field, value, max_payload_bytes)
            await store.write_object(
                session_id, alias, value, source=source, depth=depth, idempotency_key=idempotency_key
            )
    except pydantic.ValidationError as err:
        return "invocation_error", field_errors_message(err, field)
    except CommandError as err:
        refused = err.code in ("limit_exceeded", "session_not_open")
        return ("refused" if refused else "invocation_error"), err.message
    return "success", None


class StoreWriter:
    """Write actions through the store's own writes (`write_action`): the lane driver's `ActionWriter`."""

    def __init__(self, store: EngineRecords, settings: Settings) -> None:
        self.store, self.settings = store, settings

    async def write(
        self, decl: ListenerDeclaration, session_id: str, context: dict[str, Any], depth: int, key: str
    ) -> tuple[str, str | None]:
        return await write_action(
            self.store, decl, session_id, context, depth, key, self.settings.limits.max_payload_bytes
        )
