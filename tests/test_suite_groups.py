"""Tests that must not run beside each other share an `xdist_group`, and the suite's two workers honour it.

`orchestrator dev` takes Temporal's default ports, so its tests run one at a time on one worker. A pytest
that pytest-xdist cannot add the group to a test's id for (9.2 with xdist 3.8) lets the scheduler split the
group without a word, and two `dev` processes then fight over port 7233.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.xdist_group("suite-groups")


def test_a_grouped_test_is_scheduled_as_its_group(request: pytest.FixtureRequest) -> None:
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run under --dist loadgroup")
    assert request.node.nodeid.endswith("@suite-groups"), (
        f"{request.node.nodeid}: pytest-xdist could not add the group to the test's id, so no group is kept"
    )
