"""A full concurrency group's backlog costs a claim nothing (issue #28: "a group at its
limit never blocks anything else"): the claim reads the rows of no group and those of each
group with room as ranges of their own (``state/claim_reads.py``, migration 0036), so the
due rows of a group at ``max_running`` or out of its rate are never read, however many.

Before, the claim walked every due row of the level in ``next_run_at`` order and dropped a
held group's rows one at a time: a backlog of 100,000 held rows cost each claim about
160 ms (docs/benchmarks.md). On PostgreSQL the reads are executed with ``EXPLAIN
ANALYZE``: the rows their scans read are bounded by the batch, not by the backlog. The
order and the fairness on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from django_durable_schedules import state
from django_durable_schedules.models import ConcurrencyGroup, Schedule
from django_durable_schedules.state import claim_reads
from django_durable_schedules.state.claim_reads import read_level

from .factories import T0
from .test_group_plans import schedule

pytestmark = pytest.mark.django_db
S = timedelta(seconds=1)
TABLE = Schedule._meta.db_table
BACKLOG = 400


def names(claims) -> list[str]:
    return sorted(c.schedule_name for c in claims)


def a_full_group_with_a_backlog() -> ConcurrencyGroup:
    """A group of ``max_running`` 1 whose one place a run holds (an hour's lease) and
    :data:`BACKLOG` more of its rows due at T0, ahead of five ungrouped rows due a second
    later; the claim that found the group full wrote its ``full_until``."""
    group = ConcurrencyGroup.objects.create(name="partner-api", max_running=1)
    Schedule.objects.bulk_create(
        [schedule(f"held-{n:04d}", T0, group) for n in range(BACKLOG + 1)]
        + [schedule(f"free-{n}", T0 + (1 + n) * S) for n in range(5)]
    )
    (running,) = state.claim_due(worker="w", now=T0, limit=1, lease_seconds=3600)
    assert running.schedule_name.startswith("held-")
    # The next claim finds the group full and holds it back until its recheck.
    assert names(state.claim_due(worker="w", now=T0 + 5 * S, limit=1)) == ["free-0"]
    group.refresh_from_db()
    assert group.full_until is not None and group.full_until > T0 + 5 * S
    return group


def test_a_full_groups_backlog_is_never_read_and_the_batch_fills_with_free_rows():
    group = a_full_group_with_a_backlog()
    with CaptureQueriesContext(connection) as queries:
        claims = state.claim_due(worker="w", now=T0 + 6 * S, limit=10)
    assert names(claims) == ["free-1", "free-2", "free-3", "free-4"]
    reads = [q["sql"] for q in queries if TABLE in q["sql"] and "next_run_at" in q["sql"]]
    assert reads
    # No read names the full group: it is neither read nor locked nor counted.
    for sql in reads:
        assert not re.search(rf"concurrency_group_id\W+= {group.pk}\b", sql), sql
    assert (
        Schedule.objects.filter(concurrency_group=group, lease_token__isnull=True).count()
        == BACKLOG
    )


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's EXPLAIN ANALYZE")
def test_the_reads_scan_rows_bounded_by_the_batch_not_by_the_backlog():
    a_full_group_with_a_backlog()
    with connection.cursor() as cursor:
        cursor.execute(f'ANALYZE "{TABLE}"')
    with CaptureQueriesContext(connection) as queries:
        state.claim_due(worker="w", now=T0 + 6 * S, limit=10)
    reads = [
        q["sql"]
        for q in queries
        if q["sql"].startswith(f'SELECT "{TABLE}"."id"') and "FOR UPDATE" in q["sql"]
    ]
    assert reads
    for sql in reads:
        scanned = rows_scanned_by(sql)
        # The batch (10) and a few rows of the read's own, never the 400 held back.
        assert scanned <= 20, (scanned, sql)


def rows_scanned_by(sql: str) -> int:
    """Rows the schedule-table scans of ``sql`` read, by ``EXPLAIN ANALYZE`` on PostgreSQL
    (sequential scans off, the statement rolled back): :func:`_rows_scanned`."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")
        plan = cursor.fetchone()[0][0]["Plan"]
        transaction.set_rollback(True)
    return _rows_scanned(plan)


