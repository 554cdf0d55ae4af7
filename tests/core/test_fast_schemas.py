"""The fast check of plain schemas says yes exactly when jsonschema does (2020-12), on generated schemas and data."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from orchestrator.core.fast_schemas import fast_check

VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from([0.5, 1.0, -2.0, 3.25]) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
    max_leaves=8,
)
TYPES = ["null", "boolean", "integer", "number", "string", "array", "object"]


def schemas() -> st.SearchStrategy[Any]:
    def node(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        parts: dict[str, st.SearchStrategy[Any]] = {
            "type": st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True),
            "properties": st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=2),
            "required": st.lists(st.sampled_from(["a", "b", "c"]), max_size=2, unique=True),
            "additionalProperties": inner,
            "items": inner,
            "enum": st.lists(VALUES, min_size=1, max_size=3),
            "const": VALUES,
            "minimum": st.integers(-3, 3) | st.just(0.5),
            "maximum": st.integers(-3, 3) | st.just(1.5),
            "exclusiveMinimum": st.integers(-3, 3),
            "exclusiveMaximum": st.integers(-3, 3),
            "minLength": st.integers(0, 3),
            "maxLength": st.integers(0, 3),
            "minItems": st.integers(0, 2),
            "maxItems": st.integers(0, 2),
            "title": st.just("t"),
        }
        return st.fixed_dictionaries({}, optional=parts)

    return st.recursive(st.booleans() | node(st.just(True)), node, max_leaves=5)


@settings(max_examples=1500)
@given(schema=schemas(), data=VALUES)
def test_a_plain_schema_is_decided_as_jsonschema_decides_it(schema: Any, data: Any) -> None:
    check = fast_check(schema)
    assert check is not None, "every generated schema is plain"
    assert check(data) is Draft202012Validator(schema).is_valid(data), (schema, data)


def test_a_schema_with_more_than_the_plain_keywords_gets_no_fast_check() -> None:
    assert fast_check({"type": "string", "pattern": "^a"}) is None
    assert fast_check({"$ref": "#/$defs/x", "$defs": {"x": {}}}) is None
    assert fast_check({"properties": {"a": {"format": "email"}}}) is None
    assert fast_check({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}) is None
