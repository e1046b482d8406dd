"""What a schedule's definition means in time: the grid's anchor, the pure timing spec,
the slot it plans next (with its jitter), its upcoming fire times and the fingerprint that
lets the worker notice an edit made behind ``save()``. Mixed into ``Schedule``; no method
here touches the database except through :meth:`ExclusionsMixin.exclusions`.
"""

from __future__ import annotations

import hashlib
import json
import operator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.utils import timezone as dj_timezone

from .. import timing
from ..limits import JITTER_MAX_SECONDS
from .choices import DEFINITION_FIELDS, Kind

#: Definition fingerprints by the values they were computed from (the worker computes one
#: per claim, and most rows of a batch share a definition); bounded, emptied when full.
#: Equal values of the same types give the same text, so the same fingerprint (aware
#: datetimes equal in any zone are the same UTC instant in the text; naive and aware
#: datetimes never compare equal).
_HASHES: dict[tuple[Any, ...], str] = {}
_HASHES_MAX = 4096
#: The definition's values of a row, in :data:`DEFINITION_FIELDS` order (one C call).
_DEFINITION_VALUES = operator.attrgetter(*DEFINITION_FIELDS)
_EXTRA_AT = DEFINITION_FIELDS.index("extra_specs")
#: Types of values that are never an instant (no check of their zone needed).
_PLAIN_TYPES = frozenset({str, int, bool, float, type(None), tuple})
#: Hex digits of the definition's own digest in a fingerprint that names zone rules.
_DEFINITION_DIGITS = 32
#: Specs of rows without exclusion calendars by the values they are built from
#: (:func:`_spec_key`): the worker builds and validates one per claimed row, and a row
#: keeps its definition from claim to claim. A spec is pure data whose validity and caches
#: are functions of its fields, so rows of equal values share it. Bounded, emptied when full.
_SPECS: dict[tuple[Any, ...], timing.Spec] = {}
_SPECS_MAX = 4096


def same_definition(stored: str, current: str) -> bool:
    """Whether the fingerprint ``stored`` (a row's ``definition_hash``) is of the same
    definition as ``current`` (:meth:`DefinitionMixin.compute_definition_hash`), whatever
    zone rules each names: their definition digests agree. A blank ``stored`` (cleared by
    the edit trigger) is never the same. A fingerprint stored before zone rules were part
    of it (40 hex digits) is the same as the current one of its definition."""
    return (
        isinstance(stored, str)
        and len(stored) >= _DEFINITION_DIGITS
        and stored[:_DEFINITION_DIGITS] == current[:_DEFINITION_DIGITS]
    )


def extra_of(value: Any) -> tuple[Any, ...]:
    """``Schedule.extra_specs`` as :attr:`.timing.Spec.extra`: a list as a tuple (its items
    as they are: the spec refuses one that is no text), None or an empty value (``[]``,
    ``{}``, ``""``: none, as the fingerprint reads them) as ``()``.
    Any other value (a dict, a text, a number written behind ``save()``) is passed on as it
    is, for :meth:`.timing.Spec.validate` to refuse (typed as a tuple only for the spec)."""
    if value is None or (isinstance(value, list | tuple | dict | str) and not value):
        return ()
    if isinstance(value, list | tuple):
        return tuple(value)
    return value  # type: ignore[no-any-return]


def _hashable(value: Any) -> Any:
    """A list (``extra_specs``) as a tuple, so the fingerprint's memo can key it."""
    return tuple(value) if type(value) is list else value


def _spec_key(row: DefinitionMixin, weekend: frozenset[int]) -> tuple[Any, ...] | None:
    """The key of :data:`_SPECS` for ``row``'s spec with ``weekend`` days: every column
    :meth:`DefinitionMixin.spec` reads with its type (``60`` and ``60.0``, ``1`` and
    ``True`` are equal but not equally valid), so a value changed behind ``save()`` (raw
    SQL, ``update()``) is another key and is built and validated afresh. None (not
    remembered) for a row without ``created_at`` (its anchor is the clock's now), an
    instant that is not an aware UTC ``datetime`` (two instants of a repeated wall time
    compare equal in their zone), ``extra_specs`` that is not empty or a list of texts
    (``1`` and ``True`` items would share a key), or a value that cannot be hashed."""
    d = row.__dict__
    try:
        values = (
            d["kind"],
            d["interval_seconds"],
            d["cron"],
            d["timezone"],
            d["rrule"],
            d["exclusion_policy"],
            d["rrule_business_days"],
            d["extra_specs"],
            d["run_at"],
            d["start_at"],
            d["end_at"],
            d["created_at"],
        )
    except KeyError:  # a deferred column: read through the model, never remembered
        return None
    if values[11] is None:
        return None
    for instant in values[8:11]:
        if instant is not None and (type(instant) is not datetime or instant.tzinfo is not UTC):
            return None
    if type(values[11]) is not datetime or values[11].tzinfo is not UTC:
        return None
    extra = values[7]
    if extra:
        if type(extra) is not list and type(extra) is not tuple:
            return None
        if not all(type(item) is str for item in extra):
            return None
        values = (*values[:7], tuple(extra), *values[8:])
    elif extra is not None:
        values = (*values[:7], (), *values[8:])  # an empty value: none, as extra_of reads it
    key = (values, tuple(map(type, values)), weekend)
    try:
        hash(key)
    except TypeError:
        return None
    return key


