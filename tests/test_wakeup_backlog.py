"""A held concurrency group's backlog costs an idle worker's wake-up nothing, as it costs
the claim nothing (tests/test_claim_backlog.py): ``state.next_wakeup``'s next due slot is
the earliest of the waiting rows of no group and of each group with room, each read as a
range of the claim index (``state/wakeup_due.py``), so the rows of a group at
``max_running`` or out of its rate are never read, however many.

Before, the wake-up walked the waiting rows in ``next_run_at`` order and dropped a held
group's rows one at a time: 100,000 held rows cost each wake-up 85-150 ms on PostgreSQL.
There every statement of the wake-up is run with ``EXPLAIN ANALYZE``: the rows its scans
read are bounded, not by the backlog. On SQLite, PostgreSQL and MariaDB the instant is the
one the walk found: the earliest waiting row in the worker's pools that no group holds
back (nor ``max_parallel``), and the end of a group's hold (``rate_until``,
``full_until``) is still a wake-up."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_durable_schedules import state
from django_durable_schedules.db.clock import db_now
from django_durable_schedules.models import ConcurrencyGroup, Schedule, Status
from django_durable_schedules.state import wakeup_due

from .factories import due_schedules
from .test_claim_backlog import rows_scanned_by

pytestmark = pytest.mark.django_db
S = timedelta(seconds=1)
MINUTE = 60 * S
TABLE = Schedule._meta.db_table
BACKLOG = 300
WORKER = "idle-w"


@pytest.fixture(autouse=True)
def _levels_forgotten():
    """Each test finds the priority levels afresh, and leaves none behind (the tables are
    emptied between tests)."""
    wakeup_due.forget_levels()
    yield
    wakeup_due.forget_levels()


def now() -> datetime:
    """The database clock's time, to the second (the reads' ``clock`` is later)."""
    return db_now().replace(microsecond=0)


def held_groups(at: datetime) -> tuple[ConcurrencyGroup, ConcurrencyGroup]:
    """A group at its ``max_running`` (``full_until`` a few seconds ahead: what a claim
    writes) and one out of its rate for half an hour, each with :data:`BACKLOG` rows due a
    minute ago."""
    full = ConcurrencyGroup.objects.create(name="partner-api", max_running=1)
    rated = ConcurrencyGroup.objects.create(name="mailer", rate="10/h")
    ConcurrencyGroup.objects.filter(pk=full.pk).update(full_until=at + 4 * S)
    ConcurrencyGroup.objects.filter(pk=rated.pk).update(rate_until=at + 30 * MINUTE)
    for group in (full, rated):
        due_schedules(BACKLOG, due=at - MINUTE, prefix=group.name, concurrency_group=group)
    return full, rated


def wakeups(pools=None) -> tuple[state.Wakeup, state.Wakeup]:
    """The worker's wake-up (its one statement on the heartbeat row) and the per-read one."""
    state.heartbeat(WORKER, pools=pools)
    return state.next_wakeup(worker_id=WORKER, pools=pools), state.next_wakeup(pools=pools)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's EXPLAIN ANALYZE")
def test_the_wakeup_reads_rows_bounded_not_by_a_held_backlog():
    at = now()
    held_groups(at)
    roomy = ConcurrencyGroup.objects.create(name="reports", max_running=5)
    due_schedules(3, due=at + 10 * MINUTE, spacing=60, prefix="report", concurrency_group=roomy)
    due_schedules(3, due=at + 60 * MINUTE, spacing=60, prefix="free")
    with connection.cursor() as cursor:
        cursor.execute(f'ANALYZE "{TABLE}"')
    state.heartbeat(WORKER)
    for worker in (WORKER, None):
        at = now()  # the group full again (a claim's full_until, a few seconds ahead)
        ConcurrencyGroup.objects.filter(name="partner-api").update(full_until=at + 4 * S)
        with CaptureQueriesContext(connection) as queries:
            wakeup = state.next_wakeup(worker_id=worker)
        # Neither held group's rows, due a minute ago, but the end of the first hold.
        assert wakeup.due == at + 4 * S
        reads = [q["sql"] for q in queries if TABLE in q["sql"]]
        assert reads
        for sql in reads:
            scanned = rows_scanned_by(sql)
            # A few rows per range read, never the 600 held back.
            assert scanned <= 20, (scanned, sql)


def test_the_rows_of_no_group_are_found_past_a_held_backlog():
    at = now()
    full, rated = held_groups(at)
    ConcurrencyGroup.objects.filter(pk=full.pk).update(full_until=None)
    Schedule.objects.filter(concurrency_group=full).delete()
    due_schedules(["free-later", "free-first"], due=at + 10 * MINUTE, spacing=-60)
    for wakeup in wakeups():
        assert wakeup.due == at + 9 * MINUTE


def test_the_end_of_a_hold_is_still_a_wakeup():
    at = now()
    full, rated = held_groups(at)
    due_schedules(["free"], due=at + 2 * 60 * MINUTE)
    for wakeup in wakeups():  # full_until, a few seconds ahead
        assert wakeup.due == at + 4 * S
    ConcurrencyGroup.objects.filter(pk=full.pk).update(
        full_until=None, max_running=None, rate="1/h", rate_until=at + 20 * MINUTE
    )
    for wakeup in wakeups():  # the earlier rate_until
        assert wakeup.due == at + 20 * MINUTE


