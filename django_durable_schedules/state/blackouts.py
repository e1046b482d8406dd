"""Blackout windows through the state package (issue #27): the windows a schedule names,
resolved from what a caller gives. What a window means at a claim is
:mod:`.blackout_rules`; the claim reads the windows of every batch, so a change to a
window or to a schedule's list applies at the next claim, without a re-plan here."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError

from ..models import BlackoutWindow

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
