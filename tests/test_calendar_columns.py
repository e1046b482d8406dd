"""Totality for every column of the exclusion calendar tables (issue 24): whatever is
written behind ``save()`` into a calendar, its dates or the schedule-calendar links, no
worker pass raises, an innocent schedule of the same batch runs, and a schedule whose
calendar cannot be evaluated is paused with a ``degraded_reason`` (health counts it) -
or its bad value is ignored by a documented rule (docs/concepts.md, *When a value is
bad*).

Hypothesis writes, with ``QuerySet.update()`` and raw SQL, each calendar column the engine
reads: ``holidays_country`` (unknown, lower case, removed, long), ``holidays_subdivision``
(unknown, another country's), ``name`` (quotes, commas, non-ASCII, over 64 characters, NUL
where the database lets it), ``shared``; dates at the edges (0001-01-01, 9999-12-31, year
10000 and text that is no date by raw SQL where the database lets it) with NUL or huge
reasons; and a link to a calendar row deleted by raw SQL (foreign key checks off). A
value the database refuses is not written (the example goes on without it).

One calendar is poisoned before the claim (``early``), one between the claim and the end
of the runs (``late``); then every worker pass runs - ``claim_due``, ``complete`` (in time,
and late after the lease expired with no attempt left), ``expire_leases``,
``next_wakeup``, a second claim - and every reader: ``Schedule.upcoming()``, the API's
schedule list, detail and ``upcoming/?include_excluded=1`` (staff and owner-scoped) and
the admin's change page. Same profile as ``tests/test_totality_properties.py``
(``DDS_HYPOTHESIS_EXAMPLES``: 25) on SQLite; at most 10 examples on PostgreSQL and MariaDB
(``POISON_PROFILE``, ``tests/conftest.py``'s ``server_examples``): the property is what each database lets in,
so it stays on every vendor, but its strategies are the same everywhere (an example
draws two poisons from the lists above, of at most 8 values each: 10 examples write 20)
and its 25 examples were the longest test of the server lanes (58 s on PostgreSQL, 87 s
on MariaDB in CI).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction
from django.test import Client
from django.test.utils import override_settings
from django.urls import reverse
from hypothesis import given, note
from hypothesis import strategies as st
from rest_framework.test import APIClient

from django_durable_schedules import health, state, timing
from django_durable_schedules.models import (
    ExclusionCalendar,
    ExclusionDate,
    RunAttempt,
    RunReceipt,
    Schedule,
)

from .test_totality_properties import POISON_PROFILE, db_now, wipe

pytestmark = pytest.mark.django_db(transaction=True)

CALENDARS = ExclusionCalendar._meta.db_table
DATES = ExclusionDate._meta.db_table
ZONE = "Europe/Paris"
INTERVAL = 60
LEASE = 120

COUNTRIES = ("", "FR", "DE", "US", "fr", "XX", "ZZZZZZZZ", "F\x00R")
SUBDIVISIONS = ("", "BY", "CA", "ENG", "by", "ZZ", "X" * 32)
NAMES = ("plant", "it's", 'say "hi"', "a,b", "fête", "x" * 64, "y" * 100, "nul\x00name")
REASONS = ("", "Fête nationale", "nul\x00reason", "r" * 200, "R" * 5000)
#: Dates written by the ORM (always storable) and texts written by raw SQL.
EDGE_DATES = (date(1, 1, 1), date(9999, 12, 31))
RAW_DATES = ("10000-01-01", "garbage", "2024-02-30", "")


@dataclass(frozen=True)
class Poison:
    name: str
    country: str
    subdivision: str
    shared: bool
    offsets: tuple[int, ...]  # days from today, written by the ORM
    edges: tuple[date, ...]
    raw: tuple[str, ...]
    reason: str
    dangling: bool  # the calendar row deleted by raw SQL, its links kept


poisons = st.builds(
    Poison,
    name=st.sampled_from(NAMES),
    country=st.sampled_from(COUNTRIES),
    subdivision=st.sampled_from(SUBDIVISIONS),
    shared=st.booleans(),
    offsets=st.lists(st.integers(-1, 3), max_size=3, unique=True).map(tuple),
    edges=st.lists(st.sampled_from(EDGE_DATES), max_size=2, unique=True).map(tuple),
    raw=st.lists(st.sampled_from(RAW_DATES), max_size=2, unique=True).map(tuple),
    reason=st.sampled_from(REASONS),
    dangling=st.booleans(),
)


# ---------------------------------------------------------------------------------------
# Writing behind save()
# ---------------------------------------------------------------------------------------


def attempt(write) -> bool:
    """Run ``write`` in its own transaction; False when the database refuses the value
    (a driver's ValueError for NUL on PostgreSQL included)."""
    try:
        with transaction.atomic():
            write()
    except (DatabaseError, ValueError):
        return False
    return True


def raw(sql: str, params: list[Any]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def delete_calendar_row(pk: int) -> bool:
    """Delete the calendar row ``pk`` by raw SQL with the database's foreign key checks
    off, leaving its schedule links pointing nowhere; False if the database refuses."""
    vendor = connection.vendor
    off, on = {
        "sqlite": ("PRAGMA foreign_keys = OFF", "PRAGMA foreign_keys = ON"),
        "postgresql": (
            "SET session_replication_role = replica",
            "SET session_replication_role = DEFAULT",
        ),
        "mysql": ("SET FOREIGN_KEY_CHECKS = 0", "SET FOREIGN_KEY_CHECKS = 1"),
    }[vendor]
    ExclusionDate.objects.filter(calendar_id=pk).delete()
    with connection.cursor() as cursor:
        cursor.execute(off)
        try:
            return attempt(lambda: raw(f"DELETE FROM {CALENDARS} WHERE id = %s", [pk]))
        finally:
            cursor.execute(on)


def poison(cal: ExclusionCalendar, p: Poison, today: date) -> None:
    """Write ``p`` into ``cal`` behind ``save()``, each value that the database lets in."""
    qs = ExclusionCalendar.objects.filter(pk=cal.pk)
    attempt(lambda: qs.update(name=f"{p.name}-{cal.pk}"))
    attempt(lambda: qs.update(holidays_country=p.country))
    attempt(lambda: qs.update(holidays_subdivision=p.subdivision))
    attempt(lambda: qs.update(shared=p.shared))
    days = {today + timedelta(days=d) for d in p.offsets} | set(p.edges)
    for day in sorted(days):
        if not attempt(
            lambda day=day: ExclusionDate.objects.create(calendar=cal, date=day, reason=p.reason)
        ):
            ExclusionDate.objects.get_or_create(calendar=cal, date=day)
    for text in p.raw:
        attempt(
            lambda text=text: raw(
                f"INSERT INTO {DATES} (calendar_id, date, reason) VALUES (%s, %s, %s)",
                [cal.pk, text, ""],
            )
        )
    if p.dangling:
        delete_calendar_row(cal.pk)


def evaluable(pk: int) -> bool:
    """Whether the engine can evaluate the calendar row ``pk`` as it now is: gone (its
    links are ignored), or its holiday codes known and every date readable. Read with the
    database's own text of each date, not through the model's converters."""
    found = list(
        ExclusionCalendar.objects.filter(pk=pk).values_list(
            "holidays_country", "holidays_subdivision"
        )
    )
    if not found:
        return True
    [(country, subdivision)] = found
    if country:
        try:
            timing.check_holidays(country, subdivision)
        except timing.InvalidSchedule:
            return False
    with connection.cursor() as cursor:
        column = connection.ops.quote_name("date")
        cursor.execute(
            f"SELECT CAST({column} AS CHAR(40)) FROM {DATES} WHERE calendar_id = %s", [pk]
        )
        texts = [str(row[0]).strip() for row in cursor.fetchall()]
    for text in texts:
        try:
            date.fromisoformat(text)
        except (TypeError, ValueError):
            return False
    return True


# ---------------------------------------------------------------------------------------
# The rows
# ---------------------------------------------------------------------------------------


def schedule(name: str, now, owner, **fields) -> Schedule:
    row = Schedule.objects.create(
        name=name,
        callback="tests.noop",
        kind="interval",
        interval_seconds=INTERVAL,
        timezone=ZONE,
        owner=owner,
        **fields,
    )
    Schedule.objects.filter(pk=row.pk).update(next_run_at=now.replace(microsecond=0))
    return row


def texts(value: Any) -> list[str]:
    """Every string of a decoded JSON answer."""
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in [k, *texts(v)]]
    if isinstance(value, list):
        return [t for v in value for t in texts(v)]
    return [value] if isinstance(value, str) else []


def readers(
    rows: list[Schedule], clients: dict[str, Any], admin: Client, now, hidden: list[str]
) -> None:
    """Every reader of a schedule and its calendars answers (no 500, no exception other
    than a definition the engine cannot evaluate), and no answer to the owner-scoped user
    (``alice``) names a calendar of ``hidden`` (not shared)."""
    state.next_wakeup()
    alice = clients["alice"]
    for answer in (
        alice.post(f"/api/schedules/{row.pk}/enable/")
        if tail == "enable/"
        else alice.get(f"/api/schedules/{row.pk}/{tail}")
        for row in rows
        for tail in ("", "upcoming/?include_excluded=1&count=3", "enable/")
    ):
        assert answer.status_code in (200, 409), answer.content[:300]
        said = texts(answer.json())
        assert not [n for n in hidden for t in said if n in t], said
    for row in Schedule.objects.filter(pk__in=[r.pk for r in rows]):
        try:
            row.upcoming(3, after=now)
        except timing.InvalidSchedule:
            assert row.exclusion_calendars.exists()
        change = admin.get(reverse("admin:durable_schedules_schedule_change", args=[row.pk]))
        assert change.status_code == 200
        for client in clients.values():
            api = f"/api/schedules/{row.pk}/"
            assert client.get(api).status_code == 200
            answer = client.get(f"{api}upcoming/?include_excluded=1&count=3")
            assert answer.status_code in (200, 409), answer.content[:300]
    for client in clients.values():
        assert client.get("/api/schedules/").status_code == 200


@pytest.fixture
def people(django_user_model):
    staff = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    alice = django_user_model.objects.create_user("alice")
    admin = Client()
    admin.force_login(staff)
    clients = {}
    for who, user in (("staff", staff), ("alice", alice)):
        clients[who] = APIClient()
        clients[who].force_authenticate(user)
    with override_settings(DURABLE_SCHEDULES={"API_OWNER_SCOPED": True}):
        yield alice, clients, admin


@POISON_PROFILE
@given(early=poisons, late=poisons)
def test_no_calendar_column_stops_a_worker_pass(people, early, late):
    note(f"early={early!r} late={late!r}")
    alice, clients, admin = people
    wipe()
    ExclusionCalendar.objects.all().delete()
    now = db_now()
    today = timing.local_date(now, ZONE)
    innocent = schedule("innocent", now, alice)
    named = schedule("named", now, alice)  # its calendar poisoned before the claim
    in_time = schedule("in-time", now, alice)  # the late one: finishes within its lease
    fenced = schedule("fenced", now, alice, max_attempts=1)  # finishes after its lease
    expired = schedule("expired", now, alice, max_attempts=1)  # never finishes
    # Names no field of an answer has ("late" is one since issue #26: the check below
    # reads keys too, where a calendar's name could be one).
    cal_early = ExclusionCalendar.objects.create(name="cal-early")
    cal_late = ExclusionCalendar.objects.create(name="cal-late")
    named.exclusion_calendars.add(cal_early)
    for row in (in_time, fenced, expired):
        row.exclusion_calendars.add(cal_late)
    poison(cal_early, early, today)
    early_ok = evaluable(cal_early.pk)

    claims = {
        c.schedule_id: c for c in state.claim_due(worker="cols", now=now, lease_seconds=LEASE)
    }

    assert {innocent.pk, in_time.pk, fenced.pk, expired.pk} <= set(claims)
    row = Schedule.objects.get(pk=named.pk)
    if early_ok:  # claimed, or its due slot fell on an excluded date (passed over)
        assert row.status == "active" and not row.degraded_reason
        assert named.pk in claims or (row.next_run_at and row.next_run_at > now)
    else:
        assert row.status == "paused"
        assert row.degraded_reason.startswith("cannot evaluate the schedule: exclusion_calendars:")
        [claimed] = RunAttempt.objects.filter(schedule=row)
        assert RunReceipt.objects.get(attempt=claimed).status == "degraded"

    poison(cal_late, late, today)
    late_ok = evaluable(cal_late.pk)
    soon = now + timedelta(seconds=LEASE - 10)  # within the leases, past the next slots
    later = now + timedelta(hours=2)  # past every lease
    on_time = [state.Outcome(c, "succeeded") for pk, c in claims.items() if pk != fenced.pk]
    on_time = [o for o in on_time if o.claim.schedule_id != expired.pk]
    report = state.complete(on_time, now=soon)
    assert not report.dropped and not report.fenced
    report = state.complete([state.Outcome(claims[fenced.pk], "succeeded")], now=later)
    assert not report.dropped and len(report.fenced) == 1
    assert state.expire_leases(now=later) == 1
    state.next_wakeup()
    again = state.claim_due(worker="cols", now=later, lease_seconds=LEASE)
    assert innocent.pk in {c.schedule_id for c in again}  # the innocent always runs
    state.complete([state.Outcome(c, "succeeded") for c in again], now=later + timedelta(seconds=1))

    receipts = dict(RunReceipt.objects.values_list("attempt_id", "status"))
    assert receipts[claims[innocent.pk].attempt_id] == "succeeded"
    assert receipts[claims[in_time.pk].attempt_id] == "succeeded"
    assert receipts[claims[fenced.pk].attempt_id] == "lease_expired"
    assert receipts[claims[expired.pk].attempt_id] == "lease_expired"
    assert not RunAttempt.objects.filter(receipt__isnull=True)
    for pk in (in_time.pk, fenced.pk, expired.pk):
        row = Schedule.objects.get(pk=pk)
        assert row.lease_token is None
        if late_ok:
            assert row.status == "active" and not row.degraded_reason, row.degraded_reason
        else:
            assert row.status == "paused", (row.name, row.status)
            assert row.degraded_reason.startswith(
                "cannot evaluate the schedule: exclusion_calendars:"
            )
    degraded = set(Schedule.objects.exclude(degraded_reason="").values_list("pk", flat=True))
    assert degraded == ({named.pk} if not early_ok else set()) | (
        {in_time.pk, fenced.pk, expired.pk} if not late_ok else set()
    )
    assert innocent.pk not in degraded
    assert health.snapshot(now=later).degraded == len(degraded)

    said = texts(clients["alice"].get("/api/receipts/").json())
    assert not [n for n in hidden_names(cal_early, cal_late) for t in said if n in t], said
    readers(
        [innocent, named, in_time, fenced, expired],
        clients,
        admin,
        later,
        hidden_names(cal_early, cal_late),
    )


def hidden_names(*calendars: ExclusionCalendar) -> list[str]:
    """The names of ``calendars`` an owner-scoped user may not see: not shared, or gone
    (the name it had when it was created, or written behind save())."""
    found = dict(
        ExclusionCalendar.objects.filter(pk__in=[c.pk for c in calendars]).values_list(
            "pk", "shared"
        )
    )
    names = []
    for cal in calendars:
        if not found.get(cal.pk):
            names += [n for n in (cal.name, *[f"{p}-{cal.pk}" for p in NAMES]) if n]
    return names
