"""`GET /v1/openapi.json`: served without a token, valid OpenAPI 3.1 by `openapi-spec-validator`, every route of
the API described (the dashboard's aside), every command's body, example, reply and errors in it, and a command
registered anywhere shown with no other edit."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

import httpx
import jsonschema
import pytest
from openapi_spec_validator import validate
from pydantic import Field, SecretStr
from starlette.routing import Route

from orchestrator.commands.context import CommandContext
from orchestrator.commands.reference import command_schema, reference, reply_schema
from orchestrator.commands.registry import COMMANDS, Request, command
from orchestrator.commands.replies import Reply, Shape
from orchestrator.config import Settings
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.door.openapi import LiftedSchemas, openapi_document
from orchestrator.platform import Platform

TOKEN = "openapi-t0ken"


@pytest.fixture
async def guarded_api(platform: Platform, settings: Settings) -> AsyncIterator[str]:
    guarded = settings.model_copy(update={"api_token": SecretStr(TOKEN)})
    async with serve_api(create_app(platform, guarded), "127.0.0.1", 0) as url:
        yield url


async def served(url: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=url) as http:
        response = await http.get("/v1/openapi.json")
    assert response.status_code == 200, response.text
    document: dict[str, Any] = response.json()
    return document


def body_schema(document: dict[str, Any], name: str = "Command") -> dict[str, Any]:
    """A component as a schema of its own, its references resolved in the document."""
    return {"$ref": f"#/components/schemas/{name}", "components": document["components"]}


async def test_the_document_is_served_without_a_token_and_is_valid_openapi(guarded_api: str) -> None:
    document = await served(guarded_api)

    validate(document)  # raises, naming the place, when it is not valid OpenAPI 3.1
    assert document["openapi"].startswith("3.1")
    assert document == openapi_document()
    async with httpx.AsyncClient(base_url=guarded_api) as http:
        assert (await http.post("/v1/commands", json={"command": "whoami"})).status_code == 401


def test_every_route_of_the_api_but_the_dashboards_is_described(platform: Platform, settings: Settings) -> None:
    routes = {
        route.path: set(route.methods or ()) - {"HEAD"}
        for route in create_app(platform, settings).routes
        if isinstance(route, Route) and not route.path.startswith("/dashboard") and route.path != "/"
    }
    paths = openapi_document()["paths"]

    assert set(paths) == set(routes)
    for path, methods in routes.items():
        assert {method.lower() for method in methods} == set(paths[path]), path


def test_every_command_is_a_body_of_the_commands_path_with_its_reply_errors_and_example() -> None:
    document = openapi_document()
    post = document["paths"]["/v1/commands"]["post"]
    union = document["components"]["schemas"]["Command"]
    examples = post["requestBody"]["content"]["application/json"]["examples"]

    assert union["discriminator"]["propertyName"] == "command"
    assert set(union["discriminator"]["mapping"]) == set(COMMANDS) == set(examples)
    for name, spec in COMMANDS.items():
        body = document["components"]["schemas"][name]
        assert body["properties"]["command"]["const"] == name
        assert body["x-orchestrator-reply"] == reference(name).reply
        reply = body["x-orchestrator-reply-schema"]
        assert reply == f"#/components/schemas/{spec.reply.__name__}", name
        assert spec.reply.__name__ == reply_schema(name)["title"]
        assert {"$ref": reply} in document["components"]["schemas"]["CommandReply"]["anyOf"]
        assert body["x-orchestrator-errors"] == ["invalid_request", *spec.errors]
        # Its own schema's arguments, and its example one of the bodies (exactly one, by `command`).
        assert set(body["properties"]) == set(command_schema(name)["properties"]), name
        jsonschema.Draft202012Validator(body_schema(document)).validate(examples[name]["value"])
    assert {"200", "400", "401", "403", "404", "409", "413", "422", "429", "500"} <= set(post["responses"])
    assert post["responses"]["429"]["headers"]["Retry-After"]
    bearer = document["components"]["securitySchemes"]["bearer"]
    assert (bearer["type"], bearer["scheme"]) == ("http", "bearer")
    assert document["paths"]["/v1/schema"]["get"]["security"] == []


def test_a_body_of_no_command_fits_none_of_the_bodies() -> None:
    validator = jsonschema.Draft202012Validator(body_schema(openapi_document()))
    assert not validator.is_valid({"command": "no_such_command"})
    assert not validator.is_valid({"command": "write_object", "session_id": "ses_1"})  # alias, value missing
    assert validator.is_valid({"command": "whoami"})


# Bodies the door takes for `create_schedule`, each as the model reads it: the document must take them too.
SCHEDULE_BODIES = {
    "flat, the session in its target": {
        "command": "create_schedule",
        "repeat": "recurring_cron",
        "cron_expression": "0 9 * * *",
        "timezone": "UTC",
        "every_seconds": None,
        "invocation_target": {"target": {"session": "ses_1", "blob": "b1"}, "alias": "digest", "value": {"type": "d"}},
    },
    "flat, an interval starting a run": {
        "command": "create_schedule",
        "session_id": "ses_1",
        "alias": "tick",
        "repeat": "interval",
        "every_seconds": 60,
        "invocation_target": {"target": {}, "workflow": "tick", "input": {"n": 1}},
    },
    "nested, beside the flat form's fields left null": {
        "command": "create_schedule",
        "session_id": "ses_1",
        "alias": "tick",
        "repeat": {"type": "interval", "every_seconds": 60},
        "cron_expression": None,
        "timezone": None,
        "invocation_time": None,
        "target": {"workflow": "tick"},
    },
    "nested, its type and alias from the target": {
        "command": "create_schedule",
        "session_id": "ses_1",
        "repeat": {"type": "one_time", "invocation_time": "2099-01-01T09:00:00"},
        "target": {"alias": "digest", "value": {"type": "d"}},
    },
}


@pytest.mark.parametrize("name", sorted(SCHEDULE_BODIES))
def test_the_document_takes_every_create_schedule_body_the_door_takes(name: str) -> None:
    body = SCHEDULE_BODIES[name]
    COMMANDS["create_schedule"].model.model_validate(body)  # the door takes it
    jsonschema.Draft202012Validator(body_schema(openapi_document())).validate(body)


def test_the_document_refuses_a_create_schedule_of_no_known_repeat() -> None:
    validator = jsonschema.Draft202012Validator(body_schema(openapi_document()))
    body = {**SCHEDULE_BODIES["flat, an interval starting a run"], "repeat": "weekly"}
    assert not validator.is_valid(body)
    assert not validator.is_valid({**body, "repeat": "interval", "hourly": True})  # no such field


def test_the_stream_takes_a_listeners_filter_and_batch_as_json_query_parameters() -> None:
    document = openapi_document()
    stream = document["paths"]["/v1/sessions/{session_id}/stream"]["get"]
    parameters = {p["name"]: p for p in stream["parameters"]}

    assert set(parameters) == {"session_id", "filter", "batch", "client", "after", "Last-Event-ID"}
    assert parameters["filter"]["content"]["application/json"]["schema"]["$ref"].endswith("/ListenerFilter")
    assert "ListenerFilter" in document["components"]["schemas"]
    assert "text/event-stream" in stream["responses"]["200"]["content"]
    assert {"bearer": []} in stream["security"] and {"streamTicket": []} in stream["security"]


def test_two_models_of_one_name_that_differ_keep_apart_and_what_points_at_them_too() -> None:
    schemas = LiftedSchemas()
    x = {"type": "string"}
    y = {"type": "object", "properties": {"x": {"$ref": "#/$defs/X"}}}
    first = schemas.lift("one", {"$defs": {"X": x, "Y": y}, "properties": {"y": {"$ref": "#/$defs/Y"}}})
    second = schemas.lift(
        "two", {"$defs": {"X": {"type": "integer"}, "Y": y}, "properties": {"y": {"$ref": "#/$defs/Y"}}}
    )
    third = schemas.lift("three", {"$defs": {"X": x}, "properties": {"x": {"$ref": "#/$defs/X"}}})

    assert first["properties"]["y"]["$ref"] == "#/components/schemas/Y"
    assert second["properties"]["y"]["$ref"] == "#/components/schemas/two.Y"
    assert schemas.found["two.Y"]["properties"]["x"]["$ref"] == "#/components/schemas/two.X"
    assert schemas.found["two.X"] == {"type": "integer"} and schemas.found["X"] == x
    assert third["properties"]["x"]["$ref"] == "#/components/schemas/X"


class Throwaway(Request):
    command: Literal["throwaway_probe"]
    level: int = Field(ge=1, le=3, description="how loud the probe is")


class Probe(Shape):
    level: int


class ThrowawayReply(Reply):
    probe: Probe


@contextlib.contextmanager
def registered_throwaway() -> Iterator[str]:
    """A command registered by a test alone, gone afterwards."""

    @command(
        "throwaway_probe",
        Throwaway,
        reply=ThrowawayReply,
        errors=("not_found",),
        example={"command": "throwaway_probe", "level": 2},
    )
    async def throwaway_probe(platform: CommandContext, req: Throwaway) -> dict[str, Any]:
        """Answer the level it was given (a command only a test registers)."""
        return {"probe": {"level": req.level}}

    try:
        yield "throwaway_probe"
    finally:
        del COMMANDS["throwaway_probe"]


async def test_a_command_added_to_the_registry_appears_in_the_document_and_leaves_with_it(guarded_api: str) -> None:
    with registered_throwaway() as throwaway:
        document = await served(guarded_api)

        validate(document)
        body = document["components"]["schemas"][throwaway]
        assert body["properties"]["level"] == {
            "type": "integer",
            "minimum": 1,
            "maximum": 3,
            "description": "how loud the probe is",
        }
        assert body["description"].startswith("Answer the level it was given")
        assert (body["x-orchestrator-reply"], body["x-orchestrator-errors"]) == (
            "`probe` {level}",
            ["invalid_request", "not_found"],
        )
        assert document["components"]["schemas"]["Command"]["discriminator"]["mapping"][throwaway].endswith(throwaway)
        examples = document["paths"]["/v1/commands"]["post"]["requestBody"]["content"]["application/json"]["examples"]
        assert examples[throwaway]["value"] == {"command": "throwaway_probe", "level": 2}
        assert throwaway in document["paths"]["/v1/schema/{name}"]["get"]["parameters"][0]["schema"]["enum"]

        assert document["components"]["schemas"]["ThrowawayReply"]["properties"]["probe"] == {
            "$ref": "#/components/schemas/Probe"
        }

    left = (await served(guarded_api))["components"]["schemas"]
    assert "throwaway_probe" not in left and "ThrowawayReply" not in left


def _walk(node: Any) -> Iterator[Any]:
    yield node
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    for child in children:
        yield from _walk(child)


def test_every_reference_and_discriminator_mapping_points_at_a_component() -> None:
    document = openapi_document()
    components = document["components"]["schemas"]
    targets = [n["$ref"] for n in _walk(document) if isinstance(n, dict) and isinstance(n.get("$ref"), str)]
    targets += [
        target
        for n in _walk(document)
        if isinstance(n, dict) and isinstance(n.get("discriminator"), dict)
        for target in (n["discriminator"].get("mapping") or {}).values()
    ]
    assert targets
    for target in targets:
        assert target.startswith("#/components/schemas/") and target.split("/")[-1] in components, target


async def test_replies_the_door_answers_validate_against_the_documented_response_and_their_own(
    guarded_api: str,
) -> None:
    document = await served(guarded_api)
    documented = document["paths"]["/v1/commands"]["post"]["responses"]["200"]["content"]["application/json"]
    token = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=guarded_api, headers=token) as http:
        opened = (await http.post("/v1/commands", json={"command": "open_session", "alias": "a/1"})).json()
        sid = opened["session"]["id"]
        bodies = [
            {"command": "write_object", "session_id": sid, "alias": "t/1", "value": {"type": "t"}},
            {"command": "read_object", "session_id": sid, "alias": "t/1"},
            {"command": "list_session_events", "session_id": sid},
            {"command": "whoami"},
        ]
        answered = [(body["command"], await http.post("/v1/commands", json=body)) for body in bodies]
    for name, response in [("open_session", None), *answered]:
        reply = opened if response is None else response.json()
        assert reply["status"] == "success", reply
        jsonschema.validate(reply, {**documented["schema"], "components": document["components"]})
        own = document["components"]["schemas"][name]["x-orchestrator-reply-schema"].rsplit("/", 1)[-1]
        jsonschema.validate(reply, body_schema(document, own))


def test_a_reply_with_a_field_a_later_release_adds_still_fits_its_documented_schema() -> None:
    """The reply models are closed for the suite's check; the document is open, or a client that checks replies
    against it would refuse the next release's (its bodies stay closed: a body's unknown field is refused)."""
    document = openapi_document()
    reply = {"status": "success", "session": {"id": "ses_1", "alias": None, "status": "open", "new": 1}, "more": 2}
    jsonschema.validate(reply, body_schema(document, "SessionReply"))
    schedule = {"type": "recurring_cron", "cron_expression": "0 * * * *", "timezone": "UTC", "later": True}
    later = {"status": "success", "schedule": {"alias": "a", "repeat": schedule}}
    fits = jsonschema.Draft202012Validator(body_schema(document, "ScheduleReply"))
    assert not [e for e in fits.iter_errors(later) if "later" in e.message], "a shape a body shares is open here"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"command": "read_object", "session_id": "s", "alias": "a", "x": 1}, body_schema(document))


async def test_refusals_the_door_answers_validate_against_the_documented_response(
    guarded_api: str, platform: Platform
) -> None:
    """A wrong key (401 `unauthorized`), a method a path does not take (405), as the document says them."""
    document = await served(guarded_api)
    sid = (await platform.command({"command": "open_session"}))["session"]["id"]
    async with httpx.AsyncClient(base_url=guarded_api) as http:
        wrong = {"Authorization": "Bearer not-the-token"}
        answered = [
            ("/v1/commands", "post", await http.post("/v1/commands", json={"command": "whoami"}, headers=wrong)),
            (
                "/v1/stream-tickets",
                "post",
                await http.post("/v1/stream-tickets", json={"session_id": sid}, headers=wrong),
            ),
            ("/v1/sessions/{session_id}/stream", "get", await http.get(f"/v1/sessions/{sid}/stream", headers=wrong)),
            ("/v1/commands", "post", await http.get("/v1/commands")),
        ]
    for path, method, response in answered:
        documented = document["paths"][path][method]["responses"]
        assert str(response.status_code) in documented, (path, response.status_code)
        schema = documented[str(response.status_code)]["content"]["application/json"]["schema"]
        jsonschema.validate(response.json(), {**schema, "components": document["components"]})
        for header in documented[str(response.status_code)].get("headers", {}):
            assert header in response.headers, (path, response.status_code, header)
