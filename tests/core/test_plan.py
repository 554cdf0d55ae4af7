"""An app's declarations by name: a declared schedule's name parts back into its session alias and its own."""

from __future__ import annotations

import pytest

from orchestrator.core.plan import declared_name, schedule_of


@pytest.mark.parametrize(("session_alias", "alias"), [("ops", "clock"), ("tenants/a:b", "clocks/x:y@z")])
def test_a_declared_schedules_name_gives_back_its_session_and_alias_whatever_they_hold(
    session_alias: str, alias: str
) -> None:
    name = declared_name("schedule", {"session_alias": session_alias, "alias": alias})
    assert schedule_of(name) == (session_alias, alias)
