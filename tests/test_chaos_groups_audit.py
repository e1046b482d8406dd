"""The chaos soak's group audit (bench/chaos_groups.py): the most intervals open at once
and the most starts in one window, against a brute count over the same values."""

from hypothesis import given
from hypothesis import strategies as st

from .bench_modules import import_bench

(chaos_groups,) = import_bench("chaos_groups")

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


def test_a_claim_handed_back_unrun_is_not_counted_against_the_rate():
    """A run handed back unrun (``released``: past its start deadline, a worker draining)
    gives its place in the rate back (``state.groups.unstart_groups``) and a later claim
    takes it: the audit counts the claims the engine counts, not the released ones (the
    PostgreSQL soak saw 6 claims of a 3/s group in 1.1 s, 4 of them released)."""
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2026, 12, 4, 22, 32, tzinfo=UTC)

    def attempt(ms, status):
        return {
            "schedule__concurrency_group__name": "chaos-rated",
            "claimed_at": t0 + timedelta(milliseconds=ms),
            "receipt__status": status,
        }

    rows = [
        attempt(0, "released"),
        attempt(100, "succeeded"),
        attempt(300, "released"),
        attempt(500, "failed"),
        attempt(700, "released"),
        attempt(750, None),  # still open at the audit: it may run, it counts
    ]
    claimed = chaos_groups.rate_claims(rows)
    assert claimed["chaos-rated"] == [
        (t0 + timedelta(milliseconds=ms)).timestamp() for ms in (100, 500, 750)
    ]
    assert chaos_groups.max_in_window(claimed["chaos-rated"], 1.1)[0] == 3
