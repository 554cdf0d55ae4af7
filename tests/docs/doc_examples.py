"""The examples of the docs, read from the pages themselves, and what each one is.

A fenced `json`, `python` or `sql` block of a page is an example. The pages say how the suite runs them
(`tests/docs/test_*_examples.py`): a JSON block is a listener body (saved and simulated through the HTTP
door), a command (sent through the door), or the reply to the command just before it (what the command must
answer, exactly); Python and SQL blocks run on the database the platform shares with the application, but for a
Python block whose first line names a test file (`# test_desk.py: ...`), which pytest runs as a user would. A
block that shows only a part of something (a template's context, a receipt) says so on the line right above
its fence, `<!-- fragment: why -->`: it must parse, and is not run. An unmarked block that is none of these,
or that does not parse, is refused (`problems`), so a page cannot hold an example the suite does not run.
In a block, `ses_...` (or `ses_…`) stands for the session the example runs in.
"""

from __future__ import annotations

import importlib
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from orchestrator.app_loader import workflow_names

DOCS = Path(__file__).resolve().parents[2] / "docs"
LANGUAGES = ("json", "python", "sql")
FENCE = re.compile(r"^```([a-z]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
FRAGMENT = re.compile(r"<!--\s*fragment:\s*(.+?)\s*-->\s*$")
SESSION_PLACEHOLDERS = ("ses_...", "ses_…")

Kind = Literal["listener", "command", "reply", "python", "sql", "test_file", "fragment"]
# A Python block whose first line names a test file (`# test_desk.py: ...`) is a test of the kit's: run by pytest.
TEST_FILE = re.compile(r"#\s*(test_\w+\.py)\b")


@dataclass(frozen=True)
class Block:
    """One fenced block: its page, the line of its opening fence, its language and text, and why it is only a
    fragment (None: it runs)."""

    page: str
    line: int
    language: str
    text: str
    fragment: str | None

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"

    def value(self, session_id: str | None = None) -> Any:
        """The block as JSON, with the session placeholder replaced by `session_id` when one is given."""
        return json.loads(self.text if session_id is None else with_session(self.text, session_id))


def with_session(text: str, session_id: str) -> str:
    for placeholder in SESSION_PLACEHOLDERS:
        text = text.replace(placeholder, session_id)
    return text


@dataclass(frozen=True)
class Example:
    """A block that runs, with the reply block that follows a command (if any)."""

    block: Block
    kind: Kind
    reply: Block | None = None

    @property
    def name(self) -> str:
        """What the example is about: a listener's or a command's name, or its language."""
        if self.kind in ("listener", "command"):
            value = self.block.value()
            return str(value["name"] if self.kind == "listener" else value["command"])
        return self.kind

    @property
    def id(self) -> str:
        """The test id: page, line and name (`listeners.md:8-respond`)."""
        return f"{self.block.page}:{self.block.line}-{self.name}"


def blocks(page: str) -> list[Block]:
    """Every fenced block of `docs/<page>` in one of `LANGUAGES`, in the page's order."""
    text = (DOCS / page).read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        language = match.group(1)
        if language not in LANGUAGES:
            continue
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = FRAGMENT.search(before)
        found.append(Block(page, line, language, match.group(2), marker.group(1) if marker else None))
    return found


def kind_of(block: Block) -> Kind | None:
    """What a block is, or None when it is nothing the suite can run (refused unless marked a fragment)."""
    if block.fragment is not None:
        return "fragment"
    if block.language == "python" and TEST_FILE.match(block.text):
        return "test_file"
    if block.language != "json":
        return "python" if block.language == "python" else "sql"
    try:
        value = block.value()
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict):
        return None
    if "command" in value:
        return "command"
    if "status" in value:
        return "reply"
    if "name" in value and ("filter" in value or "action" in value):
        return "listener"
    return None


def read_page(page: str) -> tuple[list[Example], list[str]]:
    """The examples of a page that run, and its problems: blocks that do not parse, unmarked blocks that are no
    example, replies that follow no command."""
    examples: list[Example] = []
    problems: list[str] = []
    for block in blocks(page):
        kind = kind_of(block)
        if block.language == "json":
            try:
                block.value()
            except json.JSONDecodeError as err:
                problems.append(f"{block.where}: the block is not JSON ({err})")
                continue
        if kind is None:
            problems.append(
                f"{block.where}: neither a listener body, a command nor a reply; mark it `<!-- fragment: why -->`"
                " on the line above its fence if it only shows a part"
            )
        elif kind == "reply":
            last = examples[-1] if examples else None
            follows = last is not None and last.kind == "command" and last.reply is None
            if not follows or last is None:
                problems.append(f"{block.where}: a reply that follows no command")
            else:
                examples[-1] = Example(last.block, "command", block)
        elif kind != "fragment":
            examples.append(Example(block, kind))
    return examples, problems


def examples_of(page: str, *kinds: Kind) -> list[Example]:
    """The page's examples of these kinds (every kind when none is named)."""
    return [e for e in read_page(page)[0] if not kinds or e.kind in kinds]


def counts() -> dict[str, int]:
    """How many examples each page has that the suite runs (fragments are not counted)."""
    return {page: len(read_page(page)[0]) for page in ("listeners.md", "commands.md", "transactions.md")}


def page_workflows(
    page: str, folder: Path, syspath_prepend: Callable[[str], None]
) -> tuple[list[type], dict[str, Any]]:
    """The page's one Python example as a module of its own (written to `folder`, put on the path, as a worker's
    sandbox imports it again by its name), its workflows, and the page's listener body named for its workflow."""
    (example,) = examples_of(page, "python")
    name = f"{page.removesuffix('.md').replace('-', '_')}_md_{uuid.uuid4().hex[:8]}"
    (folder / f"{name}.py").write_text(example.block.text, encoding="utf-8")
    syspath_prepend(str(folder))
    module = importlib.import_module(name)
    workflows = [v for v in vars(module).values() if hasattr(v, "__temporal_workflow_definition")]
    (workflow_name,) = workflow_names(workflows)
    (body,) = [e.block.value() for e in examples_of(page, "listener") if e.name == workflow_name]
    return workflows, body