def _rows_scanned(node: dict) -> int:
    """Rows the schedule-table scans of a JSON plan returned plus those their filters
    dropped."""
    own = 0
    if node.get("Relation Name") == TABLE and "Scan" in node["Node Type"]:
        own = node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
    return own + sum(_rows_scanned(child) for child in node.get("Plans", ()))


def test_a_group_with_room_due_first_is_taken_first_and_at_most_its_cap_is_read():
    group = ConcurrencyGroup.objects.create(name="reports", max_running=2)
    Schedule.objects.bulk_create(
        [schedule(f"grouped-{n}", T0 + n * S, group) for n in range(5)]
        + [schedule(f"free-{n}", T0 + (1 + n) * S) for n in range(5)]
    )
    # Earliest due first (grouped-0, grouped-1 | free-0, grouped-2 held | free-1): the
    # group's two places, then the rows of no group.
    claims = state.claim_due(worker="w", now=T0 + 9 * S, limit=4)
    assert names(claims) == ["free-0", "free-1", "grouped-0", "grouped-1"]
    # The group is full now: its three other rows wait, due; the free rows go on.
    assert names(state.claim_due(worker="w", now=T0 + 10 * S, limit=10)) == [
        "free-2",
        "free-3",
        "free-4",
    ]
    assert Schedule.objects.filter(concurrency_group=group, lease_token__isnull=True).count() == 3


def test_with_more_groups_than_a_claim_reads_the_earliest_due_go_first(monkeypatch):
    monkeypatch.setattr(claim_reads, "GROUP_READS", 3)
    groups = [ConcurrencyGroup.objects.create(name=f"g{n}", max_running=5) for n in range(7)]
    # g6's row is due first, then g5's, ... g0's last; one more group with nothing due.
    Schedule.objects.bulk_create(
        [schedule(f"g{n}-row", T0 + (10 - n) * S, group) for n, group in enumerate(groups)]
        + [schedule("free", T0), schedule("later", T0 + 3600 * S, groups[0])]
    )
    ConcurrencyGroup.objects.create(name="idle", max_running=5)
    # The rows of no group and of the three groups whose earliest due row is the earliest.
    first = state.claim_due(worker="w", now=T0 + 20 * S, limit=100)
    assert names(first) == ["free", "g4-row", "g5-row", "g6-row"]
    assert names(state.claim_due(worker="w", now=T0 + 20 * S, limit=100)) == [
        "g1-row",
        "g2-row",
        "g3-row",
    ]
    assert names(state.claim_due(worker="w", now=T0 + 20 * S, limit=100)) == ["g0-row"]


def test_read_level_merges_by_due_and_reads_no_group_when_none_exists():
    def Rooms(found):
        return lambda: found

    asked = []

    def group_rows(group, k):
        asked.append((group, k))
        return [(f"g{group}-{i}", 10 * group + i) for i in range(k)]

    ungrouped = [("a", 5), ("b", 15), ("c", 25)]
    rows = read_level(
        4, Rooms([(1, 2), (2, None)]), lambda k: ungrouped[:k], group_rows, lambda r: r[1],
        lambda rows: False,
    )  # fmt: skip
    assert rows == [("a", 5), ("g1-0", 10), ("g1-1", 11), ("b", 15)]
    assert asked == [(1, 2), (2, 4)]  # at most max_running (2), else the batch
    asked.clear()
    rows = read_level(
        2, Rooms([(1, 2)]), lambda k: ungrouped[:k], group_rows, lambda r: r[1],
        lambda rows: True,
    )  # fmt: skip
    assert rows == [("a", 5), ("b", 15)] and asked == []  # no group exists: none read
    rows = read_level(
        2, Rooms([(1, 2)]), lambda k: [], group_rows, lambda r: r[1], lambda rows: True,
        frozenset({1}),
    )  # fmt: skip
    assert rows == []  # a group found full by this claim is left out
