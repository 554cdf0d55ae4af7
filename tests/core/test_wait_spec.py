"""A wait's conditions as `wait_for_event` sends them: the listener filter language, `types` left out as a
listener's may be (events of any type); what can never hold refused naming the condition's field."""

from __future__ import annotations

import pytest

from orchestrator.core.declaration import CancelOn
from orchestrator.core.errors import CommandError
from orchestrator.core.waits import parse_wait


def test_a_condition_may_leave_out_types_as_a_listeners_filter_may() -> None:
    spec = parse_wait(
        {
            "conditions": [
                {"aliases": ["chats/7"]},
                {"where": [{"path": "item.role", "op": "eq", "value": "user"}]},
            ],
            "timeout_seconds": 5,
        }
    )
    assert [c.types for c in spec.conditions] == [None, None]


def test_aliases_on_types_never_at_an_alias_are_refused_naming_the_condition() -> None:
    body = {
        "conditions": [{"types": ["object.written"]}, {"types": ["execution.ended"], "aliases": ["chats/*"]}],
        "timeout_seconds": 5,
    }
    with pytest.raises(CommandError) as refused:
        parse_wait(body)
    assert refused.value.code == "invalid_request"
    assert refused.value.message.startswith("conditions.1.aliases: no event of types ['execution.ended']")


def test_a_cancel_on_entry_names_its_types() -> None:
    with pytest.raises(ValueError, match="types"):
        CancelOn.model_validate({"aliases": ["docs/*"]})
