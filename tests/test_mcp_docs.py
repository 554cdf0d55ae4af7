"""The docs `orchestrator mcp` searches and reads: the pages shipped with the package, split into sections by
their headings (a `#` in a code block is no heading), searched by the words of a query, read whole, by outline
or a section at a time."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrator.mcp_server import docs

ROOT = Path(__file__).parents[1]


def test_the_package_ships_every_page_of_docs() -> None:
    assert set(docs.pages()) == {path.name for path in (ROOT / "docs").glob("*.md")}
    assert docs.pages()["security.md"] == (ROOT / "docs" / "security.md").read_text(encoding="utf-8")


def test_a_page_is_split_at_its_headings_and_not_inside_code() -> None:
    text = (
        "intro line\n\n# Title\n\nbody\n\n## One\n\n```bash\n# a comment, not a heading\n```\n\n"
        "### One.a\nx\n## Two\ny\n"
    )
    parts = docs.split_sections("p.md", text)

    assert [(s.heading, s.level) for s in parts] == [("p.md", 0), ("Title", 1), ("One", 2), ("One.a", 3), ("Two", 2)]
    assert "# a comment, not a heading" in parts[2].text
    assert parts[3].anchor == "p.md#onea"


def test_a_search_answers_sections_holding_every_word_first_with_page_heading_and_snippet() -> None:
    found = docs.search("rotate a key", limit=3)

    assert len(found) == 3
    assert (found[0]["page"], found[0]["heading"]) == ("security.md", "Rotation")
    assert found[0]["anchor"] == "security.md#rotation"
    assert "successor" in str(found[0]["snippet"])
    assert docs.search("   ") == [] and docs.search("zzqx_nothing_holds_this") == []


def test_a_plural_finds_its_singular() -> None:
    assert [r["heading"] for r in docs.search("lane waits", limit=1)] == ["Why a lane waits"]


def test_a_page_is_read_whole_a_long_one_as_its_outline_and_a_section_with_what_is_under_it() -> None:
    assert docs.read("security") == docs.pages()["security.md"]
    outline = docs.read("decisions.md")
    assert outline.startswith("decisions.md is ") and "  - Keys, scopes and actors" in outline
    assert len(outline) < docs.MAX_PAGE_CHARS

    section = docs.read("listeners.md", "Why a lane waits")
    assert section.startswith("### Why a lane waits") and "`window_open`" in section
    keys = docs.read("security.md", "## Scopes")
    assert keys.startswith("## Scopes") and "## Actors" not in keys


def test_a_page_or_heading_that_is_not_there_names_those_that_are() -> None:
    with pytest.raises(docs.DocsError, match=re.escape("the pages are architecture.md, commands.md")):
        docs.read("nope.md")
    with pytest.raises(docs.DocsError, match=r"its headings are .*'Scopes'"):
        docs.read("security.md", "Nope")
