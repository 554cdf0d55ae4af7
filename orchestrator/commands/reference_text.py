"""The reference in words: one command as a markdown section (for `docs/commands.md`) and as terminal text
(for `orchestrator call --help COMMAND`). What they say is `reference`'s; this only lays it out.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

from orchestrator.commands.reference import Argument, CommandReference

TERMINAL_WIDTH = 100
# The widest line of an example on the page; a wider body is shown a field a line.
EXAMPLE_WIDTH = 116
# The terminal's column for an argument's description.
HELP_INDENT = 22


def _cell(text: str) -> str:
    return text.replace("|", "\\|") or " "


def _markdown_table(arguments: tuple[Argument, ...], first: str) -> list[str]:
    lines = [f"| {first} | type | required / default | bounds | meaning |", "| --- | --- | --- | --- | --- |"]
    for arg in arguments:
        given = "required" if arg.required else f"default `{arg.default}`" if arg.default is not None else "optional"
        lines.append(f"| `{arg.name}` | {_cell(arg.type)} | {given} | {_cell(arg.bounds)} | {_cell(arg.meaning)} |")
    return lines


def command_markdown(ref: CommandReference) -> str:
    """One command's section of `docs/commands.md`."""
    lines = [f"### `{ref.name}`", "", ref.summary or "(not described)", ""]
    if ref.arguments:
        lines += _markdown_table(ref.arguments, "argument")
    else:
        lines.append("No arguments besides `command`.")
    for shape in ref.shapes:
        lines += ["", f"`{shape.name}`" + (f": {shape.meaning}" if shape.meaning else ""), ""]
        lines += _markdown_table(shape.arguments, "field")
    if ref.example is not None:
        lines += ["", "**Example**:", "", "```json", example_json(ref.example), "```"]
    lines += ["", f"**Reply**: {ref.reply or '(not described)'}", ""]
    lines.append("**Errors**: " + ", ".join(f"`{code}`" for code in ref.errors))
    return "\n".join(lines) + "\n"


def example_json(example: dict[str, Any]) -> str:
    """A command's example as JSON: on one line, or a top-level field a line when that is too wide."""
    line = json.dumps(example, ensure_ascii=False)
    if len(line) <= EXAMPLE_WIDTH:
        return line
    fields = [f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}" for key, value in example.items()]
    return "{\n" + ",\n".join(fields) + "\n}"


def _help_argument(arg: Argument) -> list[str]:
    given = "required" if arg.required else f"default {arg.default}" if arg.default is not None else "optional"
    head = ", ".join(part for part in (arg.type, given, arg.bounds) if part)
    text = f"{head}. {arg.meaning}" if arg.meaning else head
    body = textwrap.wrap(text, TERMINAL_WIDTH - HELP_INDENT) or [""]
    name = f"  {arg.name}"
    first = f"{name:<{HELP_INDENT}}{body[0]}" if len(name) < HELP_INDENT else f"{name}\n{'':<{HELP_INDENT}}{body[0]}"
    return [first, *(f"{'':<{HELP_INDENT}}{line}" for line in body[1:])]


def command_help(ref: CommandReference) -> str:
    """One command for the terminal: `orchestrator call --help COMMAND`."""
    lines = [*textwrap.wrap(f"{ref.name}: {ref.summary}", TERMINAL_WIDTH), "", "arguments:"]
    lines += [line for arg in ref.arguments for line in _help_argument(arg)] or ["  (none besides command)"]
    for shape in ref.shapes:
        lines += ["", f"{shape.name}:"]
        lines += [line for arg in shape.arguments for line in _help_argument(arg)]
    lines += [""]
    lines += textwrap.wrap(f"reply:  {ref.reply or '(not described)'}", TERMINAL_WIDTH, subsequent_indent="        ")
    lines += textwrap.wrap(f"errors: {', '.join(ref.errors)}", TERMINAL_WIDTH, subsequent_indent="        ")
    if ref.example is not None:
        lines.append(f"example: {json.dumps(ref.example, ensure_ascii=False)}")
    lines.append(f"schema: GET /v1/schema/{ref.name}; all commands: docs/commands.md")
    return "\n".join(lines)
