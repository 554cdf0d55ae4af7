"""A database lent to a test comes back as the next test expects it: empty, and its sequences at their start,
whatever the test did to them (a draw, or a `setval(..., false)` as `orchestrator restored` makes)."""

from __future__ import annotations

import asyncpg
import pytest

from tests.databases import OTHER_SCHEMA, Databases


@pytest.mark.parametrize("schema", ["orchestrator", OTHER_SCHEMA])
@pytest.mark.parametrize("moved", ["drawn", "set, not drawn"])
async def test_a_lent_databases_event_ids_start_again_when_it_is_given_back(
    databases: Databases, schema: str, moved: str
) -> None:
    url = await databases.lend(schema)
    conn = await asyncpg.connect(url)
    try:
        sequence = f'"{schema}".event_ids'
        if moved == "drawn":
            await conn.fetchval(f"SELECT nextval('{sequence}')")
        else:
            await conn.fetchval(f"SELECT setval('{sequence}', 1000000000000, false)")
    finally:
        await conn.close()
    await databases.give_back(url, schema)
    again = await databases.lend(schema)
    assert again == url
    conn = await asyncpg.connect(again)
    try:
        assert await conn.fetchval(f"SELECT nextval('{sequence}')") == 1
    finally:
        await conn.close()
        await databases.give_back(again, schema)
