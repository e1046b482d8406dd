"""The chaos soak's group audit (bench/chaos_groups.py): the most intervals open at once
and the most starts in one window, against a brute count over the same values."""

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

_BENCH = str(Path(__file__).resolve().parent.parent / "bench")
sys.path.insert(0, _BENCH)
try:
    chaos_groups = pytest.importorskip("chaos_groups")
finally:
    sys.path.remove(_BENCH)

instants = st.integers(min_value=0, max_value=200).map(lambda n: n / 10)


@given(st.lists(st.tuples(instants, instants), max_size=30))
def test_max_overlap_is_the_most_open_at_one_instant(pairs):
    intervals = [(min(a, b), max(a, b)) for a, b in pairs]
    seen, _at = chaos_groups.max_overlap(intervals)
    # A maximum is reached at some interval's start; [s, e) is open at t when s <= t < e.
    brute = max((sum(1 for s, e in intervals if s <= t < e) for t, _e in intervals), default=0)
    assert seen == brute


def test_touching_intervals_do_not_overlap():
    assert chaos_groups.max_overlap([(0.0, 1.0), (1.0, 2.0)])[0] == 1
    assert chaos_groups.max_overlap([(0.0, 1.5), (1.0, 2.0)])[0] == 2


@given(st.lists(instants, max_size=40), st.sampled_from([0.5, 1.0, 1.1, 3.0]))
def test_max_in_window_is_the_most_starts_in_one_window(starts, seconds):
    seen, at = chaos_groups.max_in_window(starts, seconds)
    brute = max((sum(1 for u in starts if t <= u < t + seconds) for t in starts), default=0)
    assert seen == brute
    if starts:
        assert sum(1 for u in starts if at <= u < at + seconds) == seen