class DefinitionMixin:
    """The definition's timing methods of ``Schedule`` (its fields are the model's)."""

    if TYPE_CHECKING:
        id: Any
        kind: str
        interval_seconds: int | None
        cron: str
        rrule: str
        extra_specs: Any
        exclusion_policy: Any
        rrule_business_days: Any
        timezone: str
        run_at: datetime | None
        start_at: datetime | None
        end_at: datetime | None
        jitter_seconds: int | None
        created_at: datetime | None

        def exclusions(self) -> timing.Exclusions: ...

        def _normalize(self) -> None: ...

    @property
    def anchor(self) -> datetime:
        """Origin of the interval grid: ``start_at``, else creation time (for a row not yet
        saved, the host clock's now: a preview; ``save()`` sets ``created_at``)."""
        return self.start_at or timing.truncate_to_second(self.created_at or dj_timezone.now())

    def spec(self, *, exclusions: bool = True) -> timing.Spec:
        """The pure timing definition of this schedule (see :mod:`.timing`), with its
        exclusion calendars unless ``exclusions`` is False (descriptions need none).
        ``extra_specs`` becomes ``extra`` (:func:`extra_of`): a value written behind
        ``save()`` that is not a list of texts gives a spec that :meth:`.timing.Spec.validate`
        refuses on field ``extra_specs``, as the worker's claim then pauses it.

        Without calendars (none linked, or ``exclusions`` False) the spec is remembered by
        every value it is built from (:func:`_spec_key`): a row whose values did not change
        gets the same (frozen) spec, validated already when it was valid, instead of a new
        one to validate at every claim."""
        found = self.exclusions() if exclusions else None
        key = None
        if not found:
            weekend = found.weekend_days() if found is not None else timing.DEFAULT_WEEKEND
            key = _spec_key(self, weekend)
            if key is not None:
                cached = _SPECS.get(key)
                if cached is not None:
                    return cached
        spec = self._build_spec(found)
        if key is not None and not spec.moves_slots:  # a moved grid's days: per instance
            if len(_SPECS) >= _SPECS_MAX:
                _SPECS.clear()
            _SPECS[key] = spec
        return spec

    def _build_spec(self, found: timing.Exclusions | None) -> timing.Spec:
        extra = extra_of(self.extra_specs)
        return timing.Spec(
            kind=self.kind,
            interval_seconds=self.interval_seconds,
            cron=self.cron or None,
            timezone=self.timezone or "UTC",
            run_at=self.run_at,
            rrule=self.rrule or None,
            anchor=self.anchor if self.kind in (Kind.INTERVAL, Kind.RRULE) or extra else None,
            start_at=self.start_at,
            end_at=self.end_at,
            exclusions=(found or None) if found is not None else None,
            extra=extra,
            exclusion_policy=self.exclusion_policy,
            rrule_business_days=self.rrule_business_days,
            weekend_days=found.weekend_days() if found is not None else timing.DEFAULT_WEEKEND,
        )

    def compute_definition_hash(self) -> str:
        """Fingerprint of the definition fields; lets the worker notice edits made behind
        ``save()`` (``QuerySet.update()``, raw SQL) and re-plan instead of firing. A blank
        ``rrule`` and an empty ``extra_specs`` are left out, so rows stored before the fields
        existed keep their hash.

        40 characters: the SHA-1 of the definition (40 hex digits); for a cron or rrule
        schedule in a zone other than UTC, its first 32 digits, ``@`` and the identity of
        the zone rules this process reads (:func:`.timing.zone_rules_id`), so a claim can
        tell a ``next_run_at`` planned under other rules (a tzdata update) from an edit
        (:func:`same_definition`)."""
        digest = self._definition_digest()
        if self.kind in (Kind.CRON, Kind.RRULE) and isinstance(self.timezone, str):
            rules = timing.zone_rules_id(self.timezone)
            if rules:
                return f"{digest[:_DEFINITION_DIGITS]}@{rules}"
        return digest

    def _definition_digest(self) -> str:
        values = _DEFINITION_VALUES(self)
        if type(values[_EXTRA_AT]) is list:  # extra_specs: a list (default [])
            values = (*values[:_EXTRA_AT], tuple(values[_EXTRA_AT]), *values[_EXTRA_AT + 1 :])
        types = tuple(map(type, values))
        if list in types:  # another column holding a list, written behind save()
            values = tuple([_hashable(v) for v in values])
            types = tuple(map(type, values))
        # Keyed by the values and their types (1 and True, 60 and 60.0 have other texts);
        # not remembered for an instant outside UTC (the two instants of a repeated wall
        # time compare equal in their zone but have other UTC texts).
        key: tuple[Any, ...] | None = (values, types)
        if not _PLAIN_TYPES.issuperset(types):  # a datetime, or a value written behind save()
            for v in values:
                if isinstance(v, datetime) and v.tzinfo is not UTC:
                    key = None
                    break
        if key is not None:
            try:
                return _HASHES[key]
            except (KeyError, TypeError):  # TypeError: a value written behind save()
                pass
        parts = []
        for f, value in zip(DEFINITION_FIELDS, values, strict=True):
            if f in ("rrule", "extra_specs") and not value:
                continue
            if (f, value) in (("exclusion_policy", "skip"), ("rrule_business_days", False)):
                continue  # the defaults: rows stored before these fields keep their hash
            if f == "extra_specs":
                value = json.dumps(value, default=repr, separators=(",", ":"))
            if isinstance(value, datetime):
                value = timing.truncate_to_second(value).isoformat()
            parts.append(f"{f}={value!s}")
        digest = hashlib.sha1("|".join(parts).encode()).hexdigest()
        if len(_HASHES) >= _HASHES_MAX:
            _HASHES.clear()
        if key is not None:
            try:
                _HASHES[key] = digest
            except TypeError:
                pass
        return digest

    def plan(self, now: datetime, *, first: bool = False) -> datetime | None:
        """When this schedule next comes due at ``now`` (aware UTC, whole seconds, read from
        the database clock by the caller), jitter added, or ``None`` if never: the slot
        :func:`.timing.planned_slot` gives (``first`` for a new schedule, else strictly
        after ``now``). Used by ``save()``, ``bulk_create()``, enable and the re-plan of an
        edit made behind ``save()``; pure (no database, no clock)."""
        return self.due_at(timing.planned_slot(self.spec(), now, first=first))

    def jitter_bound(self) -> int:
        """``jitter_seconds`` as the engine uses it: whole seconds in
        ``[0, JITTER_MAX_SECONDS]`` (one day). A larger value written behind ``save()`` is
        clamped to that bound, a negative one or a non-number is 0 (no jitter): a jitter
        never delays a schedule by more than a day."""
        value = self.jitter_seconds
        if isinstance(value, bool) or not isinstance(value, int):
            return 0
        return min(max(value, 0), JITTER_MAX_SECONDS)

    def due_at(self, slot: datetime | None) -> datetime | None:
        """When ``slot`` becomes due: the slot plus this schedule's deterministic jitter
        (SHA-256 of ``"<id>:<slot epoch seconds>"``, so every worker agrees), at most
        :meth:`jitter_bound` seconds."""
        jitter = self.jitter_bound()
        if slot is None or not jitter:
            return slot
        key = f"{self.id}:{int(slot.timestamp())}"
        return slot + timedelta(seconds=timing.jitter_offset(key, jitter))

    def upcoming(self, count: int = 5, after: datetime | None = None) -> list[datetime]:
        """The next ``count`` fire times (aware UTC datetimes) strictly after ``after``
        (default: now), by the same computation the worker uses. Works unsaved. Raises
        :class:`.timing.InvalidSchedule` for a definition the engine cannot evaluate (a
        value written behind ``save()``, an exclusion calendar with an unknown holiday
        country or a date the engine cannot read), as the claim would degrade it."""
        self._normalize()
        after = timing.require_aware(after, "after") if after else dj_timezone.now()
        return timing.upcoming(self.spec(), after, count)
