"""Leases of a shared bucket's tokens: a process never spends more than it was granted, nor a lapsed lease."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.rate_leases import LEASE_SECONDS, Leases, burst, need, retry_after

steps = st.lists(
    st.tuples(
        st.sampled_from(["spend", "grant"]),
        st.floats(min_value=0, max_value=2),  # time passing before the step
        st.floats(min_value=0.5, max_value=5),  # tokens
    ),
    max_size=40,
)


@given(steps=steps)
def test_a_process_spends_no_more_than_it_was_granted_and_nothing_of_a_lapsed_lease(
    steps: list[tuple[str, float, float]],
) -> None:
    leases, now = Leases(), 0.0
    granted_at: list[tuple[float, float]] = []  # (when, tokens left over for the lease)
    spent_from_leases = 0.0
    for action, wait, tokens in steps:
        now += wait
        if action == "grant":
            leases.granted("b", tokens + 1, 1, now)
            granted_at.append((now, tokens))
        else:
            held = leases.held("b", now)
            if leases.spend("b", tokens, now):
                spent_from_leases += tokens
                assert held >= tokens
                assert granted_at and now - granted_at[-1][0] < LEASE_SECONDS, "a lapsed lease paid"
    # Each grant replaces the lease before it: at most the leftovers granted were ever spent.
    assert spent_from_leases <= sum(left for _, left in granted_at) + 1e-9


def test_a_request_never_needs_more_than_a_full_bucket_and_waits_at_least_a_second() -> None:
    assert burst(0.5) == 1 and burst(20) == 20
    assert need(3, 1000) == 3 and need(1000, 2) == 2
    assert Leases.asked(1000, 1) == 100 and Leases.asked(2, 1) == 1 and Leases.asked(3, 5) == 3
    assert retry_after(0.01) == 1 and retry_after(2.2) == 3
