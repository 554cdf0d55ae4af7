"""The reference in words: one command as a markdown section (for `docs/commands.md`) and as terminal text
(for `orchestrator call --help COMMAND`). What they say is `reference`'s; this only lays it out.
"""

from __future__ import annotations

import textwrap

from orchestrator.commands.reference import Argument, CommandReference

TERMINAL_WIDTH = 100
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
    lines += ["", f"**Reply**: {ref.reply or '(not described)'}", ""]
    lines.append("**Errors**: " + ", ".join(f"`{code}`" for code in ref.errors))
    return "\n".join(lines) + "\n"


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
    lines.append(f"schema: GET /v1/schema/{ref.name}; all commands: docs/commands.md")
    return "\n".join(lines)
