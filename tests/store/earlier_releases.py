"""A database as an earlier release made and used it, for the tests of upgrades in place.

Until 0026 a release had no function files: each migration restated the functions it changed, with plain names,
and every connection of the platform set the platform's schema as its search path, which those bodies relied on.
`released_through` runs the migration runner as such a release did (the migrations through a version, no function
file), and `their_connections` is a database URL with the search path its connections set. Only the earlier
release's own connections use it; the release under test never does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from orchestrator.core.database_schema import DEFAULT_SCHEMA
from orchestrator.store import migrate as migrate_module

# The last migration shipped before the function files.
BEFORE_FUNCTION_FILES = 26


@contextmanager
def released_through(monkeypatch: pytest.MonkeyPatch, version: int) -> Iterator[None]:
    """Within the block, the runner applies the migrations through `version`, and neither a function file nor
    their record (`schema_functions`)."""
    assert version <= BEFORE_FUNCTION_FILES
    shipped = migrate_module.migration_files()
    bookkeeping = migrate_module._BOOKKEEPING.split(";")[0] + ";"
    assert "schema_migrations" in bookkeeping and "schema_functions" not in bookkeeping
    with monkeypatch.context() as patched:
        patched.setattr(migrate_module, "migration_files", lambda: [f for f in shipped if f[0] <= version])
        patched.setattr(migrate_module, "function_files", list)
        patched.setattr(migrate_module, "_BOOKKEEPING", bookkeeping)
        patched.setattr(migrate_module, "_CHECKSUMS", "SELECT NULL::text AS name, NULL::text AS checksum WHERE false")
        yield


def their_connections(url: str, schema: str = DEFAULT_SCHEMA) -> str:
    """`url` with the search path an earlier release's connections set (the functions its migrations made name
    the platform's tables plainly)."""
    return f"{url}{'&' if '?' in url else '?'}search_path={schema}"
