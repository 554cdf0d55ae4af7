"""The PostgreSQL schema the platform's tables and functions live in, and the rule its name follows.

A schema's name is spliced into SQL (an identifier cannot be a bound parameter), so only plain lower-case names
pass, and never PostgreSQL's own (`pg_*`).
"""

from __future__ import annotations

import re

DEFAULT_SCHEMA = "orchestrator"
SCHEMA_PATTERN = r"^[a-z_][a-z0-9_]{0,62}$"
_NAME = re.compile(SCHEMA_PATTERN)


def checked_schema(schema: str) -> str:
    if not _NAME.fullmatch(schema) or schema.startswith("pg_"):
        raise ValueError(f"database_schema: {schema!r} is not a plain lower-case schema name")
    return schema
