"""The TypeScript client's generated types and methods (`clients/typescript/src/generated.ts`) are what the
command registry generates, and every command has its method, called as the Python client's is and answering its
command's reply model."""

from __future__ import annotations

import re
from pathlib import Path

from orchestrator.commands import COMMANDS
from orchestrator.typescript_types import DEFAULT_PATH, camel, render

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ROOT / DEFAULT_PATH


def test_the_generated_file_is_what_the_registry_generates() -> None:
    assert GENERATED.read_text(encoding="utf-8") == render(), f"{DEFAULT_PATH} is out of date: run `make docs`"


def test_every_command_has_a_typed_method_taking_the_session_first_and_answering_its_reply() -> None:
    text = GENERATED.read_text(encoding="utf-8")
    for name, spec in COMMANDS.items():
        reply = spec.reply.__name__
        match = re.search(rf"^  {camel(name)}\((.*)\): Promise<{reply}> \{{$", text, re.M)
        assert match, f"no method for {name} answering {reply}"
        assert f"export interface {reply} {{" in text
        assert f"  {name}: {reply};" in text  # in CommandReplies
        if "session_id" in spec.model.model_fields and spec.model.model_fields["session_id"].is_required():
            assert match.group(1).startswith("sessionId: "), f"{name}: the session's id comes first"
        assert f"export interface {''.join(p.title() for p in name.split('_'))}Args" in text
