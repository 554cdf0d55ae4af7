"""Listener declarations: the SPEC's example parses, and every bad field is refused by its dotted path."""

from __future__ import annotations

import copy
import re
from typing import Any

import pydantic
import pytest

from orchestrator.config import Settings
from orchestrator.core.connection_listener import parse_stream
from orchestrator.core.declaration import (
    Concurrency,
    ObjectAction,
    WorkflowAction,
    effective_max_parallel,
    parse_declaration,
)
from orchestrator.core.errors import CommandError
from orchestrator.core.limits import Limits

EXAMPLE: dict[str, Any] = {
    "name": "orchestrate",
    "filter": {
        "types": ["object.**", "thread.item_posted", "graph.changed"],
        "aliases": ["missions/**", "app/missions/sweep"],
        "where": [{"path": "item.type", "op": "not_in", "value": ["text", "thinking"]}],
    },
    "concurrency": {"mode": "serial"},
    "batch": {"window_seconds": 2, "max_events": 100, "distinct_by": None},
    "action": {"type": "workflow", "workflow": "orchestrator", "input": {"events": "{{ batch.messages }}"}},
    "retry": {"attempts": 2, "delay_seconds": 30},
    "receipt": {"alias": "ops/receipts"},
}


def _with(path: str, value: Any) -> dict[str, Any]:
    body = copy.deepcopy(EXAMPLE)
    *parents, last = path.split(".")
    target: Any = body
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    target[last] = value
    return body


def _refusal(body: Any, limits: Limits | None = None) -> str:
    with pytest.raises(CommandError) as caught:
        parse_declaration(body, limits or Limits())
    assert caught.value.code == "invalid_request"
    return caught.value.message


def test_the_specification_example_parses() -> None:
    decl = parse_declaration(EXAMPLE, Limits())
    assert decl.name == "orchestrate"
    assert isinstance(decl.action, WorkflowAction)
    assert decl.concurrency.mode == "serial"
    assert decl.batch.max_events == 100
    assert decl.filter.where[0].op == "not_in"


def test_defaults_for_a_minimal_body() -> None:
    decl = parse_declaration(
        {"name": "views", "filter": {}, "action": {"type": "object", "alias": "views/x", "value": {"type": "view"}}},
        Limits(),
    )
    assert decl.filter.types is None and decl.filter.aliases is None and decl.filter.where == []
    assert decl.concurrency == Concurrency()
    assert decl.batch.window_seconds == 0 and decl.batch.max_events == 100
    assert isinstance(decl.action, ObjectAction)
    assert decl.retry is None and decl.receipt is None and decl.idle is None and decl.owns is None


def test_exists_defaults_to_true() -> None:
    decl = parse_declaration(_with("filter.where", [{"path": "alias", "op": "exists"}]), Limits())
    assert decl.filter.where[0].value is True


def _write_action(action: dict[str, Any]) -> dict[str, Any]:
    body = _with("action", action)
    del body["retry"]  # a write action is never repeated
    return body


