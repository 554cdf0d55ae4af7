"""The router packs a lane's events into signals that stay far below Temporal's payload limit."""

from __future__ import annotations

from orchestrator.core.batch_windows import envelope_bytes
from orchestrator.router import EVENTS_PER_SIGNAL, SIGNAL_BYTES, signal_chunks


def test_many_small_events_go_in_signals_of_at_most_events_per_signal() -> None:
    events = [{"id": n, "type": "object.written", "alias": f"a/{n}"} for n in range(1, 1201)]
    chunks = signal_chunks(events)
    assert [len(c) for c in chunks] == [EVENTS_PER_SIGNAL, EVENTS_PER_SIGNAL, 200]
    assert [e for c in chunks for e in c] == events, "in order, each once"


def test_heavy_events_are_split_by_bytes_and_one_always_goes() -> None:
    heavy = [{"id": n, "type": "listener.failed", "data": {"error": "x" * (200 * 1024)}} for n in range(1, 8)]
    chunks = signal_chunks(heavy)
    assert [e for c in chunks for e in c] == heavy
    assert all(sum(envelope_bytes(e) for e in c) <= SIGNAL_BYTES for c in chunks)
    assert [len(c) for c in chunks] == [2, 2, 2, 1]
    huge = [{"id": 1, "type": "listener.failed", "data": {"error": "x" * SIGNAL_BYTES}}]
    assert signal_chunks(huge) == [huge]
    assert signal_chunks([]) == []
