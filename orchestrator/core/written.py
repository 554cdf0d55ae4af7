"""What a write writes: an object's value, a thread's item, and the weight of either against the payload limit.

Owns the one model of each, which every door that writes checks with: `write_object` and `post_thread_item` sent
by hand, a listener's write action once rendered (`activities/writes.py`) and, for what is literal in it, the same
action at save (`never_written`), so that the save and the run agree on what can be written. Raising the errors a
command answers is the commands' (`commands/fields.py`); this module only says what is wrong, naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Any

import pydantic
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
    TypeAdapter,
    WithJsonSchema,
)

from orchestrator.core.errors import ErrorCode
from orchestrator.core.templates import holes, never_an_object, never_text, whole_hole
from orchestrator.core.validation import FieldProblem, field_errors_message


def _json_object_with_type(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object")
    if not isinstance(value.get("type"), str) or not value["type"]:
        raise ValueError("must have a non-empty string field 'type'")
    return value


ObjectValue = Annotated[
    dict[str, Any],
    AfterValidator(_json_object_with_type),
    WithJsonSchema(
        {
            "type": "object",
            "required": ["type"],
            "properties": {"type": {"type": "string", "minLength": 1}},
            "description": "a JSON object with a non-empty string `type`",
        }
    ),
]
OBJECT_VALUE: TypeAdapter[dict[str, Any]] = TypeAdapter(ObjectValue)

ItemType = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_.-]*$")]


class ThreadItem(BaseModel):
    """A thread item, as posted by hand or by a listener's `thread_item` action.

    A `json` item's message may be any JSON value (the seed's agent inbox posts its failures as one); every
    other type's message is text.
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    id: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None = Field(
        default=None, description="the item's id (one is made when absent); an id already there answers that item"
    )
    type: ItemType = Field(description="`text`, `json`, `request`, ... (the app's own vocabulary)")
    role: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = Field(
        default=None, description="who speaks: `user`, `assistant`, `request`, ..."
    )
    message: JsonValue = Field(default=None, description="text; for a `json` item, any JSON value")
    metadata: dict[str, JsonValue] | None = Field(default=None, description="any JSON object kept with the item")

    @pydantic.model_validator(mode="after")
    def _text_unless_json(self) -> ThreadItem:
        if self.type != "json" and self.message is not None and not isinstance(self.message, str):
            raise FieldProblem("message", "must be a string (only a json item's message may be any JSON value)")
        return self


def item_payloads(item: ThreadItem, field: str = "item") -> Iterator[tuple[str, Any]]:
    """The parts of an item the payload limit weighs, each with its field: its message and its metadata."""
    if item.message is not None:
        yield f"{field}.message", item.message
    if item.metadata is not None:
        yield f"{field}.metadata", item.metadata


def payload_problem(field: str, value: Any, max_bytes: int) -> tuple[ErrorCode, str] | None:
    """What is wrong with a payload as an error code and a message naming the field (not JSON: `invalid_request`;
    over the deployment's limit: `limit_exceeded`), or None when it may be written."""
    if isinstance(value, str):
        size = len(value.encode())
    else:
        try:
            # Weighed as stored: UTF-8, a character as itself (an escape would weigh "é" six bytes, not two).
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            size = len(text.encode(errors="surrogatepass"))
        except (TypeError, ValueError) as err:
            return "invalid_request", f"{field}: not a JSON value ({err})"
    if size > max_bytes:
        return "limit_exceeded", f"{field}: {size} bytes is over the payload limit of {max_bytes}"
    return None


# What stands in for a templated `type` when what is literal in an item is checked: a json item's message may be
# anything, so no literal message is refused for a type not known yet.
_ANY_TYPE = "json"


def never_written(field: str, template: Any, *, item: bool, max_bytes: int) -> list[str]:
    """Why a write action's item (`item`) or value, as declared, can never be written, as `field: why`; empty when
    some batch may render it to something its command takes.

    A template-free value or item is checked whole, as the run would check it rendered; one with holes, for its
    literal parts only (a dict's keys are never rendered, nor a field without a hole), each judged as it will
    stand; a whole hole for what its path can hold (`batch.count` is never an object). Nothing that some batch
    could render to something writable is refused.
    """
    if isinstance(template, str):
        path = whole_hole(template)
        if path is None:
            return [f"{field}: must render to a JSON object (holes inside a longer string render as text)"]
        if never_an_object(path):
            return [f"{field}: must render to a JSON object; {path!r} is never one"]
        return []
    if not isinstance(template, dict):
        return []
    # A field that takes text, filled whole by a hole that is never text (`"type": "{{ batch.count }}"`).
    texts = ["id", "type", "role"] if item else ["type"]
    if item and template.get("type") not in (None, "json") and not holes(template.get("type")):
        texts.append("message")  # only a json item's message may be any JSON value
    problems = [
        f"{field}.{key}: must render to a string; {path!r} never is"
        for key in texts
        if isinstance(template.get(key), str) and (path := whole_hole(template[key])) is not None and never_text(path)
    ]
    # A key is never rendered: one an item does not have is refused whatever its value renders to.
    fields = ThreadItem.model_fields if item else None
    literal = {
        key: value for key, value in template.items() if not holes(value) or (fields is not None and key not in fields)
    }
    if "type" in template and "type" not in literal:
        literal["type"] = _ANY_TYPE
    try:
        if item:
            parts = list(item_payloads(ThreadItem.model_validate(literal), field))
        else:
            OBJECT_VALUE.validate_python(literal)
            parts = [] if holes(template) else [(field, template)]
    except pydantic.ValidationError as err:
        return [*problems, field_errors_message(err, field)]
    return problems + [
        problem[1] for name, value in parts if (problem := payload_problem(name, value, max_bytes)) is not None
    ]