def test_template_aliases_are_kept_and_literal_ones_checked() -> None:
    action = {"type": "thread_item", "alias": "chats/{{ event.alias }}", "item": {"type": "text"}}
    assert parse_declaration(_write_action(action), Limits()).action.alias == "chats/{{ event.alias }}"  # type: ignore[union-attr]
    message = _refusal(_write_action({**action, "alias": "chats//x"}))
    assert message.startswith("listener.action.alias: ")


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("batch.max_events", 5000, "listener.batch.max_events: must be at most 1000"),
        ("batch.max_events", 0, "listener.batch.max_events: must be at least 1"),
        ("batch.window_seconds", 301, "listener.batch.window_seconds: must be at most 300"),
        ("batch.distinct_by", "a..b", "listener.batch.distinct_by: path"),
        ("filter.where.0.op", "like", "listener.filter.where.0.op: must be one of"),
        ("filter.where.0.value", "text", "listener.filter.where.0.value: op not_in needs a list value"),
        # A null would be kept as the default it stands for (true), not as written.
        (
            "filter.where",
            [{"path": "alias", "op": "exists", "value": None}],
            "listener.filter.where.0.value: op exists takes true (present) or false (missing)",
        ),
        # A condition that is not an object is named by its place, not by the model's internal tag.
        ("filter.where", ["x"], "listener.filter.where.0: must be a JSON object"),
        ("filter.where", [{"not": ["x"]}], "listener.filter.where.0.not: must be a JSON object"),
        ("filter.where", [{"any": [3]}], "listener.filter.where.0.any.0: must be a JSON object"),
        ("filter.where_condition", 1, "listener.filter.where_condition: is not known"),
        ("filter.types", ["object.***"], "listener.filter.types.0: type glob"),
        ("filter.types", [], "listener.filter.types: "),
        ("filter.aliases", ["a//b"], "listener.filter.aliases.0: alias glob"),
        ("name", "Orchestrate", "listener.name: "),
        # A check of how fields fit together names the field it is about, not the object that holds them.
        ("concurrency", {"mode": "keyed"}, "listener.concurrency.key: mode keyed needs a key"),
        ("concurrency", {"mode": "serial", "max_parallel": 2}, "listener.concurrency.max_parallel: does not apply"),
        ("concurrency", {"mode": "parallel", "key": "alias"}, "listener.concurrency.key: key and key_segments"),
        ("concurrency", {"mode": "parallel", "key_segments": 2}, "listener.concurrency.key_segments: key and"),
        ("batch", {"max_wait_seconds": 3}, "listener.batch.max_wait_seconds: caps a debounce"),
        ("concurrency", {"mode": "keyed", "key": "alias", "key_segments": 0}, "concurrency.key_segments"),
        (
            "concurrency",
            {"mode": "parallel", "max_parallel": 2**31},
            "listener.concurrency.max_parallel: must be at most 2147483647",
        ),
        (
            "concurrency",
            {"mode": "keyed", "key": "alias", "key_segments": 2**31},
            "listener.concurrency.key_segments: must be at most 2147483647",
        ),
        ("action", {"type": "workflow"}, "listener.action.workflow: is required"),
        ("action", {"type": "shell", "cmd": "rm"}, "listener.action: type must be one of"),
        ("action", {"type": "object", "alias": "a", "value": {}, "x": 1}, "listener.action.x: is not known"),
        ("retry", {"attempts": 21, "delay_seconds": 1}, "listener.retry.attempts: must be at most 20"),
        ("retry", {"attempts": 1, "delay_seconds": 901}, "listener.retry.delay_seconds: must be at most 900"),
        ("receipt", {"alias": "ops/*"}, "listener.receipt.alias: alias must not contain"),
        ("idle", {"after_seconds": 0}, "listener.idle.after_seconds: must be greater than 0"),
        ("owns", ["views/**", "bad glob"], "listener.owns.1: alias glob"),
        ("throttle", {"per_seconds": 60, "runs": 0}, "listener.throttle.runs: must be at least 1"),
        ("throttle", {"per_seconds": 60, "runs": 1001}, "listener.throttle.runs: must be at most 1000"),
        ("throttle", {"per_seconds": 60, "runs": 2.0}, "listener.throttle.runs: must be an integer"),
        ("throttle", {"per_seconds": 0, "runs": 1}, "listener.throttle.per_seconds: must be greater than 0"),
        ("throttle", {"per_seconds": 86_401, "runs": 1}, "listener.throttle.per_seconds: must be at most 86400"),
        ("throttle", {"runs": 1}, "listener.throttle.per_seconds: is required"),
        ("throttle", {"per_seconds": 60, "runs": 1, "key": "a..b"}, "listener.throttle.key: path"),
        ("throttle", {"per_seconds": 60, "runs": 1, "burst": 2}, "listener.throttle.burst: is not known"),
        ("unknown", 1, "listener.unknown: is not known"),
    ],
)
def test_bad_fields_are_named_by_their_path(path: str, value: Any, expected: str) -> None:
    assert expected in _refusal(_with(path, value))


def test_the_deployment_limits_apply() -> None:
    limits = Limits(max_events_per_batch=50, max_window_seconds=5)
    message = _refusal(_with("batch", {"window_seconds": 10, "max_events": 60}), limits)
    assert "listener.batch.window_seconds: must be at most 5" in message
    assert "listener.batch.max_events: must be at most 50" in message


