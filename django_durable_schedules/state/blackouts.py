"""Blackout windows through the state package (issue #27): the windows a schedule names,
resolved from what a caller gives; a window saved or deleted (:func:`save_window`,
:func:`delete_window`), with a ``blackouts`` event on the schedules that name it. What a window means at a claim is
:mod:`.blackout_rules`; the claim reads the windows of every batch, so a change to a
window or to a schedule's list applies at the next claim, without a re-plan here."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from ..db.clock import resolve_now
from ..models import BlackoutWindow, EventAction, Schedule
from .events import record_event

FIELD = "blackout_windows"


def resolve_windows(values: Iterable[Any], using: str = "default") -> list[BlackoutWindow]:
    """The windows named by ``values`` (names, primary keys or window instances), in name
    order. Raises ``ValidationError`` (``blackout_windows``) for a name no window has."""
    values = list(values)
    objs = [v for v in values if isinstance(v, BlackoutWindow)]
    names = [v for v in values if isinstance(v, str)]
    pks = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    found = list(BlackoutWindow.objects.using(using).filter(name__in=names)) if names else []
    found += list(BlackoutWindow.objects.using(using).filter(pk__in=pks)) if pks else []
    missing = sorted(set(names) - {w.name for w in found})
    missing += sorted(str(pk) for pk in set(pks) - {w.pk for w in found})
    if missing:
        listed = ", ".join(repr(m) for m in missing)
        raise ValidationError({FIELD: [f"No blackout window named {listed}."]})
    if len(objs) + len(names) + len(pks) != len(values):
        raise ValidationError({FIELD: ["Give blackout windows by name."]})
    return sorted({w.pk: w for w in [*objs, *found]}.values(), key=lambda w: w.name)


def save_window(
    window: BlackoutWindow, *, actor: Any = None, source: str = "code", using: str = "default"
) -> BlackoutWindow:
    """Validate (``full_clean``: field messages) and save ``window`` in one transaction,
    with a ``blackouts`` event on each schedule that names it (``{"window": name,
    "saved": true}``). It applies at the next claim: nothing is re-planned. Raises
    ``ValidationError``."""
    window.full_clean()
    with transaction.atomic(using=using):
        window.save(using=using)
        _record(window, {"window": window.name, "saved": True}, actor, source, using)
    return window


def delete_window(
    window: BlackoutWindow, *, actor: Any = None, source: str = "code", using: str = "default"
) -> None:
    """Delete ``window`` (its links to schedules with it), with a ``blackouts`` event on
    each schedule that named it (``{"window": name, "deleted": true}``)."""
    with transaction.atomic(using=using):
        _record(window, {"window": window.name, "deleted": True}, actor, source, using)
        window.delete(using=using)


def _record(
    window: BlackoutWindow, changes: dict[str, Any], actor: Any, source: str, using: str
) -> None:
    if window.pk is None:
        return
    now = resolve_now(None, using)
    for row in Schedule.objects.using(using).filter(blackout_windows=window).only("id", "name"):
        record_event(
            row,
            EventAction.BLACKOUTS,
            now=now,
            actor=actor,
            source=source,
            changes=changes,
            using=using,
        )
