"""Validation messages: every field by its dotted path under a prefix, bounded in length."""

from __future__ import annotations

from typing import Literal

import pydantic
import pytest

from orchestrator.core.validation import MAX_ERRORS, field_errors_message


class _Inner(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    size: int = pydantic.Field(le=10)
    mode: Literal["a", "b"] = "a"


class _Outer(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    inner: list[_Inner]
    name: str


def _message(body: object, prefix: str = "cmd") -> str:
    with pytest.raises(pydantic.ValidationError) as caught:
        _Outer.model_validate(body)
    return field_errors_message(caught.value, prefix)


def test_each_error_is_named_by_path_and_joined() -> None:
    message = _message({"inner": [{"size": 11, "mode": "c"}], "extra": 1})
    assert message.split("; ") == [
        "cmd.inner.0.size: must be at most 10",
        "cmd.inner.0.mode: must be one of 'a' or 'b'",
        "cmd.name: is required",
        "cmd.extra: is not known",
    ]


def test_no_prefix_and_a_top_level_error() -> None:
    assert _message("nope", prefix="") == "body: must be a JSON object"


def test_the_list_of_errors_is_bounded() -> None:
    message = _message({"inner": [{"size": 99}] * (MAX_ERRORS + 5), "name": "x"})
    assert message.count("must be at most 10") == MAX_ERRORS
    assert message.endswith("and 5 more")
