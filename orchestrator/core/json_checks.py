"""What no command's JSON may hold, found in its text and in its value: nesting past a depth, a NUL, a lone
surrogate, a number beyond a double's range, a value JSON cannot carry. Both doors refuse them before a command
runs, and a client before it sends one (`orchestrator.plain_http.encoded_body`).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

# How deep a command's JSON may nest. Far beyond any real value, and far below what would exhaust Python's
# stack in the validation, the JSON encoding and the templates a value goes through.
MAX_JSON_DEPTH = 100


def too_deep(field: str, limit: int = MAX_JSON_DEPTH) -> str:
    """The refusal's message for JSON under `field` nested past `limit`."""
    return f"{field}: JSON nested deeper than {limit} levels"


# JSON text's strings (its brackets are outside them), and all but brackets and quotes.
# (Unrolled: a run of plain bytes at a time, not one byte per step of an alternation: twice as fast on a bulk write.)
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_QUOTES_OR_BRACKETS = bytes(b for b in range(256) if b not in b'"[]{}')
# A JSON number a double cannot hold (it decodes to infinity): an exponent of three digits or more, or a run of
# 210 digits (with an exponent of two digits at most, a number needs 210 of them before its point to pass 1e308).
# Some of what it finds is in range (`1e100`); those are only walked.
_HUGE_NUMBER = re.compile(rb"[eE]\+?0*[0-9]{3}|[0-9]{210}")
# The text with every digit a 0, `e` and `E` an e, `+` kept and all else a space: where `_HUGE_NUMBER` could find
# something is then a plain substring (a pattern searched over a bulk write's text cost 2 us an item).
_NUMBER_MARKS = bytes(48 if 48 <= b <= 57 else 101 if b in b"eE" else 43 if b == 43 else 32 for b in range(256))
_HUGE_MARKS = (b"e000", b"e+000", b"0" * 210)
# A UTF-16 surrogate written as an escape (`\ud800` to `\udfff`), after its run of backslashes (an odd run ends
# in the escape's own; an even one is escaped backslashes, then text); and one written as the three bytes UTF-8
# would give it (`ED A0 80`: not UTF-8, but Python's `json.loads` of bytes reads it), lone whatever follows.
_SURROGATE_ESCAPE = re.compile(rb"(\\+)u[dD]([89a-fA-F])[0-9a-fA-F]{2}")
_SURROGATE_BYTES = re.compile(rb"\xed[\xa0-\xbf]")


def _lone_surrogate(raw: bytes) -> bool:
    """Whether the text holds a surrogate that is not half of a pair: a high one (`\ud800`-`\udbff`) not
    followed at once by a low one (`\udc00`-`\udfff`), or a low one not right after a high one. A pair (an emoji
    from a client that escapes all but ASCII) leaves a bulk write on the fast path."""
    if _SURROGATE_BYTES.search(raw):
        return True
    high_ends = -1  # where the last high escape ended, while it waits for its low one
    for found in _SURROGATE_ESCAPE.finditer(raw):
        if len(found.group(1)) % 2 == 0:
            continue
        starts = found.end(1) - 1
        if found.group(2) in b"89abAB":
            if high_ends != -1:
                return True
            high_ends = found.end()
        elif high_ends != starts:
            return True
        else:
            high_ends = -1
    return high_ends != -1


