"""Pure schedule time math: validation, next fire times, catch-up and backoff arithmetic.

Nothing here imports Django or touches a database. Every instant that goes in must be an
aware ``datetime``; every instant that comes out is an aware UTC ``datetime`` with whole
seconds. Durations are integer seconds.

Rules and where they come from (``docs/time.md`` explains them with examples):

* Interval schedules are elapsed UTC time: slot ``n`` is ``anchor + n * interval``.
* Cron schedules are wall-clock time in the schedule's IANA zone. ``cronsim`` parses the
  fields and decides which dates fire; this module maps
  wall times to instants itself, because cronsim's DST handling breaks the rules below in
  three cases (see "Cron evaluation"):

  - fixed-time jobs (minute and hour fields do not start with ``*``) run once for a wall
    time inside a spring-forward gap, at the first instant after the gap, and once, at the
    first reading, for a wall time inside a fall-back overlap;
  - wildcard jobs (minute or hour field starts with ``*``) run at every real instant whose
    local reading matches: both passes of a repeated hour, nothing inside a gap;
  - day-of-month and day-of-week: if either field starts with ``*`` both must match,
    otherwise either one is enough.
* Calendar-rule schedules (kind ``rrule``) are an RFC 5545 RRULE expanded by python-dateutil
  in the schedule's zone from DTSTART (``start_at``, else local midnight of the creation
  day); local times become instants by RFC 5545 §3.3.5: inside a gap with the offset
  before the gap (02:30 becomes 03:30), inside an overlap the first occurrence. Where
  cron differs: a fixed-time cron job in a gap runs at the first instant after it (03:00).
* Instants are truncated (never rounded up) to whole seconds before any arithmetic.

The package, one module per concern (each imports only the ones listed before it):

* ``errors``: :class:`InvalidSchedule`, :class:`PlanningBudgetExceeded`;
* ``instants``: ``UTC``, ``MAX_YEAR``, the searchable bounds, :func:`require_aware`,
  :func:`truncate_to_second`, whole seconds since the epoch;
* ``zones``: :func:`validate_timezone`, :func:`canonical_timezone`, :func:`zone_names` and
  the cached ``ZoneInfo`` lookup;
* ``intervals``: :func:`validate_interval` and its bounds;
* ``cron_syntax``: :data:`CRON_MACROS`, the field-by-field syntax check,
  :func:`is_wildcard_cron`;
* ``cron_plan``: compiled, cached cron plans, "can never fire", :func:`validate_cron`;
* ``cron``: cron evaluation: wall times to instants under the DST rules, next, latest and
  counted slots;
* ``rrule_syntax``: the RRULE parts read and checked (:func:`parse_rrule`), their defaults
  from DTSTART;
* ``rrule_grid``: the bounded, cached expansion of a rule by python-dateutil, local times
  to instants;
* ``rrule``: calendar-rule evaluation: DTSTART, next, latest and counted slots, "can never
  fire", :func:`validate_rrule`;
* ``rrule_words``: :func:`rrule_in_words`;
* ``business_days``: weekend days, exclusion policies, the business-day test and the
  nearest business day;
* ``exclusions``: exclusion calendars as data (:class:`Exclusions`, holiday sources and
  their cached dates, local days);
* ``excluded_slots``: the bounded walks past excluded dates;
* ``business_rrule``: monthly and yearly rules whose BYMONTHDAY and BYSETPOS count business
  days;
* ``grid``: a spec's grid searched as it is (excluded dates included): first, latest and
  counted slots inside ``[start_at, end_at]``, the union of ``extra`` specs' grids;
* ``moved_slots``: excluded slots moved to the previous or next business day (the grid a
  schedule with such a policy fires on, a local day at a time), :func:`moved_from`;
* ``blackouts``: blackout windows as data (:class:`Blackouts`: ranges and rules, the
  window at an instant, the end of a blackout);
* ``spec``: :class:`Spec`, ``KINDS`` and the further specs' ``EXTRA_*`` and :func:`extra_kind`;
* ``slots``: :func:`next_slot_after`, :func:`planned_slot`, :func:`upcoming`, :func:`latest_slot_at_or_before`,
  :func:`count_slots`, :func:`excluded_days`, :func:`upcoming_slots`: the slots that fire;
* ``delays``: :func:`backoff_seconds`, :func:`jitter_offset`;
* ``descriptions``: :func:`describe`, :func:`business_words`, :func:`rrule_description`;
* ``zone_rules``: which zone rules the process reads: :func:`zone_rules_id`,
  :func:`rules_version`, :func:`reload_zone_rules`.
"""