@pytest.mark.parametrize(
    ("types", "placed"),
    [
        (["execution.ended"], False),
        (["execution.*", "listener.failed", "lane.idle"], False),
        (["graph.changed"], True),  # by the ids of the nodes it changed
        (["**"], True),
        (["object.*", "execution.ended"], True),
    ],
)
def test_aliases_on_types_never_at_an_alias_are_refused_naming_the_field(types: list[str], placed: bool) -> None:
    body = _with("filter", {"types": types, "aliases": ["missions/**"]})
    if placed:
        parse_declaration(body, Limits())
    else:
        assert _refusal(body).startswith("listener.filter.aliases: no event of types")
    cancel = {**_with("concurrency", {"mode": "keyed", "key": "alias"})}
    cancel["cancel_on"] = [{"types": types, "aliases": ["missions/**"]}]
    if placed:
        parse_declaration(cancel, Limits())
    else:
        assert "listener.cancel_on.0.aliases: no event of types" in _refusal(cancel)


def test_a_deployment_that_allows_fewer_events_a_batch_than_the_default_makes_that_the_default() -> None:
    decl = parse_declaration(_with("batch", {"window_seconds": 1}), Limits(max_events_per_batch=50))
    assert decl.batch.max_events == 50
    assert decl.model_dump(mode="json", exclude_unset=True)["batch"]["max_events"] == 50, "saved as it is in effect"
    assert parse_declaration(_with("batch", {"max_events": 20}), Limits(max_events_per_batch=50)).batch.max_events == 20
    # A stream's batch is a listener's: the same default under the same limit.
    stream = parse_stream(
        '{"types": ["object.written"]}', '{"window_seconds": 1}', None, Limits(max_events_per_batch=50), {}
    )
    assert stream.batch.max_events == 50


@pytest.mark.parametrize(
    ("variable", "value", "field"),
    [
        ("ORCHESTRATOR_LIMITS__MAX_EVENTS", "50", "max_events_per_batch"),
        ("ORCHESTRATOR_LIMITS__WINDOW_SECONDS", "60", "max_window_seconds"),
        ("ORCHESTRATOR_LIMITS__EVENT_PAYLOAD_BYTES", "1024", "max_payload_bytes"),
        ("ORCHESTRATOR_LIMITS__MAX_EVENTS_PER_BATCH", "50", "max_events_per_batch"),
    ],
)
def test_a_limit_is_set_by_the_name_the_specifications_table_gives_it_too(
    variable: str, value: str, field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, value)
    assert getattr(Settings().limits, field) == float(value)


