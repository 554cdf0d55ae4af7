"""The documentation an agent searches and reads: `docs/*.md`, shipped with the package (`orchestrator/docs`).

Owns splitting a page into sections (a heading and the text under it, code blocks kept whole), searching them by
the words of a query, and reading a page or one section of it. Read from the installed package, so the pages
are those of the version that runs; nothing here reaches the platform.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from importlib import resources

# A whole page larger than this is answered as its outline (each heading), to be read a section at a time.
MAX_PAGE_CHARS = 24_000
SNIPPET_CHARS = 240
DEFAULT_RESULTS = 8
MAX_RESULTS = 25
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_WORD = re.compile(r"[a-z0-9_]+")
# Words too common to tell sections apart.
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "do",
        "does",
        "for",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "so",
        "that",
        "the",
        "this",
        "to",
        "with",
    ]
)
# BM25's usual constants: how fast a word's count stops adding, and how much a long section is discounted.
_K1, _B = 1.2, 0.75


@dataclass(frozen=True)
class Section:
    page: str
    heading: str
    level: int
    text: str  # the heading's line and what follows, up to the next heading

    @property
    def anchor(self) -> str:
        """The heading's anchor as GitHub makes it."""
        slug = re.sub(r"[^\w\- ]", "", self.heading.lower()).replace(" ", "-")
        return f"{self.page}#{slug}"


class DocsError(LookupError):
    """A page or heading that is not there; the message says what is."""


def split_sections(page: str, text: str) -> list[Section]:
    """The page's sections in order; what comes before the first heading is a section named for the page."""
    sections: list[Section] = []
    heading, level = page, 0
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        found = None if fenced else _HEADING.match(line)
        if found:
            if any(part.strip() for part in lines):
                sections.append(Section(page, heading, level, "\n".join(lines).strip()))
            heading, level, lines = found.group(2), len(found.group(1)), [line]
        else:
            lines.append(line)
    if any(part.strip() for part in lines):
        sections.append(Section(page, heading, level, "\n".join(lines).strip()))
    return sections


@functools.cache
def pages() -> dict[str, str]:
    """Every page by its file name (`listeners.md`)."""
    folder = resources.files("orchestrator").joinpath("docs")
    found = {
        entry.name: entry.read_text(encoding="utf-8")
        for entry in folder.iterdir()
        if entry.name.endswith(".md") and entry.is_file()
    }
    return dict(sorted(found.items()))


@functools.cache
def sections() -> tuple[Section, ...]:
    return tuple(section for page, text in pages().items() for section in split_sections(page, text))


@functools.cache
def _indexed() -> tuple[tuple[Section, list[str]], ...]:
    return tuple((section, _words(section.text)) for section in sections())


def _words(text: str) -> list[str]:
    """The words of `text`, lowercased, a plural's `s` dropped (`waits` finds `wait`); snake_case names whole."""
    return [
        w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in _WORD.findall(text.lower())
    ]


def search(query: str, limit: int = DEFAULT_RESULTS) -> list[dict[str, object]]:
    """The sections that match `query`'s words best (BM25, a word in the heading counting more), those holding
    every word first, each with its page, heading, anchor and a snippet."""
    terms = [t for t in dict.fromkeys(_words(query)) if t not in _STOP] or list(dict.fromkeys(_words(query)))
    if not terms:
        return []
    indexed = _indexed()
    average = sum(len(words) for _, words in indexed) / max(len(indexed), 1)
    rarity = {t: math.log(1 + (len(indexed) + 0.5) / (0.5 + sum(t in words for _, words in indexed))) for t in terms}
    scored = []
    for section, words in indexed:
        heading = set(_words(section.heading))
        held = [t for t in terms if t in words]
        if not held:
            continue
        score = 0.0
        for term in held:
            count = words.count(term)
            saturated = count * (_K1 + 1) / (count + _K1 * (1 - _B + _B * len(words) / average))
            score += rarity[term] * (saturated + 2 * (term in heading))
        scored.append((len(held), score, section))
    scored.sort(key=lambda found: (-found[0], -found[1]))
    return [
        {"page": s.page, "heading": s.heading, "anchor": s.anchor, "snippet": _snippet(s, terms)}
        for _, _, s in scored[: max(1, min(limit, MAX_RESULTS))]
    ]


def _snippet(section: Section, terms: list[str]) -> str:
    body = " ".join(section.text.split("\n", 1)[-1].split()) if section.level else " ".join(section.text.split())
    lowered = body.lower()
    hits = [i for i in (lowered.find(t) for t in terms) if i >= 0]
    start = max(0, min(hits) - SNIPPET_CHARS // 3) if hits else 0
    snippet = body[start : start + SNIPPET_CHARS]
    return ("..." if start else "") + snippet + ("..." if start + SNIPPET_CHARS < len(body) else "")


def read(page: str, heading: str | None = None) -> str:
    """A page (its outline when it is long), or one section of it with its subsections."""
    name = page if page.endswith(".md") else f"{page}.md"
    name = name.removeprefix("docs/")
    text = pages().get(name)
    if text is None:
        raise DocsError(f"page: no page {page!r}; the pages are {', '.join(pages())}")
    if heading is None:
        if len(text) <= MAX_PAGE_CHARS:
            return text
        return _outline(name, text)
    parts = split_sections(name, text)
    wanted = heading.strip().lstrip("#").strip().lower()
    for index, section in enumerate(parts):
        if section.heading.lower() == wanted or section.anchor.split("#", 1)[1] == wanted.lstrip("#"):
            under = [section]
            for later in parts[index + 1 :]:
                if later.level <= section.level:
                    break
                under.append(later)
            return "\n\n".join(s.text for s in under)
    headings = ", ".join(repr(s.heading) for s in parts if s.level)
    raise DocsError(f"heading: no heading {heading!r} on {name}; its headings are {headings}")


def _outline(name: str, text: str) -> str:
    parts = split_sections(name, text)
    lines = [
        f"{name} is {len(text):,} characters: read it a section at a time (read_doc with `heading`).",
        "",
        *(f"{'  ' * max(s.level - 1, 0)}- {s.heading}" for s in parts if s.level),
    ]
    intro = next((s for s in parts if s.level <= 1), None)
    if intro is not None:
        lines += ["", intro.text[: MAX_PAGE_CHARS // 4]]
    return "\n".join(lines)
