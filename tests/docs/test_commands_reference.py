"""`docs/commands.md` and the JSON Schemas say every command and every argument the registry holds.

The page is generated (`make docs`); a command or a field added to the models and not to the page fails
here, and so does a command whose handler says nothing of what it does or answers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from examples.inbound import app as inbound_app
from examples.missions import app as missions_app
from orchestrator.commands import COMMANDS
from orchestrator.commands.reference import command_schema, listener_schema, reference, schema_index
from orchestrator.commands.reference_text import command_help
from orchestrator.reference_doc import render

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "commands.md"
TUTORIAL = ROOT / "docs" / "tutorial.md"


def _section(page: str, name: str) -> str:
    match = re.search(rf"^### `{name}`\n(.*?)(?=^### |\Z)", page, re.S | re.M)
    assert match, f"docs/commands.md has no section for {name!r}: run `make docs`"
    return match.group(1)


def test_the_page_is_what_the_registry_generates() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(), "docs/commands.md is out of date: run `make docs`"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_and_argument_is_on_the_page(name: str) -> None:
    section = _section(PAGE.read_text(encoding="utf-8"), name)
    model = COMMANDS[name].model
    for field, info in model.model_fields.items():
        if field == "command":
            continue
        shown = info.alias or field
        assert f"| `{shown}` |" in section, f"{name}.{shown} is missing from docs/commands.md"
    assert "**Reply**: " in section and "(not described)" not in section


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_says_what_it_does_and_answers(name: str) -> None:
    ref = reference(name)
    assert ref.summary, f"{name}: its handler has no docstring"
    assert ref.reply, f"{name}: its @command has no reply="
    assert ref.errors[0] == "invalid_request"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_schema_is_a_valid_schema_naming_its_fields(name: str) -> None:
    schema = command_schema(name)
    Draft202012Validator.check_schema(schema)
    assert schema["properties"]["command"] == {"const": name, "description": "the command's name"}
    model = COMMANDS[name].model
    fields = {info.alias or field for field, info in model.model_fields.items()}
    # A command that takes another form of its body (the seed's flat `create_schedule`) says its names too.
    assert set(schema["properties"]) == fields | set(getattr(model, "flat_fields", ()))
    assert schema["additionalProperties"] is False


def _tutorial_commands() -> list[dict[str, Any]]:
    """The tutorial's commands but those it shows refused (its `reply` block is an error)."""
    text = TUTORIAL.read_text(encoding="utf-8")
    found = re.findall(r"```json\n(.*?)```\s*(?:```reply\n(.*?)```)?", text, re.S)
    return [json.loads(body.replace("EVENT_ID", "1")) for body, reply in found if '"status": "error"' not in reply]


def test_the_tutorials_commands_fit_their_schemas() -> None:
    bodies = _tutorial_commands()
    assert len(bodies) > 15
    for body in bodies:
        errors = list(Draft202012Validator(command_schema(body["command"])).iter_errors(body))
        assert not errors, f"{body['command']}: {[e.message for e in errors]}"


def test_the_example_apps_listeners_fit_the_listener_schema() -> None:
    validator = Draft202012Validator(listener_schema())
    for body in [*missions_app.listeners, *inbound_app.listeners]:
        assert not list(validator.iter_errors(body)), body["name"]


def test_a_schema_refuses_what_the_command_refuses() -> None:
    write = Draft202012Validator(command_schema("write_object"))
    assert not write.is_valid({"command": "write_object", "session_id": "s", "alias": "a", "value": {"x": 1}})
    assert not write.is_valid({"command": "write_object", "session_id": "s", "alias": "a/*", "value": {"type": "t"}})
    assert not write.is_valid(
        {"command": "write_object", "session_id": "s", "alias": "a", "value": {"type": "t"}, "c": 1}
    )
    listener = Draft202012Validator(listener_schema())
    body = {"name": "x", "filter": {"types": ["object.*"]}, "action": {"type": "workflow", "workflow": "w"}}
    assert listener.is_valid(body)
    assert not listener.is_valid({**body, "batch": {"max_events": 5000}})
    assert not listener.is_valid({**body, "action": {"type": "email"}})


def test_the_index_holds_every_command_and_the_listener() -> None:
    index = schema_index()
    assert set(index["commands"]) == set(COMMANDS)
    assert index["listener"]["title"] == "listener"


def test_the_terminal_help_names_every_argument_and_the_reply() -> None:
    text = command_help(reference("list_session_events"))
    for argument in ("session_id", "after", "before", "limit", "types"):
        assert re.search(rf"^  {argument}\b", text, re.M), argument
    assert "default 100" in text and "<= 1000" in text
    assert "reply:  `events`" in text
