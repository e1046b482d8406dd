"""A tzdata update between the plan and the claim (issue #24, item 9): a schedule planned
under older zone rules runs once, at its slot under the current rules; the fingerprint
names the zone rules; the release each worker reads is in its heartbeat and health warns
when live workers read different ones.

The "old rules" are real ones written as TZif files into a temporary ``TZPATH``: Mexico
City before tzdata 2022f (DST from the first Sunday of April to the last of October),
Cairo before 2023c (no DST). The current ones are the process's own.
"""

from __future__ import annotations

import hashlib
import struct
import zoneinfo
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_durable_schedules import state, timing
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule
from django_durable_schedules.models.definition import same_definition
from django_durable_schedules.worker.execution.runner import execute

S = timedelta(seconds=1)
OLD_RULES = {
    "America/Mexico_City": ("CST6CDT,M4.1.0,M10.5.0", -6 * 3600, "CST"),
    "Africa/Cairo": ("EET-2", 2 * 3600, "EET"),
}


def z(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def tzif(tz_string: str, offset: int, abbreviation: str) -> bytes:
    """A TZif (version 2) file without transitions: the POSIX TZ string ``tz_string``
    (its footer) decides every instant."""
    chars = abbreviation.encode() + b"\0"
    block = (
        b"TZif2"
        + b"\0" * 15
        + struct.pack(">6l", 0, 0, 0, 0, 1, len(chars))
        + struct.pack(">lBB", offset, 0, 0)
        + chars
    )
    return block + block + b"\n" + tz_string.encode() + b"\n"


@pytest.fixture
def old_rules(tmp_path: Path) -> Iterator[None]:
    """While active, the process reads the old rules of OLD_RULES' zones."""
    timing.zone_names()  # the zone names, read once, stay those of the real database
    for name, (tz_string, offset, abbreviation) in OLD_RULES.items():
        path = tmp_path.joinpath(*name.split("/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(tzif(tz_string, offset, abbreviation))
    zoneinfo.reset_tzpath([str(tmp_path)])
    timing.reload_zone_rules()
    try:
        yield
    finally:
        current_rules()


def current_rules() -> None:
    zoneinfo.reset_tzpath()
    timing.reload_zone_rules()


def at(instant: datetime):
    return mock.patch("django_durable_schedules.db.clock.db_now", return_value=instant)


def run_all(now: datetime) -> list[datetime]:
    claims = state.claim_due(worker="w", now=now, lease_seconds=120)
    state.complete([execute(c) for c in claims], now=now + S)
    return [c.scheduled_for for c in claims]


def make(name: str, zone: str, kind: str, created: datetime) -> Schedule:
    fields = {"cron": "0 9 * * *"} if kind == "cron" else {"rrule": "FREQ=DAILY;BYHOUR=9"}
    row = Schedule(name=name, callback="tests.noop", kind=kind, timezone=zone, **fields)
    row.full_clean()
    with at(created):
        row.save()
    return row


# -- the claim ----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["cron", "rrule"])
def test_a_slot_planned_under_old_rules_runs_once_at_its_time_under_the_new_ones(old_rules, kind):
    """Mexico City, 09:00 daily: planned under the old rules for 14:00 UTC (09:00 CDT).
    Under the current rules (no DST since 2022f) 14:00 UTC is 08:00: the claim at the
    stored instant re-plans to 15:00 UTC and runs nothing; the run is at 15:00, once."""
    row = make("mx", "America/Mexico_City", kind, z(2027, 5, 31, 20))
    assert row.next_run_at == z(2027, 6, 1, 14)
    current_rules()
    assert row.upcoming(1, after=z(2027, 6, 1)) == [z(2027, 6, 1, 15)]

    assert run_all(z(2027, 6, 1, 14)) == []  # the old instant: re-planned, not run
    row.refresh_from_db()
    assert row.next_run_at == z(2027, 6, 1, 15)
    assert row.definition_hash == row.compute_definition_hash()
    assert run_all(z(2027, 6, 1, 15)) == [z(2027, 6, 1, 15)]
    assert run_all(z(2027, 6, 2, 14)) == []  # on the current grid now: nothing to re-plan
    assert run_all(z(2027, 6, 2, 15)) == [z(2027, 6, 2, 15)]
    day_one = RunAttempt.objects.filter(scheduled_for__date=datetime(2027, 6, 1).date())
    assert day_one.count() == 1
    assert RunReceipt.objects.filter(status="succeeded").count() == 2
    row.refresh_from_db()
    assert row.missed_count == 0 and row.occurrence == 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["cron", "rrule"])
def test_a_slot_the_new_rules_moved_earlier_is_run_not_lost(old_rules, kind):
    """Cairo, 09:00 daily: planned under the old rules (no DST) for 07:00 UTC; the current
    rules (DST again since 2023c) put 09:00 at 06:00 UTC. The claim at the stored instant
    runs the 06:00 slot (late, not lost, once), and the grid goes on at 06:00."""
    row = make("cairo", "Africa/Cairo", kind, z(2027, 5, 31, 12))
    assert row.next_run_at == z(2027, 6, 1, 7)
    current_rules()
    assert run_all(z(2027, 6, 1, 7)) == [z(2027, 6, 1, 6)]
    row.refresh_from_db()
    assert row.next_run_at == z(2027, 6, 2, 6) and row.missed_count == 0
    assert run_all(z(2027, 6, 1, 23)) == []
    assert run_all(z(2027, 6, 2, 6)) == [z(2027, 6, 2, 6)]


@pytest.mark.django_db(transaction=True)
def test_a_slot_already_run_before_the_update_is_not_run_again(old_rules):
    """The nearest slot of the current grid before the stored instant is not taken when the
    row already ran after it (its last run bounds the look back)."""
    row = make("cairo", "Africa/Cairo", "cron", z(2027, 5, 31, 12))
    assert run_all(z(2027, 6, 1, 7)) == [z(2027, 6, 1, 7)]  # under the old rules
    row.refresh_from_db()
    assert row.next_run_at == z(2027, 6, 2, 7)
    # The row ran at 07:00 UTC; the update comes, and a stored 07:00 is claimed a day later.
    current_rules()
    assert run_all(z(2027, 6, 2, 7)) == [z(2027, 6, 2, 6)]
    assert RunAttempt.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_downtime_across_the_update_still_coalesces_into_one_late_run(old_rules):
    row = make("mx", "America/Mexico_City", "cron", z(2027, 5, 31, 20))
    current_rules()
    assert run_all(z(2027, 6, 3, 16)) == [z(2027, 6, 3, 15)]
    row.refresh_from_db()
    assert row.missed_count == 2  # 1 and 2 June, counted
    assert row.next_run_at == z(2027, 6, 4, 15)


@pytest.mark.django_db(transaction=True)
def test_save_of_an_unchanged_definition_under_new_rules_is_no_edit(old_rules):
    row = make("mx", "America/Mexico_City", "cron", z(2027, 5, 31, 20))
    stored = row.definition_hash
    current_rules()
    assert row.compute_definition_hash() != stored
    assert same_definition(stored, row.compute_definition_hash())
    row.name = "mx-renamed"
    with at(z(2027, 6, 1, 13)):
        row.save()
    row.refresh_from_db()
    # Kept for the claim, which checks the stored instant against the current grid.
    assert row.definition_hash == stored and row.next_run_at == z(2027, 6, 1, 14)
    assert run_all(z(2027, 6, 1, 14)) == []


@pytest.mark.django_db(transaction=True)
def test_an_off_grid_next_run_at_with_the_current_fingerprint_still_runs():
    """A ``next_run_at`` written behind ``save()`` under the same rules (to make a row
    due) runs, as before: only a plan made under other zone rules is checked."""
    row = make("mx", "America/Mexico_City", "cron", z(2027, 5, 31, 20))
    Schedule.objects.filter(pk=row.pk).update(next_run_at=z(2027, 6, 1, 10, 7))
    assert run_all(z(2027, 6, 1, 10, 7)) == [z(2027, 6, 1, 10, 7)]


@pytest.mark.django_db(transaction=True)
def test_a_fingerprint_stored_before_zone_rules_were_part_of_it_is_no_edit():
    row = make("mx", "America/Mexico_City", "cron", z(2027, 5, 31, 20))
    legacy = row._definition_digest()
    assert len(legacy) == 40 and "@" not in legacy
    Schedule.objects.filter(pk=row.pk).update(definition_hash=legacy)
    assert run_all(z(2027, 6, 1, 15)) == [z(2027, 6, 1, 15)]  # on the grid: runs
    row.refresh_from_db()
    assert row.definition_hash == row.compute_definition_hash()


# -- the fingerprint and the arithmetic ---------------------------------------------------


def test_the_fingerprint_names_the_zone_rules_of_zoned_cron_and_rrule_only():
    cron = Schedule(kind="cron", cron="0 9 * * *", timezone="America/Mexico_City")
    digest, rules = cron.compute_definition_hash().split("@")
    assert len(digest) == 32 and rules == timing.zone_rules_id("America/Mexico_City")
    data = Path(zoneinfo.TZPATH[0], "America", "Mexico_City")
    if data.is_file():
        assert rules == hashlib.sha1(data.read_bytes()).hexdigest()[:7]
    for row in (
        Schedule(kind="cron", cron="0 9 * * *", timezone="UTC"),
        Schedule(kind="interval", interval_seconds=60, timezone="America/Mexico_City"),
        Schedule(kind="cron", cron="0 9 * * *", timezone="Not/AZone"),
    ):
        assert len(row.compute_definition_hash()) == 40
        assert "@" not in row.compute_definition_hash()


def test_same_definition():
    row = Schedule(kind="cron", cron="0 9 * * *", timezone="Africa/Cairo")
    current = row.compute_definition_hash()
    assert same_definition(current, current)
    assert same_definition(row._definition_digest(), current)  # stored before
    assert same_definition(current[:33] + "0000000", current)  # other rules
    assert not same_definition("", current)
    other = Schedule(kind="cron", cron="0 10 * * *", timezone="Africa/Cairo")
    assert not same_definition(other.compute_definition_hash(), current)


def test_rules_version_and_reload():
    version = timing.rules_version()
    assert version and len(version) <= 40
    timing.reload_zone_rules()
    assert timing.rules_version() == version


DAILY = timing.Spec(kind="cron", cron="0 9 * * *", timezone="Africa/Cairo")


@given(
    day=st.integers(min_value=0, max_value=3000),
    shift_minutes=st.integers(min_value=-11 * 60, max_value=11 * 60),
)
def test_a_slot_moved_by_less_than_half_its_period_is_found_again(day, shift_minutes):
    """A slot off the grid by the change of an offset (less than half the distance between
    slots) has that slot as its nearest; a bound after it gives the next one."""
    slot = timing.next_slot_after(DAILY, z(2025, 1, 1) + timedelta(days=day))
    assert slot is not None
    moved = slot + timedelta(minutes=shift_minutes)
    assert timing.nearest_slot(DAILY, moved) == slot
    following = timing.next_slot_after(DAILY, slot)
    assert timing.nearest_slot(DAILY, moved, after=slot) == following


def test_nearest_slot_edges():
    once = timing.Spec(kind="once", run_at=z(2027, 1, 1))
    assert timing.nearest_slot(once, z(2027, 1, 2)) == z(2027, 1, 1)
    assert timing.nearest_slot(once, z(2027, 1, 2), after=z(2027, 1, 1)) is None
    ended = timing.Spec(kind="cron", cron="0 9 * * *", timezone="UTC", end_at=z(2027, 1, 1, 10))
    assert timing.nearest_slot(ended, z(2027, 1, 5)) is None  # more than a day past the last
    assert timing.nearest_slot(ended, z(2027, 1, 1, 20)) == z(2027, 1, 1, 9)
    assert timing.nearest_slot(DAILY, z(2027, 6, 1, 6)) == z(2027, 6, 1, 6)  # a slot itself


# -- the fleet: each worker's tzdata release, and health -----------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_records_the_release_and_health_warns_when_live_workers_differ(
    admin_client,
):
    from django.urls import reverse

    from django_durable_schedules import health
    from django_durable_schedules.models import WorkerHeartbeat

    state.heartbeat("w1")
    state.heartbeat("w2")
    assert set(WorkerHeartbeat.objects.values_list("tzdata_version", flat=True)) == {
        timing.rules_version()
    }
    assert health.snapshot().healthy
    WorkerHeartbeat.objects.filter(worker_id="w2").update(tzdata_version="2022a")
    now = state.db_now()
    WorkerHeartbeat.objects.create(  # a worker of an older version records none: left out
        worker_id="w3", started_at=now, last_seen_at=now, tzdata_version=""
    )
    WorkerHeartbeat.objects.create(  # a stopped worker is not live: left out
        worker_id="w4", started_at=now, last_seen_at=now, stopped_at=now, tzdata_version="1999z"
    )
    snap = health.snapshot()
    expected = "live workers read different tzdata releases: " + "; ".join(
        sorted([f"{timing.rules_version()} (w1)", "2022a (w2)"])
    )
    assert snap.healthy and snap.problems == [] and expected in snap.warnings
    assert {w["worker_id"]: w["tzdata_version"] for w in snap.as_dict()["workers"]}["w2"] == (
        "2022a"
    )
    html = admin_client.get(reverse("admin:durable_schedules_schedule_health")).content.decode()
    assert "live workers read different tzdata releases" in html
    assert 'class="dds-bad" title="live workers read different tzdata releases">2022a<' in html
    response = admin_client.get(reverse("durable_schedules_api:health"))
    assert response.status_code == 200  # a warning: a rolling upgrade passes through it
    assert expected in response.json()["warnings"]


def test_tzdata_problem_needs_two_known_releases():
    from django_durable_schedules.health import tzdata_problem

    def row(worker_id: str, version: str) -> dict:
        return {"worker_id": worker_id, "tzdata_version": version}

    assert tzdata_problem([]) is None
    assert tzdata_problem([row("a", "2025b"), row("b", "2025b")]) is None
    assert tzdata_problem([row("a", "2025b"), row("b", ""), row("c", "unknown")]) is None
    many = [row(f"w{i}", "2025b") for i in range(5)] + [row("x", "2026a")]
    assert tzdata_problem(many) == (  # type: ignore[arg-type]
        "live workers read different tzdata releases: 2025b (w0, w1, w2, ...); 2026a (x)"
    )


@pytest.mark.django_db(transaction=True)
def test_0014_both_ways():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    from django_durable_schedules.models import WorkerHeartbeat

    app = "durable_schedules"

    def columns() -> set[str]:
        with connection.cursor() as cursor:
            described = connection.introspection.get_table_description(
                cursor, WorkerHeartbeat._meta.db_table
            )
        return {c.name for c in described}

    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes(app)
    state.heartbeat("before")
    try:
        executor = MigrationExecutor(connection)
        executor.migrate([(app, "0013_calendar_visibility")])
        assert "tzdata_version" not in columns()
        old = executor.loader.project_state((app, "0013_calendar_visibility")).apps
        beats = old.get_model(app, "WorkerHeartbeat").objects
        assert beats.filter(worker_id="before").exists()
    finally:
        MigrationExecutor(connection).migrate(leaves)
    assert "tzdata_version" in columns()
    assert WorkerHeartbeat.objects.get(worker_id="before").tzdata_version == ""
    state.heartbeat("before")
    assert WorkerHeartbeat.objects.get(worker_id="before").tzdata_version == (
        timing.rules_version()
    )


# -- the start-up sweep -------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["cron", "rrule"])
def test_a_worker_start_replans_a_slot_the_new_rules_moved_earlier_so_it_runs_on_time(
    old_rules, kind
):
    """Cairo, 09:00 daily, planned under the old rules for 07:00 UTC. A worker that starts
    under the current rules before then (state.regrid_other_rules) re-plans the row to
    06:00 UTC: the slot runs at its time, not an hour late at the claim's re-plan."""
    row = make("cairo", "Africa/Cairo", kind, z(2027, 5, 31, 12))
    other = make("mx", "America/Mexico_City", kind, z(2027, 5, 31, 20))
    assert (row.next_run_at, other.next_run_at) == (z(2027, 6, 1, 7), z(2027, 6, 1, 14))
    current_rules()
    assert sorted(state.regrid_other_rules(now=z(2027, 6, 1, 3))) == ["cairo", "mx"]
    row.refresh_from_db()
    other.refresh_from_db()
    assert row.next_run_at == z(2027, 6, 1, 6)  # moved earlier: runs on time
    assert other.next_run_at == z(2027, 6, 1, 15)  # moved later: waited for
    assert row.definition_hash == row.compute_definition_hash()
    assert state.regrid_other_rules(now=z(2027, 6, 1, 3)) == []  # once
    assert run_all(z(2027, 6, 1, 6)) == [z(2027, 6, 1, 6)]
    assert run_all(z(2027, 6, 1, 7)) == []
    assert run_all(z(2027, 6, 1, 15)) == [z(2027, 6, 1, 15)]
    row.refresh_from_db()
    assert row.missed_count == 0 and row.next_run_at == z(2027, 6, 2, 6)


@pytest.mark.django_db(transaction=True)
def test_the_sweep_leaves_edits_leases_and_current_rules_to_the_claim(old_rules):
    edited = make("edited", "Africa/Cairo", "cron", z(2027, 5, 31, 12))
    leased = make("leased", "Africa/Cairo", "cron", z(2027, 5, 31, 12))
    current_rules()
    fresh = make("fresh", "Africa/Cairo", "cron", z(2027, 5, 31, 12))
    Schedule.objects.filter(pk=edited.pk).update(cron="0 10 * * *")  # behind save()
    Schedule.objects.filter(pk=leased.pk).update(
        lease_token="00000000-0000-0000-0000-000000000001", lease_expires_at=z(2027, 6, 1, 4)
    )
    before = {r.pk: (r.next_run_at, r.definition_hash) for r in Schedule.objects.all()}
    assert state.regrid_other_rules(now=z(2027, 6, 1, 3)) == []
    after = {r.pk: (r.next_run_at, r.definition_hash) for r in Schedule.objects.all()}
    assert after == before and fresh.pk in after


@pytest.mark.django_db(transaction=True)
def test_a_starting_worker_runs_the_sweep(old_rules):
    from django_durable_schedules.worker import Worker, WorkerOptions

    row = make("cairo", "Africa/Cairo", "cron", z(2027, 5, 31, 12))  # ahead of the clock
    current_rules()
    assert Worker(WorkerOptions(worker_id="w-start", once=True)).run() == 0
    row.refresh_from_db()
    assert row.next_run_at == z(2027, 6, 1, 6)
    assert row.definition_hash == row.compute_definition_hash()