@pytest.mark.parametrize(
    ("variable", "value"),
    [("ORCHESTRATOR_LIMITS__MAX_WINDOW_SECONDS", "600"), ("ORCHESTRATOR_LIMITS__MAX_EVENTS_PER_BATCH", "5000")],
)
def test_a_limit_past_the_specifications_bound_is_refused_when_the_settings_are_read(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A deployment may lower a batch's bounds, never raise them: accepted and then ignored, a setting would lie.
    monkeypatch.setenv(variable, value)
    with pytest.raises(pydantic.ValidationError, match=variable.split("__")[1].lower()):
        Settings()


@pytest.mark.parametrize("body", ["text", None, [], 3])
def test_a_body_that_is_not_an_object_is_refused(body: Any) -> None:
    assert _refusal(body).startswith("listener: must be a JSON object")


@pytest.mark.parametrize(
    ("concurrency", "expected"),
    [
        (Concurrency(), 1),
        (Concurrency(mode="parallel"), 4),
        (Concurrency(mode="parallel", max_parallel=64), 16),
        (Concurrency(mode="keyed", key="alias", max_parallel=2), 2),
    ],
)
def test_max_parallel_is_capped_by_the_limit(concurrency: Concurrency, expected: int) -> None:
    assert effective_max_parallel(concurrency, Limits()) == expected


def _seed(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "seed",
        "filter": {"types": ["thread.item_posted"], "aliases": ["chats/**"]},
        "action": {"type": "workflow", "workflow": "responder"},
    }
    body.update(overrides)
    return body


def test_the_seeds_retry_of_two_attempts_waits_30_seconds_by_default() -> None:
    decl = parse_declaration(_seed(retry={"attempts": 2}), Limits())
    assert decl.retry is not None and (decl.retry.attempts, decl.retry.delay_seconds) == (2, 30.0)


@pytest.mark.parametrize(
    "action",
    [
        {"type": "object", "alias": "a", "value": {"type": "t"}},
        {"type": "thread_item", "alias": "c", "item": {"type": "text"}},
    ],
)
def test_a_retry_on_an_action_that_is_never_repeated_is_refused(action: dict[str, Any]) -> None:
    with pytest.raises(CommandError, match=r"listener\.retry: .* never repeated"):
        parse_declaration(_seed(action=action, retry={"attempts": 1}), Limits())


def test_mode_none_is_refused_as_a_connection_listener() -> None:
    with pytest.raises(CommandError, match=r"listener\.concurrency: mode none .* stream"):
        parse_declaration(_seed(concurrency={"mode": "none"}), Limits())


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"filter": {"types": ["object.**"]}, "concurrency": {"mode": "keyed", "key": "item.role"}}, "concurrency.key"),
        ({"batch": {"distinct_by": "objet.alias"}}, "batch.distinct_by"),
        (
            {"filter": {"types": ["object.written"], "where": [{"path": "execution.status", "op": "exists"}]}},
            "filter.where.0.path",
        ),
        ({"batch": {"distinct_by": "item.text"}}, "batch.distinct_by"),
        ({"batch": {"distinct_by": "alias.x"}}, "batch.distinct_by"),
        ({"throttle": {"per_seconds": 60, "runs": 1, "key": "execution.status"}}, "throttle.key"),
        ({"throttle": {"per_seconds": 60, "runs": 1, "key": "objet.alias"}}, "throttle.key"),
        # A run's error is `{type, message}`: nothing else is below it, nor below its message.
        (
            {"filter": {"types": ["execution.ended"], "where": [{"path": "execution.error.kind", "op": "exists"}]}},
            "filter.where.0.path",
        ),
        (
            {"filter": {"types": ["execution.ended"], "where": [{"path": "execution.error.type.x", "op": "exists"}]}},
            "filter.where.0.path",
        ),
    ],
)
def test_a_path_that_can_never_resolve_for_the_listeners_types_is_refused(
    overrides: dict[str, Any], field: str
) -> None:
    with pytest.raises(CommandError, match=rf"listener\.{field}: path .* never resolves"):
        parse_declaration(_seed(**overrides), Limits())


@pytest.mark.parametrize(
    "overrides",
    [
        {"concurrency": {"mode": "keyed", "key": "object.alias"}, "batch": {"distinct_by": "object.alias"}},
        {
            "filter": {
                "types": ["execution.ended"],
                "where": [{"path": "execution.status", "op": "eq", "value": "failed"}],
            }
        },
        {
            "filter": {
                "types": ["thread.item_posted"],
                "where": [{"path": "item.type", "op": "not_in", "value": ["text"]}],
            }
        },
        {"batch": {"distinct_by": "item.message"}},
        {"filter": {"types": ["listener.failed"], "where": [{"path": "data.error", "op": "exists"}]}},
        {"filter": {"types": ["execution.ended"], "where": [{"path": "execution.error.type", "op": "exists"}]}},
        {"filter": {"types": ["listener.failed"], "where": [{"path": "execution.error.message", "op": "exists"}]}},
        {"filter": {"types": ["execution.ended"], "where": [{"path": "execution.error", "op": "exists"}]}},
        {"throttle": {"per_seconds": 60, "runs": 2, "key": "object.alias"}},
    ],
)
def test_the_seeds_paths_are_accepted(overrides: dict[str, Any]) -> None:
    parse_declaration(_seed(**overrides), Limits())


