"""Every command's success reply is what its reply model says: each command has a model, closed and a valid JSON
Schema; the suite runs with the check on, so every reply its commands get, here and in the processes it starts, is
checked against its model; a reply the model does not describe fails its command loudly; and the reference's line
of a reply is read off its model."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from jsonschema import Draft202012Validator

from orchestrator.commands.context import CommandContext
from orchestrator.commands.objects import WriteObjectReply
from orchestrator.commands.reference import reference, reply_line, reply_schema
from orchestrator.commands.registry import COMMANDS, Request, command
from orchestrator.commands.replies import (
    CHECK_REPLIES_ENV,
    MISMATCHES_ENV,
    Reply,
    ReplyMismatch,
    Shape,
    check_reply,
    checking_replies,
)
from orchestrator.platform import Platform


@pytest.fixture(autouse=True)
def unnoted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mismatches made here on purpose are not noted where the suite's end looks for them."""
    monkeypatch.delenv(MISMATCHES_ENV, raising=False)


def test_the_suite_checks_every_reply() -> None:
    assert checking_replies(), f"the suite runs with {CHECK_REPLIES_ENV} set (tests/conftest.py, scripts/test)"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_a_closed_reply_model(name: str) -> None:
    model = COMMANDS[name].reply
    assert issubclass(model, Reply) and model is not Reply, f"{name}: its @command has no reply model"
    schema = reply_schema(name)
    Draft202012Validator.check_schema(schema)
    assert schema["title"] == model.__name__
    assert schema["properties"]["status"]["const"] == "success" and "status" in schema["required"]
    assert schema["additionalProperties"] is False
    assert reference(name).reply == reply_line(schema)


WRITTEN: dict[str, Any] = {"status": "success", "object": {"alias": "t/1", "rev": 1}, "event_id": 7}


def test_a_reply_as_its_model_says_passes() -> None:
    check_reply("write_object", WriteObjectReply, WRITTEN)
    check_reply("write_object", WriteObjectReply, {**WRITTEN, "explain": None})


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        ({**WRITTEN, "rows": 1}, "rows"),  # a field the model does not name
        ({"status": "success", "object": {"alias": "t/1", "rev": 1}}, "event_id"),  # one it always answers
        ({**WRITTEN, "event_id": "7"}, "event_id"),  # of another type
        ({**WRITTEN, "object": {"alias": "t/1", "rev": 1, "value": {}}}, "object.value"),  # deeper
    ],
)
def test_a_reply_its_model_does_not_describe_is_refused_naming_the_field(reply: dict[str, Any], said: str) -> None:
    with pytest.raises(ReplyMismatch, match=r"write_object: its reply does not fit WriteObjectReply") as refused:
        check_reply("write_object", WriteObjectReply, reply)
    assert said in str(refused.value)


def test_a_reply_that_is_not_json_is_refused() -> None:
    with pytest.raises(ReplyMismatch, match="not JSON"):
        check_reply("write_object", WriteObjectReply, {**WRITTEN, "event_id": object()})


def test_the_line_of_a_reply_names_its_fields_what_is_optional_nested_fields_and_meanings() -> None:
    line = reference("write_object").reply
    assert line.startswith("`object` {alias, rev}, `event_id` (its `object.written` event), `explain`? ")
    assert reference("delete_event_type").reply.endswith(". The type as it was")
    assert reference("delete_session").reply.startswith('`session` {id, status: "deleted"}')


class Loose(Request):
    command: Literal["throwaway_loose"]


class Said(Shape):
    level: int


class LooseReply(Reply):
    said: Said


@contextlib.contextmanager
def answering(reply: dict[str, Any]) -> Iterator[str]:
    """A command registered by a test alone, answering `reply` whatever its model says, gone afterwards."""

    @command("throwaway_loose", Loose, reply=LooseReply)
    async def throwaway_loose(platform: CommandContext, req: Loose) -> dict[str, Any]:
        """Answer what the test says."""
        return reply

    try:
        yield "throwaway_loose"
    finally:
        del COMMANDS["throwaway_loose"]


async def test_a_command_answering_what_its_model_does_not_say_fails_loudly(
    platform: Platform, caplog: pytest.LogCaptureFixture
) -> None:
    with answering({"said": {"level": 1}}) as name:
        assert await platform.command({"command": name}) == {"status": "success", "said": {"level": 1}}
    with answering({"said": {"level": 1, "volume": 11}}) as name, caplog.at_level(logging.ERROR):
        reply = await platform.command({"command": name})

    assert (reply["status"], reply["error"]) == ("error", "internal_error")
    assert "throwaway_loose: its reply does not fit LooseReply" in caplog.text and "said.volume" in caplog.text


def test_a_mismatch_is_noted_where_the_suite_looks_for_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    noted = tmp_path / "mismatches.log"
    monkeypatch.setenv(MISMATCHES_ENV, str(noted))
    check_reply("write_object", WriteObjectReply, WRITTEN)
    assert not noted.exists()
    with pytest.raises(ReplyMismatch):
        check_reply("write_object", WriteObjectReply, {**WRITTEN, "rows": 1})
    [problem] = [json.loads(line) for line in noted.read_text(encoding="utf-8").splitlines()]
    assert problem.startswith("write_object: its reply does not fit WriteObjectReply") and "rows" in problem


async def test_without_the_switch_replies_are_not_checked(platform: Platform, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CHECK_REPLIES_ENV)
    with answering({"said": {"level": 1, "volume": 11}}) as name:
        assert await platform.command({"command": name}) == {"status": "success", "said": {"level": 1, "volume": 11}}
