"""The wait before a retried batch: `min(delay_seconds * 2^retry, 900)` (SPEC section 5).

Owns the formula only; counting attempts and holding the slot through the wait is the lane's. The cap is
the specification's 900 s (15 minutes). The doubling is computed with `math.ldexp`, so a large retry
number reaches the cap instead of overflowing.
"""

from __future__ import annotations

import math

MAX_RETRY_DELAY_SECONDS = 900.0


def retry_delay(delay_seconds: float, retry: int) -> float:
    """Seconds to wait before the repeat that follows a run whose `batch.retry` was `retry`."""
    if delay_seconds < 0 or retry < 0:
        raise ValueError("delay_seconds and retry must not be negative")
    if delay_seconds == 0:
        return 0.0
    try:
        delay = math.ldexp(delay_seconds, retry)
    except OverflowError:
        return MAX_RETRY_DELAY_SECONDS
    return min(delay, MAX_RETRY_DELAY_SECONDS)