@pytest.mark.parametrize(
    ("action", "owns", "message"),
    [
        (
            {"type": "object", "alias": "views/x", "value": {"n": 1}},
            None,
            "listener.action.value: must have a non-empty string field 'type'",
        ),
        ({"type": "object", "alias": "views/x", "value": None}, None, "listener.action.value: must be an object"),
        ({"type": "object", "alias": "views/x", "value": [1]}, None, "listener.action.value: must be an object"),
        (
            {"type": "thread_item", "alias": "ops/x", "item": "hi"},
            None,
            "listener.action.item: must render to a JSON object",
        ),
        (
            {"type": "thread_item", "alias": "ops/x", "item": {"role": "x"}},
            None,
            "listener.action.item.type: is required",
        ),
        (
            {"type": "object", "alias": "views/x", "value": {"type": "t"}},
            ["ops/**"],
            "listener.action.alias: 'views/x' is outside owns ['ops/**']",
        ),
    ],
)
def test_a_write_that_could_never_be_written_is_refused_at_save(
    action: dict[str, Any], owns: list[str] | None, message: str
) -> None:
    body: dict[str, Any] = {"name": "w", "filter": {"types": ["object.written"]}, "action": action}
    if owns is not None:
        body["owns"] = owns
    with pytest.raises(CommandError, match=re.escape(message)):
        parse_declaration(body, Limits())


LIMITS = Limits(max_payload_bytes=1000)
BIG = "x" * 1001


@pytest.mark.parametrize(
    ("field", "written", "message"),
    [
        ("value", {"type": ""}, "listener.action.value: must have a non-empty string field 'type'"),
        ("value", {"type": 5}, "listener.action.value: must have a non-empty string field 'type'"),
        ("value", {"type": "", "n": "{{ batch.count }}"}, "listener.action.value: must have a non-empty string"),
        ("value", "{{ batch.count }}", "listener.action.value: must render to a JSON object; 'batch.count' is never"),
        ("value", "{{ batch.first_id }}", "listener.action.value: must render to a JSON object; 'batch.first_id'"),
        ("value", "{{batch.lane}}", "listener.action.value: must render to a JSON object; 'batch.lane' is never"),
        ("value", "{{ batch.messages }}", "listener.action.value: must render to a JSON object; 'batch.messages'"),
        ("value", "{{ listener.name }}", "listener.action.value: must render to a JSON object; 'listener.name'"),
        (
            "value",
            "{{ batch.events.0 }} {{ batch.lane }}",
            "listener.action.value: must render to a JSON object (holes",
        ),
        ("value", {"type": "t", "big": BIG}, "listener.action.value: 1022 bytes is over the payload limit of 1000"),
        ("item", {"type": "Bad Type"}, "listener.action.item.type: String should match pattern"),
        ("item", {"type": "text", "message": {"a": 1}}, "listener.action.item.message: must be a string"),
        ("item", {"type": "text", "bogus": 1}, "listener.action.item.bogus: is not known"),
        ("item", {"type": "{{ batch.lane }}", "bogus": "{{ batch.lane }}"}, "listener.action.item.bogus: is not known"),
        ("item", {"type": "Bad", "message": "{{ batch.count }}"}, "listener.action.item.type: String should match"),
        ("item", {"type": "text", "role": ""}, "listener.action.item.role: String should have at least 1 character"),
        (
            "item",
            {"type": "json", "metadata": "{{ batch.count }}", "id": 7},
            "listener.action.item.id: must be a string",
        ),
        ("item", "{{ batch.count }}", "listener.action.item: must render to a JSON object; 'batch.count' is never"),
        # A field that takes text, filled whole by a number or a list of the batch's.
        ("item", {"type": "text", "message": "{{ batch.count }}"}, "item.message: must render to a string; 'batch.co"),
        ("item", {"type": "text", "message": "{{batch.events}}"}, "item.message: must render to a string; 'batch.ev"),
        ("item", {"type": "text", "role": "{{ batch.count }}"}, "item.role: must render to a string; 'batch.count'"),
        ("item", {"type": "{{ batch.retry }}"}, "listener.action.item.type: must render to a string; 'batch.retry'"),
        ("item", {"type": "text", "id": "{{ listener.version }}"}, "item.id: must render to a string; 'listener.ver"),
        ("value", {"type": "{{ batch.count }}"}, "listener.action.value.type: must render to a string; 'batch.count'"),
        ("item", {"type": "text", "message": BIG}, "listener.action.item.message: 1001 bytes is over the payload"),
        ("item", {"type": "json", "metadata": {"big": BIG}}, "listener.action.item.metadata: 1011 bytes is over"),
    ],
)
def test_a_write_every_batch_would_fail_is_refused_at_save_as_the_write_would_refuse_it(
    field: str, written: Any, message: str
) -> None:
    """Both doors agree: what the declaration decides of an item or value is checked with the model and limits
    `post_thread_item` and `write_object` use, else every batch would end `invocation_error` or `refused`."""
    kind, alias = ("thread_item", "ops/x") if field == "item" else ("object", "views/x")
    action = {"type": kind, "alias": alias, field: written}
    assert message in _refusal({"name": "w", "filter": {"types": ["object.written"]}, "action": action}, LIMITS)


