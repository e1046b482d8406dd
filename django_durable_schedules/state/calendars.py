"""Exclusion calendars: create, edit and delete calendars and their dates, choose a
schedule's calendars, and re-plan the schedules a change affects, each in one transaction.

A change takes effect at once, without a restart: the schedules that name a changed
calendar get their ``next_run_at`` re-planned in the same transaction (the first slot after
now that no calendar excludes), so ``next_run_at`` and ``upcoming()`` are right when it
commits. A change made behind these functions (``ExclusionDate.objects.create()``, raw
SQL) is caught by the claim instead, which re-checks the date of every due slot.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import date, datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from .. import timing
from ..db.clock import resolve_now
from ..db.locks import get_locked, lock_for_write, locked
from ..models import (
    NO_GRID,
    EventAction,
    ExclusionCalendar,
    ExclusionDate,
    Kind,
    Schedule,
    ScheduleEvent,
    Status,
    load_exclusions,
)
from ..models.calendars import exclusions_of_calendars
from .events import record_event, write_events
from .exclusion_rules import count_excluded_to_end
from .machine import complete_if_no_slot
from .transitions import implements

FIELD = "exclusion_calendars"


def resolve_calendars(values: Iterable[Any], using: str = "default") -> list[ExclusionCalendar]:
    """The calendars named by ``values`` (names, primary keys or calendar instances), in
    name order. Raises ``ValidationError`` (``exclusion_calendars``) for a name that no
    calendar has."""
    values = list(values)
    objs = [v for v in values if isinstance(v, ExclusionCalendar)]
    names = [v for v in values if isinstance(v, str)]
    pks = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    found = list(ExclusionCalendar.objects.using(using).filter(name__in=names)) if names else []
    found += list(ExclusionCalendar.objects.using(using).filter(pk__in=pks)) if pks else []
    missing = sorted(set(names) - {c.name for c in found})
    missing += sorted(str(pk) for pk in set(pks) - {c.pk for c in found})
    if missing:
        listed = ", ".join(repr(m) for m in missing)
        raise ValidationError({FIELD: [f"No exclusion calendar named {listed}."]})
    if len(objs) + len(names) + len(pks) != len(values):
        raise ValidationError({FIELD: ["Give calendars by name."]})
    return sorted({c.pk: c for c in [*objs, *found]}.values(), key=lambda c: c.name)


def attach_calendars(row: Schedule, calendars: Sequence[ExclusionCalendar]) -> None:
    """Give ``row`` (saved or not) the exclusions of ``calendars`` for its next plans and
    checks (``row.clean()`` then validates their holiday codes). Raises ``ValidationError``
    (``exclusion_calendars``) for calendars on a ``once`` schedule: a one-shot runs at
    ``run_at`` and is never completed without a run."""
    if calendars and row.kind == Kind.ONCE:
        raise ValidationError(
            {FIELD: ["A once schedule takes no exclusion calendars: choose its run_at instead."]}
        )
    if calendars and row.kind == Kind.MANUAL:
        raise ValidationError(
            {
                FIELD: [
                    "A manual schedule takes no exclusion calendars: it runs only when triggered."
                ]
            }
        )
    if calendars and row.kind == Kind.AFTER:
        raise ValidationError(
            {
                FIELD: [
                    "A schedule of kind 'after' takes no exclusion calendars: it runs the "
                    "instants its upstream schedules succeeded for (exclude dates on them)."
                ]
            }
        )
    row.__dict__["_dds_exclusions"] = exclusions_of_calendars(calendars)


def share_exclusions(row: Schedule, source: Schedule) -> None:
    """Give ``row`` the exclusions ``source`` has (attached, or read now): the locked row
    of an edit plans with the calendars its candidate was validated with."""
    row.__dict__["_dds_exclusions"] = source.exclusions()


@implements("control.calendars")
def replan(row: Schedule, now: datetime) -> bool:
    """Re-plan a locked, active ``row`` whose exclusions changed: when its next run is
    ahead of ``now`` and is a grid slot (no retry, trigger or buffered slot waiting), it
    becomes the first slot after ``now`` that is not excluded (completed when none is
    left). A row the engine cannot evaluate (an unknown holiday country, every slot
    excluded for 400 years) is made due now: the next claim receipts it ``degraded`` and
    pauses it with the reason. Returns whether ``next_run_at`` or ``status`` changed."""
    if (
        row.status != Status.ACTIVE
        or row.kind in (Kind.ONCE, *NO_GRID)
        or row.next_run_at is None
        or row.next_run_at <= now
        or row.retry_scheduled_for is not None
        or row.triggered_at is not None
        or row.buffered_for is not None
    ):
        return False
    before = row.next_run_at
    try:
        row.next_run_at = row.plan(timing.truncate_to_second(now))
    except Exception:  # noqa: BLE001 - that row's problem: the claim receipts it
        row.next_run_at = timing.truncate_to_second(now)
    complete_if_no_slot(row)
    return row.next_run_at != before or row.status != Status.ACTIVE


@implements("control.calendars")
def replan_schedules(schedule_ids: Iterable[Any], *, now: datetime, using: str) -> int:
    """Lock the schedules ``schedule_ids`` and :func:`replan` each with its current
    calendars (read in two queries); call inside a transaction. Returns how many moved."""
    ids = list(set(schedule_ids))
    if not ids:
        return 0
    qs = Schedule.objects.using(using).filter(pk__in=ids, status=Status.ACTIVE)
    rows = list(locked(qs, using, skip_locked=False))
    load_exclusions(rows, using)
    moved = 0
    for row in rows:
        if replan(row, now):
            row.save(using=using, update_fields=["next_run_at", "status"])
            record_excluded_to_end(row, now, using)
            moved += 1
    return moved


@implements("control.edit", "control.enable", "control.calendars")
def record_excluded_to_end(row: Schedule, now: datetime, using: str) -> int:
    """After a transition left the saved, locked ``row`` without a slot to run (a re-plan,
    an edit, an enable that completed it): count the excluded slots of the rest of its
    grid (:func:`.exclusion_rules.count_excluded_to_end`, the rule the claim and the
    completion use), write the count and its ``excluded`` events. Returns how many were
    counted (0, writing nothing, for a row with a slot left or no calendars)."""
    checked = row.exclusions_checked_at
    events: list[ScheduleEvent] = []
    counted = count_excluded_to_end(row, now, events)
    if row.exclusions_checked_at != checked:
        row.save(using=using, update_fields=["excluded_count", "exclusions_checked_at"])
        write_events(events, using)
    return counted


def _users(calendar_ids: Iterable[int], using: str) -> list[Any]:
    through = Schedule.exclusion_calendars.through
    return list(
        through.objects.using(using)
        .filter(exclusioncalendar_id__in=list(calendar_ids))
        .values_list("schedule_id", flat=True)
    )


@implements("control.calendars")
def set_schedule_calendars(
    schedule_id: Any,
    calendars: Iterable[Any],
    *,
    actor: Any = None,
    source: str = "code",
    now: datetime | None = None,
    using: str = "default",
) -> Schedule:
    """Make ``calendars`` (names, primary keys or instances) the exclusion calendars of
    the schedule ``schedule_id`` and re-plan it; records a ``calendars`` event with the
    names before and after. Raises ``Schedule.DoesNotExist`` and ``ValidationError``
    (``exclusion_calendars``: an unknown name, calendars on a ``once``, a holiday code the
    ``holidays`` package does not know)."""
    with transaction.atomic(using=using):
        row = get_locked(schedule_id, using)
        cals = resolve_calendars(calendars, using)
        before = [c.name for c in row.exclusion_calendars.all()]
        after = [c.name for c in cals]
        if before == after:
            return row
        attach_calendars(row, cals)
        try:
            row.spec().validate()
        except timing.InvalidSchedule as exc:
            raise ValidationError({exc.field: [exc.message]}) from None
        row.exclusion_calendars.set(cals)
        instant = resolve_now(now, using)
        if replan(row, instant):
            row.save(using=using, update_fields=["next_run_at", "status"])
            record_excluded_to_end(row, instant, using)
        record_event(
            row,
            EventAction.CALENDARS,
            now=instant,
            actor=actor,
            source=source,
            changes={FIELD: [before, after]},
            using=using,
        )
    return row


def _clean_calendar(cal: ExclusionCalendar) -> None:
    cal.full_clean()


@implements("control.calendars")
def save_calendar(
    calendar: ExclusionCalendar,
    *,
    dates: Iterable[tuple[date, str]] | None = None,
    now: datetime | None = None,
    using: str = "default",
) -> ExclusionCalendar:
    """Validate and save ``calendar`` (new or edited; ``full_clean`` checks the holiday
    codes), optionally replace its dates by ``dates`` (``(date, reason)`` pairs), and
    re-plan every schedule that names it. Raises ``ValidationError`` with field messages."""
    with transaction.atomic(using=using):
        lock_for_write(using)
        _clean_calendar(calendar)
        calendar.save(using=using)
        if dates is not None:
            ExclusionDate.objects.using(using).filter(calendar=calendar).delete()
            ExclusionDate.objects.using(using).bulk_create(
                [ExclusionDate(calendar=calendar, date=d, reason=r or "") for d, r in dates]
            )
        calendars_changed([calendar.pk], now=now, using=using)
    return calendar


@implements("control.calendars")
def calendars_changed(
    calendar_ids: Iterable[int], *, now: datetime | None = None, using: str = "default"
) -> int:
    """Re-plan the schedules that name any of ``calendar_ids`` after their dates or holiday
    codes changed (the admin calls it once its inlines are saved). Returns how many moved."""
    with transaction.atomic(using=using):
        instant = resolve_now(now, using)
        return replan_schedules(_users(calendar_ids, using), now=instant, using=using)


@implements("control.calendars")
def add_dates(
    calendar: Any,
    dates: Iterable[tuple[date, str]],
    *,
    now: datetime | None = None,
    using: str = "default",
) -> int:
    """Add ``(date, reason)`` pairs to the calendar ``calendar`` (a name or an instance;
    a date it has already gets the new reason) and re-plan its schedules. Returns how many
    dates were new. Raises ``ValidationError`` for an unknown calendar name."""
    with transaction.atomic(using=using):
        lock_for_write(using)
        [cal] = resolve_calendars([calendar], using)
        new = 0
        for day, reason in dates:
            _, created = ExclusionDate.objects.using(using).update_or_create(
                calendar=cal, date=day, defaults={"reason": reason or ""}
            )
            new += created
        calendars_changed([cal.pk], now=now, using=using)
    return new


@implements("control.calendars")
def remove_dates(
    calendar: Any,
    dates: Iterable[date],
    *,
    now: datetime | None = None,
    using: str = "default",
) -> int:
    """Remove ``dates`` from the calendar ``calendar`` (a name or an instance) and re-plan
    its schedules. Returns how many were removed."""
    with transaction.atomic(using=using):
        lock_for_write(using)
        [cal] = resolve_calendars([calendar], using)
        removed, _ = (
            ExclusionDate.objects.using(using).filter(calendar=cal, date__in=list(dates)).delete()
        )
        calendars_changed([cal.pk], now=now, using=using)
    return removed


@implements("control.calendars")
def delete_calendar(calendar: Any, *, now: datetime | None = None, using: str = "default") -> None:
    """Delete the calendar ``calendar`` (a name or an instance) with its dates; the
    schedules that named it are re-planned without it."""
    with transaction.atomic(using=using):
        lock_for_write(using)
        [cal] = resolve_calendars([calendar], using)
        users = _users([cal.pk], using)
        cal.delete(using=using)
        replan_schedules(users, now=resolve_now(now, using), using=using)
