"""The Python client's reply types (`orchestrator/reply_types.py`) are what the command registry generates, each
method of `Client` answers its command's, and a type checker holds a caller to them: a field a reply does not have
is an error, one it has only sometimes must be checked for."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import typing
from pathlib import Path

from orchestrator import reply_types
from orchestrator.client import Client
from orchestrator.commands import COMMANDS
from orchestrator.python_types import DEFAULT_PATH, render

ROOT = Path(__file__).resolve().parents[2]


def test_the_generated_file_is_what_the_registry_generates() -> None:
    assert (ROOT / DEFAULT_PATH).read_text(encoding="utf-8") == render(), f"{DEFAULT_PATH} is out of date: make docs"


def test_every_method_answers_its_commands_reply_type() -> None:
    for name, spec in COMMANDS.items():
        answered = typing.get_type_hints(getattr(Client, name))["return"]
        assert answered is reply_types.CommandReplies[name], f"Client.{name} answers {answered}"
        assert answered.__name__ == spec.reply.__name__
        # The fields the model always answers are required, the rest not (a TypedDict's keys say so).
        required = {field for field, info in spec.reply.model_fields.items() if info.is_required()}
        assert answered.__required_keys__ == required, name
        assert answered.__optional_keys__ == set(spec.reply.model_fields) - required, name


CALLER = """\
    from orchestrator.client import Client


    async def newest(client: Client, session_id: str) -> int:
        opened = await client.open_session(alias="orders")
        page = await client.list_session_events(session_id, after=0)
        {line}
        return page["last_id"]
"""
# What each caller reads, and the error a type checker finds in it (None: none).
CALLERS = {
    "a_field_read_as_it_is": ("print(opened['session']['id'].upper(), page['events'][0]['type'])", None),
    "a_field_it_does_not_have": ("print(opened['id'])", 'TypedDict "OpenSessionReply" has no key "id"'),
    "a_nested_field": ("print(page['events'][0]['kind'])", 'TypedDict "EventEnvelope" has no key "kind"'),
    "a_field_answered_sometimes": ("print(page['first_id'] + 1)", "Unsupported operand types for + "),
}


def test_a_type_checker_holds_a_caller_to_the_reply(tmp_path: Path) -> None:
    for name, (line, _) in CALLERS.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(CALLER.format(line=line)), encoding="utf-8")
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--cache-dir", str(tmp_path / "cache")]
        + [str(tmp_path / f"{name}.py") for name in CALLERS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    for name, (_, error) in CALLERS.items():
        found = [
            line
            for line in checked.stdout.splitlines()
            # mypy names a file under the directory it runs in by its relative path, any other by its full one.
            if Path(line.split(":", 1)[0]).name == f"{name}.py" and ": error: " in line
        ]
        if error is None:
            assert not found, found
        else:
            assert len(found) == 1 and error in found[0], (name, checked.stdout)
