"""The tools `orchestrator mcp` offers: one per command of the registry, and two over the docs.

Owns what an agent reads of a tool: its input schema (the command's JSON Schema without `command`, which the
tool's name stands for), its description (the reference's summary, reply and errors, with a lead for what no
peer offers), and its hints (read-only, destructive). Which commands a key gets is the platform's answer to
`whoami` (`core.access.may_call`); calling them is `server.py`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mcp.types import Tool, ToolAnnotations

from orchestrator.commands.reference import SHARED_MEANINGS, command_schema, reference
from orchestrator.commands.registry import COMMANDS
from orchestrator.mcp_server import docs

SEARCH_DOCS = "search_docs"
READ_DOC = "read_doc"
# What a peer's tools would not tell an agent, said first in the description of the command that answers it.
LEADS = {
    "explain_event": "Why did this event start a run, or not? Asked of one event, it answers listener by listener: "
    "matched or the reason it did not, the lane, batch, run and outcome, and what caused the event and what it "
    "caused. Start here when something did not happen.",
    "simulate_listener": "Try a listener body on the session's own history before saving it: the batches it would "
    "have cut, through the engine's own lane step. Nothing is saved, written or started.",
    "list_session_listeners": "Why does a lane wait? Each lane says (`waiting`: a window still open, debouncing, "
    "its slots held by runs, a retry's delay, queued for a key slot, paused), beside its pending events and runs.",
}
# Commands that change nothing.
_READ_PREFIXES = ("list_", "get_", "read_", "explain_", "simulate_")
_READS = frozenset({"whoami"})
# Commands that remove or end something that cannot simply be written back.
_DESTRUCTIVE_PREFIXES = ("delete_", "revoke_", "uncapture_", "stop_", "close_")


def reads_only(name: str) -> bool:
    return name.startswith(_READ_PREFIXES) or name in _READS


def input_schema(name: str) -> dict[str, Any]:
    """The command's JSON Schema as a tool's arguments: no `command`, no `$schema`, no title or description; an
    argument whose field says nothing says what the reference says of its name (`session_id`)."""
    schema = command_schema(name)
    properties = {
        key: {"description": SHARED_MEANINGS[key], **value}
        if "description" not in value and key in SHARED_MEANINGS
        else value
        for key, value in schema["properties"].items()
        if key != "command"
    }
    required = [r for r in schema.get("required", ()) if r != "command"]
    shaped = {k: v for k, v in schema.items() if k not in ("$schema", "title", "description", "properties", "required")}
    return {**shaped, "type": "object", "properties": properties, **({"required": required} if required else {})}


def description(name: str) -> str:
    ref = reference(name)
    parts = [LEADS[name]] if name in LEADS else []
    parts.append(ref.summary)
    if ref.reply:
        parts.append(f"Reply: {ref.reply}.")
    parts.append(f"Errors: {', '.join(ref.errors)}.")
    return "\n\n".join(parts)


def command_tool(name: str) -> Tool:
    reads = reads_only(name)
    return Tool(
        name=name,
        description=description(name),
        input_schema=input_schema(name),
        annotations=ToolAnnotations(
            read_only_hint=reads,
            destructive_hint=None if reads else name.startswith(_DESTRUCTIVE_PREFIXES),
            open_world_hint=False,
        ),
    )


def docs_tools() -> list[Tool]:
    reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    return [
        Tool(
            name=SEARCH_DOCS,
            description="Search the platform's documentation (docs/*.md of the version that runs: the commands, "
            "listener bodies, waits, security and scopes, operations, decisions). Answers the best matching "
            "sections, each with its page, heading and a snippet; read one whole with read_doc.",
            input_schema={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "description": "words to look for"},
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": docs.MAX_RESULTS,
                        "default": docs.DEFAULT_RESULTS,
                        "description": "how many sections at most",
                    },
                },
                "required": ["query"],
                "additionalProperties": False,
            },
            annotations=reads,
        ),
        Tool(
            name=READ_DOC,
            description="Read a documentation page, or one section of it (with its subsections) by its heading. "
            f"A page over {docs.MAX_PAGE_CHARS:,} characters answers its outline: read it a section at a time. "
            f"The pages: {', '.join(docs.pages())}.",
            input_schema={
                "type": "object",
                "properties": {
                    "page": {"type": "string", "description": "the page's file name (`listeners.md`)"},
                    "heading": {"type": "string", "description": "a heading on that page (`Why a lane waits`)"},
                },
                "required": ["page"],
                "additionalProperties": False,
            },
            annotations=reads,
        ),
    ]


def tools_for(commands: Iterable[str]) -> list[Tool]:
    """The tools of these commands (those the registry holds, in its order of names), then the docs'."""
    allowed = set(commands)
    return [command_tool(name) for name in sorted(COMMANDS) if name in allowed] + docs_tools()
