"""What a run's wait sends as its conditions: every sequence of them as a list (a tuple, a `UserList`, a view), and
what is none as it is, for the door to refuse naming `conditions` (a string made a list was its characters)."""

from __future__ import annotations

from collections import UserList
from typing import Any

import pytest

from orchestrator.sdk import sent_conditions

CONDITION = {"types": ["thread.item_posted"]}


@pytest.mark.parametrize(
    "given",
    [[CONDITION], (CONDITION,), UserList([CONDITION]), {"c": CONDITION}.values(), (c for c in [CONDITION])],
)
def test_a_sequence_of_conditions_is_sent_as_a_list(given: Any) -> None:
    assert sent_conditions(given) == [CONDITION]


@pytest.mark.parametrize("given", ["thread.item_posted", b"x", CONDITION, None, 3])
def test_what_is_no_sequence_of_conditions_is_sent_as_it_is(given: Any) -> None:
    assert sent_conditions(given) is given
