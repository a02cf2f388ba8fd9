"""Backoff delays: growth, cap, jitter bounds, reset (no I/O)."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from kubewatch.backoff import Backoff


@given(
    st.floats(0.01, 2.0),
    st.floats(2.0, 60.0),
    st.floats(0.0, 0.9),
    st.integers(1, 30),
    st.integers(0, 2**32 - 1),
)
def test_delays_grow_to_the_cap_within_the_jitter_band(initial, maximum, jitter, n, seed):
    b = Backoff(initial, maximum, jitter=jitter, rng=random.Random(seed))
    for i in range(n):
        base = min(maximum, initial * 2**i)
        assert base * (1 - jitter) - 1e-9 <= b.next_delay() <= base + 1e-9
    b.reset()
    assert b.next_delay() <= initial + 1e-9


def test_without_jitter_the_sequence_is_exact():
    b = Backoff(0.5, 3.0, jitter=0.0)
    assert [b.next_delay() for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
