"""asyncpg's pool logs each failed refill of its floor with a traceback; one that failed because the database is
away is a line naming the error, and any other failure keeps its traceback."""

from __future__ import annotations

import logging

import pytest

from orchestrator.store.connection import quiet_pool_outages


def _failed_refill(err: BaseException) -> None:
    try:
        raise err
    except type(err):
        pool_log = logging.getLogger("asyncpg.pool")
        pool_log.warning("Failed to restore the pool connection floor; retrying", exc_info=True)


def test_a_refill_the_database_refused_is_one_line_and_any_other_keeps_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    quiet_pool_outages()
    quiet_pool_outages()  # installed once, however often called
    assert len(logging.getLogger("asyncpg.pool").filters) == 1
    with caplog.at_level(logging.WARNING, logger="asyncpg.pool"):
        _failed_refill(ConnectionRefusedError(111, "Connection refused"))
        _failed_refill(ValueError("a bug"))
    away, bug = caplog.records
    assert away.getMessage() == (
        "Failed to restore the pool connection floor; retrying (ConnectionRefusedError: [Errno 111] Connection refused)"
    )
    assert away.exc_info is None
    assert bug.exc_info is not None and bug.exc_info[0] is ValueError, "a failure of another kind keeps its traceback"