def test_a_group_with_room_gives_its_earliest_waiting_row():
    at = now()
    held_groups(at)
    ConcurrencyGroup.objects.filter(name="partner-api").update(full_until=None)
    # partner-api has room again: its backlog, due a minute ago, is due.
    for wakeup in wakeups():
        assert wakeup.due == at - MINUTE
    Schedule.objects.filter(concurrency_group__name="partner-api").update(
        next_run_at=at + 60 * MINUTE
    )
    roomy = ConcurrencyGroup.objects.create(name="reports", max_running=5)
    due_schedules(3, due=at + 5 * MINUTE, spacing=-60, prefix="report", concurrency_group=roomy)
    due_schedules(["free"], due=at + 10 * MINUTE)
    for wakeup in wakeups():
        assert wakeup.due == at + 3 * MINUTE


def test_every_priority_level_is_read_and_a_new_one_is_seen(monkeypatch):
    at = now()
    held_groups(at)
    ConcurrencyGroup.objects.filter(full_until__isnull=False).update(
        full_until=None, max_running=None, rate="1/h", rate_until=at + 30 * MINUTE
    )
    due_schedules(["high"], due=at + 20 * MINUTE, priority=10)
    due_schedules(["low"], due=at + 15 * MINUTE, priority=-3)
    for wakeup in wakeups():
        assert wakeup.due == at + 15 * MINUTE
    # A row at a level the worker's statement does not read yet, due earlier.
    due_schedules(["new-level"], due=at + 12 * MINUTE, priority=4)
    for wakeup in wakeups():
        assert wakeup.due == at + 12 * MINUTE
    due_schedules(["lowest"], due=at + 11 * MINUTE, priority=-100)
    for wakeup in wakeups():
        assert wakeup.due == at + 11 * MINUTE
    # More levels than the wake-up reads one by one: the walk, as before.
    monkeypatch.setattr(wakeup_due, "WAKEUP_LEVELS", 2)
    due_schedules(["five"], due=at + 10 * MINUTE, priority=5)
    for wakeup in wakeups():
        assert wakeup.due == at + 10 * MINUTE


def test_only_the_workers_pools_and_waiting_rows_with_room_count():
    at = now()
    held_groups(at)
    ConcurrencyGroup.objects.filter(full_until__isnull=False).update(
        full_until=None, max_running=None, rate="1/h", rate_until=at + 30 * MINUTE
    )
    due_schedules(["free"], due=at + 25 * MINUTE)
    due_schedules(["elsewhere"], due=at + 1 * MINUTE, pool="reports")
    due_schedules(["paused"], due=at + 2 * MINUTE, status=Status.PAUSED)
    due_schedules(["at-max-parallel"], due=at + 3 * MINUTE, overlap_policy="allow", max_parallel=2)
    Schedule.objects.filter(name="at-max-parallel").update(parallel_full_until=at + 40 * MINUTE)
    for wakeup in wakeups():
        assert wakeup.due == at + 25 * MINUTE
    for wakeup in wakeups(pools=("default", "reports")):
        assert wakeup.due == at + 1 * MINUTE
    Schedule.objects.filter(name="paused").update(triggered_at=at)  # runs when triggered
    for wakeup in wakeups():
        assert wakeup.due == at + 2 * MINUTE


def test_the_due_instant_is_the_walks_on_random_tables():
    """The earliest of the ranges is what the walk over every waiting row found."""
    rng = random.Random(0)
    at = now()
    groups = [ConcurrencyGroup.objects.create(name=f"g{n}", max_running=3) for n in range(4)]
    pools = ("default", "other")
    for round_ in range(4):
        Schedule.objects.all().delete()
        for group in groups:  # held out of its rate (until 10 to 50 minutes ahead) or not
            held = rng.random() < 0.5
            ConcurrencyGroup.objects.filter(pk=group.pk).update(
                rate="5/h", rate_until=at + rng.randrange(10, 50) * MINUTE if held else None
            )
        rows = [
            {
                "name": f"r{round_}-{n}",
                "offset": rng.randrange(-600, 3600),
                "concurrency_group": rng.choice([None, None, *groups]),
                "priority": rng.choice([0, 0, 1, -5, 7]),
                "pool": rng.choice(pools),
                "status": rng.choice([Status.ACTIVE] * 4 + [Status.PAUSED]),
            }
            for n in range(40)
        ]
        due_schedules(rows, due=at)
        for chosen in (("default",), pools):
            clock = db_now()
            walk = (
                Schedule.objects.filter(pool__in=chosen)
                .filter(Schedule.objects.group_room_q(clock))
                .filter(Schedule.objects.parallel_room_q(clock))
                .waiting()
                .order_by("next_run_at")
                .values_list("next_run_at", flat=True)
                .first()
            )
            holds = ConcurrencyGroup.objects.filter(ConcurrencyGroup.holding_q(clock))
            ends = [group.rate_until for group in holds]
            expected = min([t for t in (walk, *ends) if t is not None], default=None)
            for wakeup in wakeups(pools=chosen):
                assert wakeup.due == expected, (round_, chosen)
