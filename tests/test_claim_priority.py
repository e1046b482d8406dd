"""The claim order of issue #28 (items 2 and 3): a claim takes its pools' due schedules,
higher ``priority`` first, then the earliest due; another pool's schedules are never its.

On real databases through ``state.claim_due`` (run on SQLite, PostgreSQL and MariaDB), and
:func:`~django_durable_schedules.state.claim_order.take_in_order` against a reference
sort with Hypothesis."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_durable_schedules import state
from django_durable_schedules.models import Schedule
from django_durable_schedules.state.claim_order import take_in_order

from .factories import T0, due_schedules

S = timedelta(seconds=1)
NOW = T0 + 3600 * S  # every row below is due by then


def rows(*specs):
    """Bulk-create active every-hour schedules from ``(name, due_offset_s, priority, pool)``
    specs: ``next_run_at`` is ``T0 + due_offset_s`` seconds."""
    due_schedules(
        [{"name": n, "offset": o, "priority": p, "pool": pool} for n, o, p, pool in specs]
    )


def claim(limit, pools=None):
    """The names claimed by one claim of ``limit`` at ``NOW``, in the claim's order."""
    claims = state.claim_due(worker="w", limit=limit, now=NOW, pools=pools)
    return [c.schedule_name for c in claims]


@pytest.mark.django_db(transaction=True)
def test_a_higher_priority_is_claimed_first_even_when_due_later():
    rows(("early-low", 0, 0, "default"), ("late-high", 600, 5, "default"))
    assert claim(1) == ["late-high"]
    assert claim(1) == ["early-low"]


@pytest.mark.django_db(transaction=True)
def test_within_a_level_the_earliest_due_is_claimed_first():
    rows(("c", 300, 2, "default"), ("a", 100, 2, "default"), ("b", 200, 2, "default"))
    assert claim(2) == ["a", "b"]
    assert claim(2) == ["c"]


@pytest.mark.django_db(transaction=True)
def test_negative_priorities_come_after_the_default_level():
    rows(("neg", 0, -1, "default"), ("zero", 900, 0, "default"), ("neg2", 10, -300, "default"))
    assert claim(3) == ["zero", "neg", "neg2"]


@pytest.mark.django_db(transaction=True)
def test_a_default_claim_never_takes_another_pools_schedule():
    rows(("elsewhere", 0, 100, "reports"), ("here", 500, 0, "default"))
    assert claim(10) == ["here"]
    assert claim(10) == []  # the other pool's row is due, highest priority: still not ours
    assert Schedule.objects.get(name="elsewhere").lease_token is None
    assert claim(10, pools=["reports"]) == ["elsewhere"]


@pytest.mark.django_db(transaction=True)
def test_two_pools_are_merged_by_due_time_at_one_level():
    rows(
        ("a1", 0, 1, "a"),
        ("b1", 10, 1, "b"),
        ("a2", 20, 1, "a"),
        ("b2", 30, 1, "b"),
        ("a-low", 0, 0, "a"),
        ("default-high", 0, 9, "default"),  # not one of the claim's pools
    )
    assert claim(3, pools=["a", "b"]) == ["a1", "b1", "a2"]
    assert claim(3, pools=["a", "b"]) == ["b2", "a-low"]


@pytest.mark.django_db(transaction=True)
def test_a_high_priority_schedule_starts_in_the_first_batch_behind_a_backlog_of_5000(
    django_assert_max_num_queries,
):
    rows(*((f"backlog-{i:04d}", 0, 0, "default") for i in range(5000)))
    rows(("urgent", 0, 10, "default"))
    # Two levels: one index probe and one read each (10, then 0, where the batch fills),
    # the clock read and the batch's bulk writes: 8-9 statements on SQLite, PostgreSQL and
    # MariaDB, whatever the size of the backlog.
    with django_assert_max_num_queries(12) as captured:
        first = claim(None)
    assert "urgent" in first and first[0] == "urgent"
    assert len(first) == 100  # the default batch (BATCH_SIZE), full of the backlog after it
    print(f"claim statements for a batch of 100 over 5,001 due rows: {len(captured)}")


# -- take_in_order against a reference sort ----------------------------------------------


POOLS = ["default", "a", "b"]
item = st.tuples(
    st.sampled_from(POOLS),
    st.integers(min_value=-3, max_value=3),
    st.integers(min_value=0, max_value=50),
)


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(item, max_size=40),
    pools=st.lists(st.sampled_from(POOLS), min_size=1, max_size=4),
    limit=st.integers(min_value=1, max_value=45),
)
def test_take_in_order_is_a_sort_by_priority_then_due_time(items, pools, limit):
    # Each item is (pool, priority, due, serial): the serial keeps equal items apart.
    table = [(pool, level, due, n) for n, (pool, level, due) in enumerate(items)]
    by_pool_level: dict[tuple[str, int], list[tuple]] = {}
    for row in sorted(table, key=lambda r: (r[2], r[3])):
        by_pool_level.setdefault((row[0], row[1]), []).append(row)
    calls = []

    def top_level(pool, below):
        levels = [lvl for (p, lvl) in by_pool_level if p == pool and lvl < below]
        return max(levels, default=None)

    def read_level(pool, level, n):
        calls.append((pool, level))
        return by_pool_level.get((pool, level), [])[:n]

    got = take_in_order(pools, limit, top_level, read_level, lambda r: r[2])

    wanted = [r for r in table if r[0] in pools]
    wanted.sort(key=lambda r: (-r[1], r[2]))
    expected = wanted[:limit]
    assert len(got) == len(expected) == len(set(got))
    # The same (priority, due) sequence; ties of equal keys may come from either row.
    assert [(-r[1], r[2]) for r in got] == [(-r[1], r[2]) for r in expected]
    assert set(got) <= set(wanted)
    # A level is read once per pool, never one the claim did not need.
    assert len(calls) == len(set(calls))
