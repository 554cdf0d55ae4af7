"""Retry backoff: doubling from delay_seconds, monotone, capped at 900 s, never overflowing."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from orchestrator.core.backoff import MAX_RETRY_DELAY_SECONDS, retry_delay


def test_doubles_from_the_declared_delay() -> None:
    assert [retry_delay(30, n) for n in range(6)] == [30, 60, 120, 240, 480, 900]


def test_huge_retry_numbers_reach_the_cap() -> None:
    assert retry_delay(1e-300, 10**6) == MAX_RETRY_DELAY_SECONDS
    assert retry_delay(0.001, 5000) == MAX_RETRY_DELAY_SECONDS


def test_zero_delay_stays_zero() -> None:
    assert retry_delay(0, 10**6) == 0


def test_negative_inputs_are_refused() -> None:
    with pytest.raises(ValueError):
        retry_delay(-1, 0)
    with pytest.raises(ValueError):
        retry_delay(1, -1)


@given(
    st.floats(min_value=0, max_value=900, allow_nan=False),
    st.integers(min_value=0, max_value=5000),
)
@example(2.225073858507203e-309, 1000)  # a subnormal delay doubled a thousand times is small, not capped
def test_backoff_is_monotone_and_capped(delay: float, retry: int) -> None:
    here, next_ = retry_delay(delay, retry), retry_delay(delay, retry + 1)
    assert 0 <= here <= next_ <= MAX_RETRY_DELAY_SECONDS
    # The exact product, in rationals: 2.0**retry overflows a float long before the retries run out.
    assert here == float(min(Fraction(delay) * 2**retry, Fraction(900)))
