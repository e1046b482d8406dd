"""Django admin: schedules, their read-only attempts and receipts, worker heartbeats, health.

Thin by design. Every transition (enable, disable, cancel, trigger, delete) calls
:mod:`.state`; every definition write (add, edit) calls :mod:`.state`; the health page
renders :func:`.health.snapshot`. The admin only chooses what to show:

* the schedule list shows the cadence in words, the status, the next run in the schedule's
  zone and in UTC, the last outcome, consecutive failures and a strip of the last
  :data:`STRIP_LENGTH` outcomes (fetched for the whole page in one query);
* the change page shows the next :data:`UPCOMING_COUNT` fire times and read-only inlines of
  the latest attempts and receipts, with buttons for the transitions;
* ``<admin>/durable_schedules/schedule/health/`` is the health page.

The colours live in ``static/durable_schedules/admin.css`` (no inline styles or scripts, so
a strict Content-Security-Policy is fine).

Importing this package registers the model admins with ``admin.site`` (Django's admin
autodiscovery imports it). Its modules:

* :mod:`.display`: formatting helpers (instants, outcomes and their strip, status badges,
  cadence, message lists);
* :mod:`.actions`: the transitions table, the list actions and the bulk delete;
* :mod:`.forms`: :class:`ScheduleForm` and the fields of the schedule's fieldsets;
* :mod:`.filters`: the schedule list's degraded / failing / running filters;
* :mod:`.changelist`: the schedule list's ChangeList (the strip's receipts in one query);
* :mod:`.inlines`: the read-only attempt and receipt inlines of the change page;
* :mod:`.columns`: the schedule list's columns and the change page's computed fields
  (functions of the schedule);
* :mod:`.views`: the health page, the change page's transition buttons and the form's live
  descriptions (functions of the model admin and the request);
* :mod:`.calendars`: :class:`ExclusionCalendarAdmin` (registered, with its dates inline);
* :mod:`.blackouts`: :class:`BlackoutWindowAdmin` (registered);
* :mod:`.groups`: :class:`ConcurrencyGroupAdmin` (registered): limits, live leases now,
  whether at the limit;
* :mod:`.schedules`: :class:`ScheduleAdmin` (registered for Schedule; its URLs route the
  views);
* :mod:`.runs`: the read-only :class:`RunAttemptAdmin`, :class:`RunReceiptAdmin` and
  :class:`WorkerHeartbeatAdmin` (registered);
* :mod:`.notifications`: the read-only delivery log of alert notifications
  (:class:`NotificationDeliveryAdmin`, registered);
* :mod:`.backfills`: the backfill list actions and the read-only :class:`BackfillAdmin`
  (registered).
"""

from __future__ import annotations

from .blackouts import BlackoutWindowAdmin
from .calendars import ExclusionCalendarAdmin
from .groups import ConcurrencyGroupAdmin

# Schedule first: the models are registered in this order.
from .schedules import ScheduleAdmin

# isort: split
from .display import outcome_strip
from .forms import ScheduleForm
from .notifications import NotificationDeliveryAdmin
from .runs import RunAttemptAdmin, RunReceiptAdmin, WorkerHeartbeatAdmin

__all__ = [
    "BlackoutWindowAdmin",
    "ConcurrencyGroupAdmin",
    "ExclusionCalendarAdmin",
    "NotificationDeliveryAdmin",
    "RunAttemptAdmin",
    "RunReceiptAdmin",
    "ScheduleAdmin",
    "ScheduleForm",
    "WorkerHeartbeatAdmin",
    "outcome_strip",
]