@pytest.mark.parametrize(
    ("field", "written"),
    [
        ("value", {"type": "t", "n": "{{ batch.count }}", "big": "x" * 900}),
        ("value", {"type": "{{ event.data.kind }}", "n": 1}),
        ("value", "{{ batch.events.0 }}"),
        ("value", "{{ event.data.doc }}"),
        ("value", {"type": "t", "big": "{{ batch.events }}"}),
        ("item", {"type": "{{ event.data.kind }}", "message": {"a": 1}}),
        ("item", {"type": "json", "message": {"n": "{{ batch.count }}"}}),
        ("item", {"type": "text", "message": "{{ batch.count }} new", "metadata": {"ids": "{{ batch.messages }}"}}),
        ("item", {"type": "text", "message": "{{ event.data.doc }}"}),
        ("item", {"type": "text", "id": "{{ batch.lane }}-{{ batch.first_id }}"}),
        ("item", {"type": "{{ event.data.kind }}", "message": "{{ batch.count }}"}),
        ("item", {"type": "json", "message": "{{ batch.events }}", "role": "{{ listener.name }}"}),
        ("item", {"type": "text", "message": "{{ batch.count }} new", "role": "{{ event.data.kind }}"}),
        ("value", {"type": "{{ batch.lane }}"}),
        ("item", "{{ event.data.doc }}"),
    ],
)
def test_a_write_some_batch_could_render_writable_is_saved(field: str, written: Any) -> None:
    kind, alias = ("thread_item", "ops/x") if field == "item" else ("object", "views/x")
    body = {"name": "w", "filter": {"types": ["doc.saved"]}, "action": {"type": kind, "alias": alias, field: written}}
    parse_declaration(body, LIMITS, {"doc.saved": {"type": "object"}})


def test_a_whole_template_or_a_templated_alias_is_checked_once_rendered() -> None:
    whole = {"type": "object", "alias": "views/x", "value": "{{ batch.events.0 }}"}
    parse_declaration({"name": "w", "filter": {}, "action": whole}, Limits())
    templated = {"type": "object", "alias": "views/{{ batch.lane }}", "value": {"type": "t"}}
    parse_declaration({"name": "w", "filter": {}, "action": templated, "owns": ["ops/**"]}, Limits())


@pytest.mark.parametrize(
    "action",
    [
        {"type": "workflow", "workflow": "w"},
        {"type": "object", "alias": "views/all", "value": {"type": "all"}},
        {"type": "thread_item", "alias": "ops/digest", "item": {"type": "text", "message": "{{ batch.count }} new"}},
    ],
)
def test_a_throttle_is_accepted_on_every_action(action: dict[str, Any]) -> None:
    # A write action's batches act as a run's do: the throttle bounds how often it writes (a digest at most so often).
    body = {**_with("action", action), "throttle": {"per_seconds": 1.5, "runs": 3, "key": "alias"}}
    body.pop("retry")
    decl = parse_declaration(body, Limits())
    assert decl.throttle is not None and (decl.throttle.per_seconds, decl.throttle.runs) == (1.5, 3)
    assert decl.throttle.key == "alias"
