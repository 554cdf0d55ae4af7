"""docs/listeners.md against the declaration models: every field, op, mode, action type, outcome and event type
is documented. The page's examples run through the HTTP door in `test_listeners_examples.py`."""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from orchestrator.core.declaration import ACTION_TYPES, Concurrency, ListenerDeclaration, WhereOp
from orchestrator.core.envelope_paths import EVENT_FIELDS
from orchestrator.core.outcomes import OutcomeStatus, SkipReason

DOC = Path(__file__).resolve().parents[2] / "docs" / "listeners.md"
TEXT = DOC.read_text(encoding="utf-8")


def models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    """The pydantic models inside an annotation: itself, or inside its unions, lists, Optional, Annotated."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for arg in typing.get_args(annotation):
        yield from models_in(arg)


def reachable_models(root: type[BaseModel]) -> list[type[BaseModel]]:
    seen: list[type[BaseModel]] = []
    todo = [root]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.append(model)
        for info in model.model_fields.values():
            todo.extend(models_in(info.annotation))
    return seen


def declaration_fields() -> set[tuple[str, str]]:
    """(model, JSON name) for every field of every model a declaration body can hold."""
    return {
        (model.__name__, info.alias or name)
        for model in reachable_models(ListenerDeclaration)
        for name, info in model.model_fields.items()
    }


def literal_values(annotation: Any) -> list[str]:
    if typing.get_origin(annotation) is typing.Literal:
        return [str(value) for value in typing.get_args(annotation)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [value for arg in typing.get_args(annotation) for value in literal_values(arg)]
    return []


def test_the_walk_finds_every_part_of_a_declaration() -> None:
    names = {model.__name__ for model in reachable_models(ListenerDeclaration)}
    assert {"ListenerFilter", "WhereCondition", "BatchSpec", "WorkflowAction", "ObjectAction"} <= names, names
    assert ("BatchSpec", "window_seconds") in declaration_fields()


@pytest.mark.parametrize(("model", "field"), sorted(declaration_fields()))
def test_every_declaration_field_is_documented(model: str, field: str) -> None:
    assert f"`{field}`" in TEXT, f"{model}.{field} is not in docs/listeners.md as `{field}`"


@pytest.mark.parametrize(
    "word",
    [
        *typing.get_args(WhereOp),
        *literal_values(Concurrency.model_fields["mode"].annotation),
        *ACTION_TYPES,
        *typing.get_args(OutcomeStatus),
        *typing.get_args(SkipReason),
        *EVENT_FIELDS,
    ],
)
def test_every_op_mode_action_outcome_and_event_type_is_documented(word: str) -> None:
    assert f"`{word}`" in TEXT, f"`{word}` is not in docs/listeners.md"
