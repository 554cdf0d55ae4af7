"""The platform's SQL names its schema, and one function moves those names to another schema.

Every statement in the repository (Python, migrations, function files) names the default schema literally:
`orchestrator.events`, `orchestrator.orchestrator_route_page(...)`, as River and Graphile Worker qualify every
name, so no statement depends on a connection's search path and any pooler works on its default settings.
`in_schema(sql, schema)` rewrites those qualifiers when `ORCHESTRATOR_DATABASE_SCHEMA` names another schema. The
platform's own statements pass it at two places only: the class of the store's connections
(`store/postgres.connection_class`) and the migration runner; the application's helpers (`transactional.py`)
pass their two statements through it on the application's connections. It is the identity (no work at all) for
the default schema, and cached for another, whose name it writes quoted (a reserved word is a schema's name too).

It touches a qualifier and nothing else: the word `orchestrator` as an unquoted identifier, not after a dot,
directly followed by a dot and a name, outside string literals, quoted identifiers and comments (a dollar-quoted
function body is code, and is rewritten as code). Two literals are names too, and only these:
`'orchestrator.name'::regclass` (a sequence for `nextval`) and `'orchestrator'::regnamespace` (the platform's
schema where a function compares or formats one). `'orchestrator.fire'` (an activity's name),
`orchestrator_route_page` and `"orchestrator".events` are left alone. Pure text: it lives in the core because
the application's helpers, below the store, use it too.
"""

from __future__ import annotations

import re
from functools import lru_cache

from orchestrator.core.database_schema import DEFAULT_SCHEMA, checked_schema

# Statements are a bounded set (the store's, the migrations', the function files'), a few hundred in all.
_CACHED_STATEMENTS = 4096

_IDENT_START = r"A-Za-z_\u0080-\uffff"
_IDENT_PART = _IDENT_START + r"0-9$"
_TOKEN = re.compile(
    rf"""
      (?P<line_comment>--[^\n]*)
    | (?P<block_comment>/\*)
    | (?P<escape_string>[Ee]'(?:[^'\\]|\\.|'')*'?)
    | (?P<string>'(?:[^']|'')*'?)
    | (?P<quoted>"(?:[^"]|"")*"?)
    | (?P<dollar>\$(?:[{_IDENT_START}][{_IDENT_START}0-9]*)?\$)
    | (?P<ident>[{_IDENT_START}][{_IDENT_PART}]*)
    | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_QUALIFIED_LITERAL = re.compile(rf"'{DEFAULT_SCHEMA}\.([a-z_][a-z0-9_]*)'")
_SCHEMA_LITERAL = f"'{DEFAULT_SCHEMA}'"
_CAST = re.compile(r"\s*::\s*(regclass|regnamespace)\b", re.IGNORECASE)
_NAME_AFTER_DOT = re.compile(rf'\.[{_IDENT_START}"]')


def in_schema(sql: str, schema: str) -> str:
    """`sql` with the default schema's qualifiers naming `schema` instead; `sql` itself for the default schema."""
    if schema == DEFAULT_SCHEMA:
        return sql
    return _rewritten(sql, checked_schema(schema))


@lru_cache(maxsize=_CACHED_STATEMENTS)
def _rewritten(sql: str, schema: str) -> str:
    if DEFAULT_SCHEMA not in sql.lower():
        return sql
    return "".join(_pieces(sql, schema))


def _pieces(sql: str, schema: str) -> list[str]:
    out: list[str] = []
    at = 0
    end = len(sql)
    while at < end:
        token = _TOKEN.match(sql, at)
        assert token is not None  # `other` takes any one character
        kind, text = token.lastgroup, token.group()
        if kind == "block_comment":
            stop = _block_comment_end(sql, at)
            out.append(sql[at:stop])
            at = stop
            continue
        if kind == "dollar" and not _after_identifier(sql, at):
            close = sql.find(text, token.end())
            stop = end if close < 0 else close
            # A dollar-quoted string is a function's body (or a DO block's): code, rewritten as code.
            out += [text, *_pieces(sql[token.end() : stop], schema), sql[stop : stop + len(text)]]
            at = stop + len(text)
            continue
        if kind == "ident" and text.lower() == DEFAULT_SCHEMA and _qualifies(sql, at, token.end()):
            out.append(f'"{schema}"')
        elif kind == "string" and (cast := _CAST.match(sql, token.end())):
            out.append(_named_literal(text, cast.group(1).lower(), schema))
        else:
            out.append(text)
        at = token.end()
    return out


def _qualifies(sql: str, start: int, stop: int) -> bool:
    """`orchestrator` at sql[start:stop] is a schema qualifier: a dot and a name follow, and it is not itself the
    second part of a dotted name."""
    return (start == 0 or sql[start - 1] != ".") and _NAME_AFTER_DOT.match(sql, stop) is not None


def _named_literal(text: str, cast: str, schema: str) -> str:
    if cast == "regclass" and (found := _QUALIFIED_LITERAL.fullmatch(text)):
        return f"'\"{schema}\".{found.group(1)}'"
    if cast == "regnamespace" and text == _SCHEMA_LITERAL:
        return f"'\"{schema}\"'"
    return text


def _after_identifier(sql: str, at: int) -> bool:
    """A `$` inside a name (`a$b$`) opens no dollar quote."""
    return at > 0 and re.match(f"[{_IDENT_PART}]", sql[at - 1]) is not None


def _block_comment_end(sql: str, at: int) -> int:
    """Where the comment opened at `at` ends (PostgreSQL's block comments nest)."""
    depth = 0
    i = at
    while i < len(sql):
        pair = sql[i : i + 2]
        if pair == "/*":
            depth += 1
            i += 2
        elif pair == "*/":
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    return len(sql)
