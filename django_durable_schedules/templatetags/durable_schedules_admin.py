"""The admin's HTML fragments as template tags: ``{% load durable_schedules_admin %}``.

The fragments are templates, ``templates/durable_schedules/admin/fragments/<name>.html``;
the admin's columns render them through :mod:`..admin.display` (their context built there,
:func:`~..admin.display.render_fragment`), and these tags render the same helpers inside a
template, so that fragments compose (the schedule list's columns are made of them):

* ``{% dds_outcome_label status [label] %}``: an outcome, a coloured dot and its name
  (``outcome_label.html``; :func:`~..admin.display.outcome_label`);
* ``{% dds_status_badges schedule %}``: a schedule's status badge, plus "running" and
  "degraded" (``status_badges.html``; :func:`~..admin.display.status_badges`);
* ``{% dds_cadence schedule %}``: the cadence (``every 5 minutes``; for cron the expression
  and, below it, its words: ``cadence.html``; :func:`~..admin.display.cadence`);
* ``{% dds_when instant zone_name %}``: an instant in the zone and, below it, in UTC, as of
  now (``when.html``; a dash for none; :func:`~..admin.display.when`);
* ``{{ name|dds_breakable }}``: a schedule's name, escaped, that wraps only after a
  separator (``.``, ``-``, ``_``, ``:``), never inside a word.

Each renders trimmed, as the columns do (no stray whitespace inside the inline HTML), and
none queries the database: what they show is on the objects passed to them.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING

from django import template
from django.utils import timezone as dj_timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

if TYPE_CHECKING:
    from ..models import Schedule

register = template.Library()

# ``..admin.display`` is imported when a tag renders, not with this library: Django's
# template engine imports every installed app's tag libraries when it starts, and importing
# the admin package registers the model admins (which needs django.contrib.admin installed).


#: The characters a schedule's name may wrap after (its words' separators: NAME_RE).
NAME_SEPARATORS = re.compile(r"([._:-])")


@register.filter
def dds_breakable(name: object) -> SafeString:
    """``name`` escaped, with a line-break opportunity (``<wbr>``) after each separator:
    a narrow column wraps a long name between its words, never inside one."""
    return mark_safe(NAME_SEPARATORS.sub(r"\1<wbr>", escape(str(name))))


@register.simple_tag
def dds_outcome_label(status: str, label: str | None = None) -> SafeString:
    from ..admin.display import outcome_label

    return outcome_label(status, label)


@register.simple_tag
def dds_status_badges(schedule: Schedule) -> SafeString:
    from ..admin.display import status_badges

    return status_badges(schedule)


@register.simple_tag
def dds_cadence(schedule: Schedule) -> SafeString | str:
    from ..admin.display import cadence

    return cadence(schedule)


@register.simple_tag
def dds_when(value: datetime | None, zone_name: str | None) -> SafeString:
    from ..admin.display import when

    return when(value, zone_name, now=dj_timezone.now())
