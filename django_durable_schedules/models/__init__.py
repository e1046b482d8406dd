"""Models: schedules, their append-only run attempts and receipts, the audit trail and
worker heartbeats.

Invariants live in ``Meta.constraints`` (the database enforces them); transitions live in
:mod:`django_durable_schedules.state`. Attempts, receipts and events are append-only:
triggers installed by the migrations refuse UPDATE and DELETE (see :mod:`.db.guards`).

* :mod:`.choices`: the enumerations and the field groups of a definition;
* :mod:`.queries`: ``ScheduleQuerySet``, the named predicates;
* :mod:`.schedule`: ``Schedule``;
* :mod:`.schedule_meta`: ``Schedule``'s indexes and database constraints;
* :mod:`.definition`: what a schedule's definition means in time (mixed into ``Schedule``);
* :mod:`.validation`: ``default_timezone``, the normalisation and validation of a
  definition (mixed into ``Schedule``);
* :mod:`.runs`: ``RunAttempt`` and ``RunReceipt``;
* :mod:`.events`: ``ScheduleEvent`` and ``WorkerHeartbeat``;
* :mod:`.notifications`: ``NotificationDelivery`` (the alert notifications' outbox);
* :mod:`.backfills`: ``Backfill``;
* :mod:`.calendars`: ``ExclusionCalendar`` and ``ExclusionDate``;
* :mod:`.blackouts`: ``BlackoutWindow``;
* :mod:`.chains`: ``ScheduleLink`` and ``ChainSlot`` (kind ``after``);
* :mod:`.parallel`: ``OccurrenceLease`` (``overlap_policy`` allow).
"""

from ..limits import METADATA_MAX_KEYS, METADATA_MAX_VALUE_CHARS
from .backfills import Backfill, BackfillQuerySet, backfills_open, with_backfill_flag
from .blackouts import (
    BlackoutWindow,
    BlackoutWindowQuerySet,
    load_blackouts,
    window_of,
    with_blackout_flag,
)
from .calendars import ExclusionCalendar, ExclusionDate, load_exclusions, with_calendar_flag
from .chains import (
    CHAIN_DECIDED,
    CHAIN_OPEN,
    ChainSlot,
    ChainSlotQuerySet,
    ChainSlotStatus,
    ScheduleLink,
    links_exist,
    with_links_flag,
)
from .choices import (
    DEFAULT_POOL,
    DEFINITION_FIELDS,
    EDITABLE_FIELDS,
    EDITABLE_ORDER,
    IDENTITY_FIELDS,
    INPUT_FIELDS,
    INSTANT_FIELDS,
    MANUAL_REFUSES,
    NO_GRID,
    POLICY_FIELDS,
    PRIORITY_MAX,
    PRIORITY_MIN,
    SUCCESS_STATUSES,
    TIMING_FIELDS,
    Alert,
    AttemptOrigin,
    BackfillStatus,
    BlackoutPolicy,
    DegradedKind,
    EventAction,
    ExclusionPolicy,
    Kind,
    MisfirePolicy,
    OverlapPolicy,
    ReceiptStatus,
    Status,
    name_validator,
    pool_validator,
)
from .events import ScheduleEvent, WorkerHeartbeat
from .groups import RATE_MAX_COUNT, ConcurrencyGroup, Rate, parse_rate
from .notifications import DeliveryStatus, NotificationDelivery, NotificationDeliveryQuerySet
from .parallel import OccurrenceLease, OccurrenceLeaseQuerySet
from .queries import ScheduleQuerySet
from .runs import RunAttempt, RunReceipt
from .schedule import Schedule
from .validation import default_timezone

#: The name migrations 0001, 0006 and 0008 give ``Schedule.timezone``'s default (the same
#: function, so the migration state never differs from the model).
_default_timezone = default_timezone

__all__ = [
    "CHAIN_DECIDED",
    "CHAIN_OPEN",
    "ChainSlot",
    "ChainSlotQuerySet",
    "ChainSlotStatus",
    "ScheduleLink",
    "links_exist",
    "with_links_flag",
    "load_blackouts",
    "window_of",
    "with_blackout_flag",
    "DEFAULT_POOL",
    "DEFINITION_FIELDS",
    "EDITABLE_FIELDS",
    "EDITABLE_ORDER",
    "IDENTITY_FIELDS",
    "INPUT_FIELDS",
    "INSTANT_FIELDS",
    "MANUAL_REFUSES",
    "NO_GRID",
    "POLICY_FIELDS",
    "PRIORITY_MAX",
    "PRIORITY_MIN",
    "METADATA_MAX_KEYS",
    "METADATA_MAX_VALUE_CHARS",
    "SUCCESS_STATUSES",
    "TIMING_FIELDS",
    "AttemptOrigin",
    "Backfill",
    "BackfillQuerySet",
    "BackfillStatus",
    "BlackoutPolicy",
    "ExclusionPolicy",
    "BlackoutWindow",
    "BlackoutWindowQuerySet",
    "ConcurrencyGroup",
    "RATE_MAX_COUNT",
    "Rate",
    "parse_rate",
    "DegradedKind",
    "DeliveryStatus",
    "Alert",
    "EventAction",
    "ExclusionCalendar",
    "ExclusionDate",
    "Kind",
    "MisfirePolicy",
    "NotificationDelivery",
    "NotificationDeliveryQuerySet",
    "OverlapPolicy",
    "OccurrenceLease",
    "OccurrenceLeaseQuerySet",
    "ReceiptStatus",
    "RunAttempt",
    "RunReceipt",
    "Schedule",
    "ScheduleEvent",
    "ScheduleQuerySet",
    "Status",
    "WorkerHeartbeat",
    "default_timezone",
    "backfills_open",
    "load_exclusions",
    "with_backfill_flag",
    "with_calendar_flag",
    "name_validator",
    "pool_validator",
]
