"""A schedule's blackout windows added or removed by name (issue #27: ``manage.py schedules
blackouts link|unlink``): :func:`change_windows` reads the list a schedule names and
writes the new one under the row's lock, through :func:`.definitions.update_schedule`,
the edit path of the admin and the API (an ``edited`` event with ``blackout_windows:
[before, after]``). The claim reads a schedule's windows at every batch: nothing is
re-planned."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction

from ..db.locks import get_locked
from ..models import Schedule
from .blackouts import resolve_windows
from .definitions import update_schedule
from .transitions import implements


@implements("control.edit")
def change_windows(
    schedule_id: Any,
    *,
    add: Iterable[str] = (),
    remove: Iterable[str] = (),
    actor: Any = None,
    source: str = "code",
    using: str = "default",
) -> Schedule:
    """Add the windows named ``add`` to the blackout windows of the schedule
    ``schedule_id`` and remove those named ``remove`` (a name in both is removed), in one
    transaction that holds the row's lock from the read to the write, so that two
    concurrent changes both apply. The edit is :func:`.definitions.update_schedule`'s: an
    ``edited`` event (``actor``, ``source``) with ``{"blackout_windows": [names before,
    names after]}``. Adding a window already named, or removing one not named, changes
    nothing; a list left unchanged writes nothing and records no event.

    Returns the row. Raises ``Schedule.DoesNotExist``, and ``ValidationError``
    (``blackout_windows``: a name, added or removed, that no window has; or the edit's
    own field messages)."""
    add, remove = list(add), list(remove)
    with transaction.atomic(using=using):
        row = get_locked(schedule_id, using)
        resolve_windows([*add, *remove], using)  # an unknown name is refused, either way
        before = sorted(w.name for w in row.blackout_windows.all())
        after = sorted((set(before) | set(add)) - set(remove))
        if after == before:
            return row
        return update_schedule(
            row.pk, blackout_windows=after, actor=actor, source=source, using=using
        )