from __future__ import annotations

from .articles import with_article
from .blackouts import NO_BLACKOUTS, BlackoutRange, BlackoutRule, Blackouts, Window
from .business_days import (
    DEFAULT_WEEKEND,
    POLICIES,
    check_policy,
    weekend_days,
    weekend_words,
)
from .cron_plan import validate_cron
from .cron_syntax import CRON_MACROS, is_wildcard_cron
from .delays import backoff_seconds, jitter_offset
from .descriptions import AFTER_WORDS, MANUAL_WORDS, business_words, describe, rrule_description
from .errors import InvalidSchedule, PlanningBudgetExceeded
from .excluded_slots import ExcludedDay, SlotView
from .exclusions import (
    Exclusion,
    Exclusions,
    HolidaySource,
    check_holidays,
    exclusions_of,
    holiday_countries,
    local_date,
)
from .instants import MAX_YEAR, UTC, require_aware, truncate_to_second
from .intervals import MAX_INTERVAL_SECONDS, MIN_INTERVAL_SECONDS, validate_interval
from .moved_slots import moved_from
from .rrule import rrule_dtstart, validate_rrule
from .rrule_syntax import parse_rrule
from .rrule_words import rrule_in_words
from .slots import (
    count_slots,
    excluded_days,
    last_grid_slot,
    latest_slot_at_or_before,
    nearest_slot,
    next_slot_after,
    planned_slot,
    upcoming,
    upcoming_slots,
)
from .spec import (
    EXTRA_FIELD,
    EXTRA_KINDS,
    EXTRA_MAX,
    KIND_FORBIDS,
    KINDS,
    NO_GRID_KINDS,
    Spec,
    extra_kind,
)
from .zone_rules import reload_zone_rules, rules_version, zone_rules_id
from .zones import canonical_timezone, validate_timezone, zone_names
from .zones import known_zones as known_zones

__all__ = [
    "KIND_FORBIDS",
    "InvalidSchedule",
    "PlanningBudgetExceeded",
    "UTC",
    "MIN_INTERVAL_SECONDS",
    "MAX_INTERVAL_SECONDS",
    "MAX_YEAR",
    "EXTRA_FIELD",
    "EXTRA_KINDS",
    "NO_GRID_KINDS",
    "EXTRA_MAX",
    "KINDS",
    "CRON_MACROS",
    "require_aware",
    "truncate_to_second",
    "validate_timezone",
    "canonical_timezone",
    "zone_names",
    "validate_interval",
    "validate_cron",
    "is_wildcard_cron",
    "validate_rrule",
    "parse_rrule",
    "rrule_dtstart",
    "rrule_in_words",
    "Spec",
    "next_slot_after",
    "planned_slot",
    "upcoming",
    "latest_slot_at_or_before",
    "nearest_slot",
    "count_slots",
    "excluded_days",
    "last_grid_slot",
    "upcoming_slots",
    "moved_from",
    "ExcludedDay",
    "SlotView",
    "DEFAULT_WEEKEND",
    "POLICIES",
    "check_policy",
    "weekend_days",
    "weekend_words",
    "Blackouts",
    "BlackoutRange",
    "BlackoutRule",
    "Window",
    "NO_BLACKOUTS",
    "Exclusion",
    "Exclusions",
    "HolidaySource",
    "check_holidays",
    "exclusions_of",
    "holiday_countries",
    "local_date",
    "backoff_seconds",
    "jitter_offset",
    "describe",
    "business_words",
    "extra_kind",
    "MANUAL_WORDS",
    "AFTER_WORDS",
    "rrule_description",
    "with_article",
    "zone_rules_id",
    "rules_version",
    "reload_zone_rules",
]
