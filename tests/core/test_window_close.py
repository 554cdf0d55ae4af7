"""When a window closes (`lane_clock.window_close`): `window_seconds` after its first event; debounced, once
quiet `debounce_seconds` and open at least `window_seconds`, never past `max_wait_seconds`."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.core.declaration import BatchSpec
from orchestrator.core.lane_clock import Declared, window_close


@pytest.mark.parametrize(
    ("batch", "first", "last", "closes"),
    [
        ({"window_seconds": 2}, 100.0, 107.0, 102.0),
        ({"debounce_seconds": 1}, 100.0, 103.0, 104.0),
        ({"debounce_seconds": 1, "max_wait_seconds": 2}, 100.0, 103.0, 102.0),
        # The spec's example window with a debounce added: open at least 2 s, then until quiet for 1 s.
        ({"window_seconds": 2, "debounce_seconds": 1}, 100.0, 100.5, 102.0),
        ({"window_seconds": 2, "debounce_seconds": 1}, 100.0, 101.5, 102.5),
        ({"window_seconds": 2, "debounce_seconds": 1, "max_wait_seconds": 5}, 100.0, 104.5, 105.0),
    ],
)
def test_a_window_closes_as_its_batch_declares(batch: dict[str, Any], first: float, last: float, closes: float) -> None:
    spec = BatchSpec.model_validate(batch)
    declared = Declared(
        window_seconds=spec.window_seconds,
        debounce_seconds=spec.debounce_seconds,
        max_wait_seconds=spec.max_wait_seconds,
    )
    assert window_close(first, last, declared) == closes
