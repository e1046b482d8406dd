"""The notifications' outbox (:class:`~..models.NotificationDelivery`): deliveries are
inserted with the event they announce (:func:`enqueue_deliveries`, called by
:func:`.events.record_event` inside its transaction), then claimed with a lease
(:func:`claim_deliveries`), and marked delivered or failed (:func:`finish_delivery`) by a
worker's delivery threads; a claim not sent is handed back (:func:`release_deliveries`).
The database clock decides what is due and when a lease has expired.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import connections, transaction
from django.db.models import DateTimeField, F
from django.db.models.expressions import RawSQL

from .. import timing
from ..conf import app_settings
from ..db.clock import CLOCK_SQL, db_now
from ..db.locks import lock_for_write, locked
from ..models import DeliveryStatus, NotificationDelivery, ScheduleEvent
from ..models.notifications import LAST_ERROR_MAX_CHARS
from ..notify.base import Notification, bounded_detail
from ..notify.config import notifiers_for

#: Called (with no argument) after a transaction that inserted deliveries commits, to wake
#: the delivery threads of this process (:mod:`..worker.deliveries` adds to it).
#: Seconds a claim's lease adds for the writes around its sends.
LEASE_MARGIN_SECONDS = 5.0
ON_ENQUEUED: list[Callable[[], None]] = []


@dataclass(frozen=True)
class ClaimedDelivery:
    """A delivery this worker holds until ``lease_until`` (``token``: its fence), and the
    notification to send."""

    id: int
    token: str
    tries: int
    notification: Notification


def enqueue_deliveries(event: ScheduleEvent, using: str = "default") -> int:
    """Insert one pending delivery of ``event`` per valid notifier whose ``EVENTS`` names
    its action (call inside the event's transaction: they commit together). A second
    delivery of one event to one notifier is refused by the unique constraint and skipped.
    Returns how many notifiers it was queued for (0 without ``NOTIFIERS``: no query)."""
    names = notifiers_for(event.action)
    if not names:
        return 0
    NotificationDelivery.objects.using(using).bulk_create(
        [
            NotificationDelivery(
                event_id=event.pk,
                notifier=name,
                schedule_name=event.schedule_name,
                action=event.action,
                occurrence=event.occurrence,
                next_try_at=event.at,
                created_at=event.at,
            )
            for name in names
        ],
        ignore_conflicts=True,
    )
    for wake in list(ON_ENQUEUED):
        transaction.on_commit(wake, using=using)
    return len(names)


def claim_deliveries(
    notifier: str, worker: str, *, limit: int, lease_seconds: float, using: str = "default"
) -> list[ClaimedDelivery]:
    """Claim up to ``limit`` due deliveries of ``notifier`` (oldest next try first), held
    for ``lease_seconds`` each (the lease: the claimed count times ``lease_seconds``, plus
    :data:`LEASE_MARGIN_SECONDS`): ``SELECT ... FOR UPDATE SKIP LOCKED`` where the database has it,
    under the database write lock on SQLite. Each claim gets a fresh fence token (in
    ``leased_by``, with ``worker``). A delivery whose event was pruned is sent with an
    empty ``detail``. An idle look (nothing due) is one read, no lock and no write."""
    if not any_due(notifier, using):
        return []
    with transaction.atomic(using=using):
        lock_for_write(using)
        now = db_now(using)
        qs = (
            NotificationDelivery.objects.using(using)
            .due(now)
            .filter(notifier=notifier)
            .order_by("next_try_at", "id")
        )
        rows = list(locked(qs, using, skip_locked=True)[: max(1, int(limit))])
        if not rows:
            return []
        token = f"{worker[:200]}:{uuid.uuid4().hex}"
        NotificationDelivery.objects.using(using).filter(pk__in=[r.pk for r in rows]).update(
            lease_until=now + timedelta(seconds=len(rows) * lease_seconds + LEASE_MARGIN_SECONDS),
            leased_by=token,
        )
        events = ScheduleEvent.objects.using(using).in_bulk([r.event_id for r in rows])
    return [
        ClaimedDelivery(r.pk, token, r.tries, notification_of(r, events.get(r.event_id)))
        for r in rows
    ]


def any_due(notifier: str, using: str = "default") -> bool:
    """Whether a delivery of ``notifier`` is due by the database clock (one read)."""
    conn = connections[using]
    now: Any = (
        RawSQL(CLOCK_SQL[conn.vendor], (), output_field=DateTimeField())
        if conn.vendor in CLOCK_SQL
        else db_now(using)
    )
    return NotificationDelivery.objects.using(using).filter(notifier=notifier).due(now).exists()


def notification_of(row: NotificationDelivery, event: ScheduleEvent | None) -> Notification:
    """The notification of delivery ``row`` (its event's ``at`` and ``changes`` when the
    event is still there)."""
    at = event.at if event is not None else row.created_at
    return Notification(
        event=row.action,
        schedule=row.schedule_name,
        occurrence=row.occurrence,
        at=at.isoformat().replace("+00:00", "Z"),
        detail=bounded_detail(event.changes if event is not None else {}),
        event_id=str(row.event_id),
        delivery_id=str(row.pk),
    )


def retry_delay(tries: int) -> float:
    """Seconds before the next send after ``tries`` failed sends (1 = the first failure):
    ``NOTIFY_BACKOFF_BASE_SECONDS`` doubling, at most ``NOTIFY_BACKOFF_CAP_SECONDS``."""
    return timing.backoff_seconds(
        max(1, tries),
        app_settings.NOTIFY_BACKOFF_BASE_SECONDS,
        app_settings.NOTIFY_BACKOFF_CAP_SECONDS,
    )


def storable_error(error: object) -> str:
    """``error`` as ``last_error`` can hold it on every database: text without NUL or lone
    surrogates, at most ``LAST_ERROR_MAX_CHARS`` characters (never raises)."""
    try:
        text = error if isinstance(error, str) else str(error)
    except Exception:  # noqa: BLE001 - a value whose str() raises
        text = "an error that cannot be shown"
    text = text.encode("utf-8", "replace").decode("utf-8").replace("\x00", "")
    return text[:LAST_ERROR_MAX_CHARS] or "failed"


def finish_delivery(
    claim: ClaimedDelivery, error: str | None = None, *, using: str = "default"
) -> str | None:
    """Record the send of ``claim``: delivered when ``error`` is None, else failed (tries
    + 1, next try after :func:`retry_delay`, ``abandoned`` after ``NOTIFY_MAX_TRIES``
    tries). Written only while the claim's token still holds the delivery (fencing).
    Returns the delivery's new status, or None when the lease was lost."""
    tries = claim.tries + 1
    with transaction.atomic(using=using):
        lock_for_write(using)
        now = db_now(using)
        qs = NotificationDelivery.objects.using(using).filter(
            pk=claim.id, leased_by=claim.token, status=DeliveryStatus.PENDING
        )
        delivery_changes: dict[str, Any] = {"tries": F("tries") + 1, "lease_until": None}
        if error is None:
            status = DeliveryStatus.DELIVERED
            delivery_changes.update(status=status, delivered_at=now, last_error="")
        else:
            status = (
                DeliveryStatus.ABANDONED
                if tries >= app_settings.NOTIFY_MAX_TRIES
                else DeliveryStatus.PENDING
            )
            delivery_changes.update(
                status=status,
                last_error=storable_error(error),
                next_try_at=now + timedelta(seconds=retry_delay(tries)),
            )
        updated = qs.update(**delivery_changes)
    return str(status) if updated else None


def release_deliveries(claims: Sequence[ClaimedDelivery], using: str = "default") -> int:
    """Hand back ``claims`` not sent (their lease cleared, tries unchanged) so that they
    are due again at once. Returns how many were still held."""
    if not claims:
        return 0
    with transaction.atomic(using=using):
        lock_for_write(using)
        held = 0
        for token in {c.token for c in claims}:
            held += (
                NotificationDelivery.objects.using(using)
                .filter(
                    pk__in=[c.id for c in claims if c.token == token],
                    leased_by=token,
                    status=DeliveryStatus.PENDING,
                )
                .update(lease_until=None, leased_by="")
            )
    return held
