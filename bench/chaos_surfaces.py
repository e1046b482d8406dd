"""The chaos soak's newer surfaces (issue 24): exclusion calendars and backfills in the
load, their poisons in the ``--poison`` mix, and their part of the audit.

Load (always):

* calendar ``chaos-cal-elsewhere`` excludes yesterday and the day after tomorrow (UTC):
  the ``chaos-cal-*`` schedules linking it run as usual, so every claim of theirs goes
  through the calendar path (flag, exclusions loaded, slot checked);
* calendar ``chaos-cal-now`` excludes today and tomorrow (UTC): ``chaos-excluded-*``
  schedules linking it must never run a slot of an excluded date;
* ``chaos-bf-*`` schedules (every 60 s, cron ``* * * * *``) get a backfill of the last
  30 minutes when the soak starts: the workers run its slots one at a time, beside the
  live grid, through kills, stalls and the restart.

Poisons (``--poison``): written behind ``save()`` one after another with the core ones:

* ``bf_slot_overflow``: a backfill's stored slots become an instant that overflows in
  UTC (``0001-01-01T00:00:00+23:59``);
* ``bf_occurrence_clash``: a backfill's current ``occurrence`` is set to one its schedule
  already ran (``occurrence=1, attempt=0``: the database refuses the attempt);
* ``calendar_year_10000``: an exclusion date beyond what the database's date type holds
  well (9999-12-31 and a far holiday code are fine; the year-10000 date is written by raw
  SQL where the database takes it, else recorded as refused);
* ``lease_minus_infinity`` (PostgreSQL): ``lease_expires_at = '-infinity'`` with a lease
  token and no attempt;
* ``lease_garbage`` / ``occurrence_text`` (SQLite): a ``lease_expires_at`` that is not a
  date, an ``occurrence`` that is not a number.

What the audit holds (violations, any non-zero count fails the soak):

* ``excluded_slot_ran``: an attempt of a ``chaos-excluded-*`` schedule for a slot on an
  excluded date (a ``trigger`` would be allowed; the soak triggers none);
* ``backfill_stalled``: an innocent backfill that ran no slot at all;
* ``backfill_poison_not_contained``: a poisoned backfill still open at the end that ran
  no slot after its poison (a slot in flight then moves it on and overwrites the poison),
  its schedule not paused with a reason;
* ``surface_victim_stalled``: a poisoned schedule row (lease, occurrence, calendar) whose
  worker pass did not go on: not paused with a reason and no attempt after the poison.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter, defaultdict
from datetime import UTC, date, timedelta
from typing import Any

CALENDAR_ELSEWHERE = "chaos-cal-elsewhere"
CALENDAR_NOW = "chaos-cal-now"

#: (name, the database vendors it applies to or None for all, what is expected).
SURFACE_POISONS: tuple[tuple[str, tuple[str, ...] | None], ...] = (
    ("bf_slot_overflow", None),
    ("bf_occurrence_clash", None),
    ("calendar_year_10000", None),
    ("lease_minus_infinity", ("postgresql",)),
    ("lease_garbage", ("sqlite",)),
    ("occurrence_text", ("sqlite",)),
)


def poisons_for(vendor: str) -> list[str]:
    """The surface poisons the soak writes on ``vendor``, in order."""
    return [name for name, vendors in SURFACE_POISONS if vendors is None or vendor in vendors]


def create_surfaces(common: dict[str, Any], rng: random.Random, poison: bool) -> None:
    """The calendars, the calendar schedules and the backfilled schedules of the load
    (see the module docstring), and with ``poison`` the victims of the surface poisons;
    requests the backfills at once."""
    from django_durable_schedules import state
    from django_durable_schedules.models import ExclusionCalendar, Schedule

    now = state.db_now().replace(microsecond=0)
    today = now.astimezone(UTC).date()
    day = timedelta(days=1)
    state.save_calendar(
        ExclusionCalendar(name=CALENDAR_ELSEWHERE),
        dates=[(today - day, "chaos: yesterday"), (today + 2 * day, "chaos: later")],
    )
    state.save_calendar(
        ExclusionCalendar(name=CALENDAR_NOW),
        dates=[(today, "chaos: today"), (today + day, "chaos: tomorrow")],
    )
    for i in range(3):
        shape = (
            {"kind": "cron", "cron": "* * * * *"}
            if i == 2
            else {
                "kind": "interval",
                "interval_seconds": rng.choice((1, 2)),
            }
        )
        row = state.create_schedule(name=f"chaos-cal-{i:02}", **shape, **common)
        state.set_schedule_calendars(row.pk, [CALENDAR_ELSEWHERE])
    for i in range(2):
        row = state.create_schedule(
            name=f"chaos-excluded-{i:02}", kind="interval", interval_seconds=2, **common
        )
        state.set_schedule_calendars(row.pk, [CALENDAR_NOW])
    names = [f"chaos-bf-{i:02}" for i in range(3)]
    if poison:
        names += [f"chaos-bfvictim-{name}" for name in ("bf_slot_overflow", "bf_occurrence_clash")]
    for i, name in enumerate(names):
        if i % 3 == 2:
            state.create_schedule(name=name, kind="cron", cron="* * * * *", **common)
        else:
            state.create_schedule(
                name=name,
                kind="interval",
                interval_seconds=60,
                start_at=now - timedelta(hours=16),
                **common,
            )
        # A victim's backfill must still be open when its poison is written (up to 80 % of
        # the soak, and backfills get a share of every batch): 900 slots, not 29.
        minutes = 901 if name.startswith("chaos-bfvictim-") else 30
        state.request_backfill(
            Schedule.objects.values_list("pk", flat=True).get(name=name),
            now - timedelta(minutes=minutes),
            now - timedelta(minutes=1),
        )
    if poison:
        for name in (
            "calendar_year_10000",
            "lease_minus_infinity",
            "lease_garbage",
            "occurrence_text",
        ):
            row = state.create_schedule(
                name=f"chaos-svictim-{name}", kind="interval", interval_seconds=2, **common
            )
            if name == "calendar_year_10000":
                cal = ExclusionCalendar(name="chaos-cal-victim")
                state.save_calendar(cal, dates=[(date(9999, 12, 31), "chaos: far")])
                state.set_schedule_calendars(row.pk, ["chaos-cal-victim"])


def write_surface_poison(name: str, vendor: str) -> dict[str, Any]:
    """Write the surface poison ``name`` behind ``save()``; returns the soak's entry (the
    caller catches the database being away)."""
    from django.db import connection, transaction

    from django_durable_schedules import state
    from django_durable_schedules.models import (
        Backfill,
        ExclusionCalendar,
        ExclusionDate,
        Schedule,
    )

    at = state.db_now().replace(microsecond=0)
    entry: dict[str, Any] = {"surface": name, "field": name, "via": "update", "at": at}
    qn = connection.ops.quote_name
    table = qn(Schedule._meta.db_table)
    pk_col = qn(Schedule._meta.pk.column)
    with transaction.atomic():
        if name.startswith("bf_"):
            victim = f"chaos-bfvictim-{name}"
            entry["victim"] = victim
            backfill = Backfill.objects.open().filter(schedule__name=victim).first()
            if backfill is None:  # finished already: nothing left to poison
                entry["result"] = "refused: its backfill is no longer open"
                return entry
            entry["backfill"] = str(backfill.pk)
            if name == "bf_slot_overflow":
                Backfill.objects.filter(pk=backfill.pk).update(
                    slots=["0001-01-01T00:00:00+23:59"] * max(2, len(backfill.slots))
                )
            else:
                Backfill.objects.filter(pk=backfill.pk).update(occurrence=1, attempt=0)
        else:
            victim = f"chaos-svictim-{name}"
            entry["victim"] = victim
            row = Schedule.objects.get(name=victim)
            pk = Schedule._meta.pk.get_db_prep_value(row.pk, connection)
            with connection.cursor() as cursor:
                if name == "calendar_year_10000":
                    entry["via"] = "sql"
                    cal = ExclusionCalendar.objects.get(name="chaos-cal-victim")
                    dates = qn(ExclusionDate._meta.db_table)
                    # MariaDB's DATE ends at 9999-12-31: the last day it holds.
                    value = "9999-12-31" if vendor == "mysql" else "10000-01-01"
                    cursor.execute(
                        f"UPDATE {dates} SET {qn('date')} = %s WHERE {qn('calendar_id')} = %s",
                        [value, cal.pk],
                    )
                    entry["value"] = value
                elif name == "lease_minus_infinity":
                    entry["via"] = "sql"
                    cursor.execute(
                        f"UPDATE {table} SET {qn('lease_expires_at')} = '-infinity', "
                        f"{qn('lease_token')} = %s WHERE {pk_col} = %s",
                        [str(uuid.uuid4()), pk],
                    )
                    entry["value"] = "-infinity"
                elif name == "lease_garbage":
                    entry["via"] = "sql"
                    cursor.execute(
                        f"UPDATE {table} SET {qn('lease_expires_at')} = 'not a date', "
                        f"{qn('lease_token')} = %s WHERE {pk_col} = %s",
                        [uuid.uuid4().hex, pk],
                    )
                    entry["value"] = "not a date"
                elif name == "occurrence_text":
                    entry["via"] = "sql"
                    cursor.execute(
                        f"UPDATE {table} SET {qn('occurrence')} = 'abc' WHERE {pk_col} = %s",
                        [pk],
                    )
                    entry["value"] = "abc"
            Schedule.objects.filter(pk=row.pk, status="active").update(next_run_at=at)
    entry["result"] = "written"
    return entry


def unrun_backfills(poisoned: list[dict[str, Any]]) -> list[str]:
    """The innocent backfills (none the soak poisoned) that ran no slot at all
    (``backfill_stalled``), as ``"NAME: no slot run (STATUS)"``."""
    from django_durable_schedules.models import Backfill, RunAttempt

    poisoned_backfills = {e.get("backfill") for e in poisoned if e.get("backfill")}
    ran = set(
        RunAttempt.objects.filter(origin="backfill").values_list("schedule_id", flat=True)
    )  # one read: the soak asks every second while it runs on
    return [
        f"{bf.schedule_name}: no slot run ({bf.status})"
        for bf in Backfill.objects.select_related("schedule")
        if str(bf.pk) not in poisoned_backfills and bf.schedule_id not in ran
    ]


def stalled_victims(
    poisoned: list[dict[str, Any]], rows: dict[str, Any] | None = None
) -> list[tuple[str, str]]:
    """The poisoned rows (lease, occurrence, calendar; a poisoned backfill's schedule) whose
    worker pass did not go on: ``(violation, example)`` pairs,
    ``backfill_poison_not_contained`` or ``surface_victim_stalled`` (the module docstring).
    ``rows``: the schedules by name, read when not given. Notes each entry's ``final``
    state."""
    from django_durable_schedules.models import Backfill, RunAttempt, Schedule

    if rows is None:
        rows = {s.name: s for s in Schedule.objects.all()}
    found: list[tuple[str, str]] = []
    for entry in poisoned:
        if entry.get("result") != "written" or "surface" not in entry:
            continue
        row = rows[entry["victim"]]
        contained = row.status == "paused" and bool(row.degraded_reason)
        entry["final"] = {"status": row.status, "degraded_reason": row.degraded_reason}
        if entry.get("backfill"):
            bf = Backfill.objects.get(pk=entry["backfill"])
            entry["final"]["backfill"] = bf.status
            # Open at the end is fine when it went on: a slot in flight when the poison
            # was written moves the backfill on and overwrites it (the other audits judge
            # those runs). Open and stuck is not.
            went_on = RunAttempt.objects.filter(
                schedule_id=row.pk, origin="backfill", claimed_at__gt=entry["at"]
            ).exists()
            if bf.status == "active" and not (contained or went_on):
                found.append(("backfill_poison_not_contained", f"{row.name}: backfill still open"))
            continue
        went_on = RunAttempt.objects.filter(schedule_id=row.pk, claimed_at__gt=entry["at"]).exists()
        if not (contained or went_on):
            found.append(
                ("surface_victim_stalled", f"{row.name} ({entry['surface']}): {row.status}")
            )
    return found


def audit_surfaces(poisoned: list[dict[str, Any]]) -> dict[str, Any]:
    """The surfaces' part of the audit (see the module docstring): violations, examples,
    and totals (backfill slots run, excluded slots counted)."""
    from django_durable_schedules.models import (
        Backfill,
        ExclusionDate,
        RunAttempt,
        RunReceipt,
        Schedule,
    )

    counts: Counter[str] = Counter()
    examples: dict[str, list[Any]] = defaultdict(list)

    def violation(name: str, example: Any) -> None:
        counts[name] += 1
        if len(examples[name]) < 5:
            examples[name].append(example)

    excluded_days = set(
        ExclusionDate.objects.filter(calendar__name=CALENDAR_NOW).values_list("date", flat=True)
    )
    for name, slot, origin in RunAttempt.objects.filter(
        schedule__name__startswith="chaos-excluded-"
    ).values_list("schedule__name", "scheduled_for", "origin"):
        if origin != "trigger" and slot.astimezone(UTC).date() in excluded_days:
            violation("excluded_slot_ran", f"{name} {slot.isoformat()}")

    run_slots = RunAttempt.objects.filter(
        schedule_id__in=Backfill.objects.values("schedule_id"), origin="backfill"
    ).count()
    for example in unrun_backfills(poisoned):
        violation("backfill_stalled", example)

    rows = {s.name: s for s in Schedule.objects.all()}
    for example in stalled_victims(poisoned, rows):
        violation(*example)
    excluded = sum(s.excluded_count for s in rows.values() if s.name.startswith("chaos-"))
    return {
        "violations": dict(counts),
        "examples": dict(examples),
        "totals": {
            "backfills": Backfill.objects.count(),
            "backfill_slots_run": run_slots,
            "backfill_receipts": RunReceipt.objects.filter(attempt__origin="backfill").count(),
            "excluded_count": excluded,
        },
    }


VIOLATIONS = (
    "excluded_slot_ran",
    "backfill_stalled",
    "backfill_poison_not_contained",
    "surface_victim_stalled",
)