def may_hold_trouble(raw: bytes, limit: int) -> bool:
    """Whether valid JSON text could decode to what `json_trouble` refuses, read from the text in C-speed passes
    (a bulk write's walk cost the door 8 us an item): a NUL is written `\\u0000` (a raw control character is
    not JSON), a lone surrogate is an escape not paired (`_lone_surrogate`), a number that decodes to infinity
    has an exponent of three digits or 210 digits in a row, and the nesting is the brackets' once strings are
    cut, each pass taking off the innermost."""
    if json.detect_encoding(raw[:4]) not in ("utf-8", "utf-8-sig"):
        # UTF-16 or UTF-32, which `json.loads` of bytes reads: none of the passes below reads it.
        return True
    if b"\\u0000" in raw or ((b"\\u" in raw or b"\xed" in raw) and _lone_surrogate(raw)):
        return True
    # Looked for in the whole text first: a string's `e100` is looked at again with the strings cut.
    marks = raw.translate(_NUMBER_MARKS)
    if any(mark in marks for mark in _HUGE_MARKS) and _HUGE_NUMBER.search(_JSON_STRING.sub(b"", raw)):
        return True
    skeleton = _brackets(raw)
    for _ in range(limit):
        if not skeleton:
            return False
        # The innermost pairs, and only they: marked first, so that no pair taken off makes one in the same pass.
        skeleton = skeleton.replace(b"{}", b"\x00").replace(b"[]", b"\x00").replace(b"\x00", b"")
    return bool(skeleton)


def _brackets(raw: bytes) -> bytes:
    """The brackets of valid JSON text outside its strings, in order. With no escape in the text, a string is what
    lies between two quotes: cut at the quotes, every other part is outside (bytes' own passes, where cutting each
    string out by a pattern cost a bulk write 2 us an item)."""
    if b"\\" in raw:
        return _JSON_STRING.sub(b"", raw).translate(None, _NOT_QUOTES_OR_BRACKETS)  # no quote is left once cut
    return b"".join(raw.translate(None, _NOT_QUOTES_OR_BRACKETS).split(b'"')[0::2])


def not_json(name: str) -> Any:
    """The `parse_constant` of every door's `json.loads`: NaN and Infinity are not JSON, though Python reads them."""
    raise ValueError(f"{name} is not valid JSON")


def json_trouble(body: Any, limit: int, root: str | None = None) -> str | None:
    """What no command may hold, as the refusal's message, or None: JSON nested deeper than `limit`, a NUL
    character or a lone UTF-16 surrogate (`\\ud800`: no UTF-8 spells it) in a string or a key (PostgreSQL's text
    cannot hold either), a number beyond a double's range, or a value JSON has no form for (a set, a date: a
    caller in this process, or a client before it sends). Walked without recursion; a path is spelled out only
    for what is found wanting, from `root` when the value is not a command's body (a stream's `filter`). Nesting
    names the field of the body it is under (`value: JSON nested deeper ...`), not its path a hundred deep."""
    stack: list[tuple[Any, str, Any, int, Any]] = [(body, "", root, 0, root)]
    while stack:
        item, parent, key, depth, top = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return f"{_joined(parent, key)}: a NUL character (\\u0000) cannot be stored"
            if not _utf8(item):
                return f"{_joined(parent, key)}: a lone surrogate (\\ud800 to \\udfff) cannot be stored"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{_joined(parent, key)}: a number beyond a double's range (or NaN) cannot be stored"
        elif isinstance(item, dict | list | tuple):
            if depth + 1 > limit:
                return too_deep("body" if top is None else top, limit)
            path = _joined(parent, key) if key is not None else parent
            if isinstance(item, dict):
                for name, child in item.items():
                    if not isinstance(name, str):
                        return f"{path or 'body'}: a key must be a string in JSON; this one is {name!r}"
                    if "\x00" in name:
                        return f"{path or 'body'}: a NUL character (\\u0000) cannot be stored, in the key {name!r}"
                    if not _utf8(name):
                        return f"{path or 'body'}: a lone surrogate cannot be stored, in the key {name!r}"
                    stack.append((child, path, name, depth + 1, name if top is None else top))
            else:
                stack.extend(
                    (child, path, index, depth + 1, index if top is None else top) for index, child in enumerate(item)
                )
        elif item is not None and not isinstance(item, int):  # bool is an int
            return f"{_joined(parent, key)}: a {type(item).__name__} is no JSON value"
    return None


def _utf8(text: str) -> bool:
    """Whether UTF-8 spells `text`: all but a string holding a lone surrogate, which JSON's `\\ud800` can make."""
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _joined(parent: str, key: Any) -> str:
    return f"{parent}.{key}" if parent else str(key)
