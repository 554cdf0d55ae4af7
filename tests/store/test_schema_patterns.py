"""A type's schema patterns are matched in time linear in the text (RE2): a pattern such as `(a+)+$` and a string
made for it took Python's engine time exponential in its length, holding the API (and its `/healthz`) for as long as
it ran; an emit key, which a public page may hold, could stop the platform. A pattern RE2 does not take is refused
at save, naming where it is."""

from __future__ import annotations

import pytest

from orchestrator.app_loader import UserApp
from orchestrator.dev.app_plan import plan_of
from orchestrator.platform import Platform
from tests.store.helpers import ok, refused

# Forty characters: 2^40 steps of Python's engine, the door never answered.
MADE_FOR_IT = "a" * 40 + "!"

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(
    ("schema", "data", "field"),
    [
        (
            {"type": "object", "properties": {"s": {"type": "string", "pattern": "(a+)+$"}}},
            {"s": MADE_FOR_IT},
            "data.s",
        ),
        # The pattern searched over the properties' names, by `patternProperties` and by what `additionalProperties`
        # leaves out.
        (
            {"type": "object", "patternProperties": {"(a+)+$": {}}, "additionalProperties": False},
            {MADE_FOR_IT: 1},
            "data",
        ),
    ],
)
async def test_a_pattern_made_to_backtrack_answers_at_once(
    platform: Platform, schema: dict[str, object], data: dict[str, object], field: str
) -> None:
    await ok(platform, "save_event_type", name="qa.re", schema=schema)
    sid = (await ok(platform, "open_session"))["session"]["id"]
    await refused(platform, "invalid_request", field, "emit_event", session_id=sid, type="qa.re", data=data)


async def test_patterns_still_match_as_they_say(platform: Platform) -> None:
    schema = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": r"^[a-z]+-\d{2,3}$"}},
        "patternProperties": {"^x-": {"type": "integer"}},
        "additionalProperties": False,
    }
    await ok(platform, "save_event_type", name="qa.code", schema=schema)
    sid = (await ok(platform, "open_session"))["session"]["id"]
    await ok(platform, "emit_event", session_id=sid, type="qa.code", data={"code": "ab-123", "x-n": 1})
    for field, data in (("data.code", {"code": "AB-1"}), ("data.x-n", {"x-n": "1"}), ("data", {"y": 1})):
        await refused(platform, "invalid_request", field, "emit_event", session_id=sid, type="qa.code", data=data)


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"type": "object", "properties": {"s": {"type": "string", "pattern": r"(a)\1"}}}, "properties.s.pattern"),
        ({"type": "object", "patternProperties": {"^(?=x)": {}}}, "patternProperties"),
        (
            {"type": "object", "anyOf": [{}, {"properties": {"t": {"pattern": "(?<!a)b"}}}]},
            "anyOf.1.properties.t.pattern",
        ),
        # A property named as a keyword that holds values is a schema all the same (it was not looked into).
        ({"type": "object", "properties": {"default": {"pattern": "^(?=a)(a+)+$"}}}, "properties.default.pattern"),
        ({"type": "object", "$defs": {"enum": {"pattern": "(?=a)"}}}, "$defs.enum.pattern"),
        ({"type": "object", "properties": {"s": {"pattern": "^.{1,2000}$"}}}, "invalid repetition size"),
    ],
)
async def test_a_pattern_not_matched_in_linear_time_is_refused_at_save(
    platform: Platform, schema: dict[str, object], where: str
) -> None:
    reply = await refused(platform, "invalid_request", where, "save_event_type", name="qa.slow", schema=schema)
    assert "no pattern matched in linear time" in reply["message"], reply
    assert "qa.slow" not in [t["name"] for t in (await ok(platform, "list_event_types"))["event_types"]]


async def test_a_type_saved_before_keeps_its_pattern_and_an_app_declaring_it_still_starts(platform: Platform) -> None:
    """A type saved by a release before the rule holds a lookahead: saved again as it is (the door, an app's plan)
    it is kept, and matched by Python's engine as it was; a new schema holding one is refused."""
    schema = {"type": "object", "properties": {"pw": {"type": "string", "pattern": "^(?=.*[0-9])[a-z0-9]{4,}$"}}}
    await platform.store.pool.execute(
        "INSERT INTO orchestrator.event_types (name, schema) VALUES ('qa.old', $1)", schema
    )
    await ok(platform, "save_event_type", name="qa.old", schema=schema)
    app = UserApp(name="tests.patterns", event_types=[{"name": "qa.old", "schema": schema}])
    assert [s.action for s in await plan_of(platform, app) if s.kind == "event_type"] == ["keep"], "planned"
    sid = (await ok(platform, "open_session"))["session"]["id"]
    await ok(platform, "emit_event", session_id=sid, type="qa.old", data={"pw": "abc1"})
    await refused(
        platform, "invalid_request", "data.pw", "emit_event", session_id=sid, type="qa.old", data={"pw": "abcd"}
    )
    changed = {**schema, "required": ["pw"]}
    await refused(
        platform, "invalid_request", "properties.pw.pattern", "save_event_type", name="qa.old", schema=changed
    )


async def test_a_json_schema_unicode_escape_is_read_as_its_character(platform: Platform) -> None:
    schema = {"type": "object", "properties": {"s": {"pattern": "^\\u00e9+$"}}}
    await ok(platform, "save_event_type", name="qa.uni", schema=schema)
    sid = (await ok(platform, "open_session"))["session"]["id"]
    await ok(platform, "emit_event", session_id=sid, type="qa.uni", data={"s": "éé"})
    await refused(platform, "invalid_request", "data.s", "emit_event", session_id=sid, type="qa.uni", data={"s": "e"})
