"""The schedule specification: :class:`Spec`, the timing definition of a schedule as pure
data, and its validation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date, datetime

from .articles import with_article
from .business_days import (
    DEFAULT_WEEKEND,
    POLICY_FIELD,
    WEEKEND_FIELD,
    business_day_test,
    check_policy,
    weekend_days,
)
from .cron_plan import validate_cron
from .errors import InvalidSchedule
from .exclusions import FIELD as EXCLUSIONS_FIELD
from .exclusions import Exclusions
from .instants import UTC, require_aware, truncate_to_second
from .intervals import validate_interval
from .rrule import compile_rrule, rrule_dtstart
from .rrule_grid import RulePlan
from .zones import validate_timezone

KINDS = ("interval", "cron", "once", "rrule", "manual", "after")
#: The kinds with no grid of their own: ``manual`` runs only when triggered, ``after`` when
#: its upstreams succeeded for an instant of theirs (chaining).
NO_GRID_KINDS = ("manual", "after")
#: The timing fields each kind refuses (a value in one is that field's error): the one list
#: the admin's form hides fields by when the kind changes (``admin.forms.KIND_HIDES``).
KIND_FORBIDS: dict[str, tuple[str, ...]] = {
    "interval": ("cron", "run_at", "rrule"),
    "cron": ("interval_seconds", "run_at", "rrule"),
    "once": ("interval_seconds", "cron", "rrule"),
    "rrule": ("interval_seconds", "cron", "run_at"),
    "manual": ("interval_seconds", "cron", "run_at", "rrule", "start_at", "end_at"),
    "after": ("interval_seconds", "cron", "run_at", "rrule", "start_at", "end_at"),
}

#: The field a schedule's further specs are refused on (``Schedule.extra_specs``), the kinds
#: that take them and how many one spec takes at most.
EXTRA_FIELD = "extra_specs"
EXTRA_KINDS = ("cron", "rrule")
EXTRA_MAX = 10


def extra_kind(item: str) -> str:
    """The kind of one item of ``Spec.extra``: ``"rrule"`` for a rule (it starts with
    ``FREQ=`` or ``RRULE:``, any case), else ``"cron"``."""
    head = item.lstrip().upper()
    return "rrule" if head.startswith(("FREQ=", "RRULE:")) else "cron"


#: Specs without exclusion calendars that :meth:`Spec.validate` found valid (bounded: emptied
#: when full). Validity is a function of a spec's fields alone.
_VALID_SPECS: dict[tuple[object, ...], None] = {}
_VALID_SPECS_MAX = 4096


def _given(value: object) -> bool:
    return value is not None and value != ""


@dataclass(frozen=True)
class Spec:
    """The timing definition of a schedule; pure data, validated by :meth:`validate`.

    ``kind`` is ``"interval"`` (``interval_seconds`` from ``anchor``), ``"cron"``
    (``cron`` in ``timezone``), ``"once"`` (``run_at``) or ``"rrule"`` (the RFC 5545 rule
    ``rrule`` in ``timezone``). ``anchor`` is the interval grid origin (the schedule's
    ``start_at``, else its creation time); when it is None ``start_at`` is used. An rrule's
    DTSTART is ``start_at`` in the zone, else local midnight of ``anchor``'s day. No slot is earlier than ``start_at`` or later than ``end_at``
    (inclusive). All datetimes must be aware; they are used truncated to whole seconds.
    ``exclusions`` (:class:`.exclusions.Exclusions`): local dates, in ``timezone``, on
    which no slot fires (recurring kinds only).

    ``extra`` (cron and rrule kinds only): further specs, each a cron expression or a rule
    (:func:`extra_kind`), read in the same ``timezone`` with the same ``start_at``,
    ``end_at``, ``anchor`` and ``exclusions``. The grid is the union of the main spec's and
    theirs: an instant on several of them is one slot (:meth:`members`).
    """

    kind: str
    interval_seconds: int | None = None
    cron: str | None = None
    timezone: str = "UTC"
    run_at: datetime | None = None
    rrule: str | None = None
    anchor: datetime | None = None
    start_at: datetime | None = None
    end_at: datetime | None = None
    exclusions: Exclusions | None = None
    extra: tuple[str, ...] = ()
    #: What an excluded slot does (:data:`.business_days.POLICIES`): ``skip`` (it does not
    #: fire), or it moves to the previous or next business day (:mod:`.moved_slots`).
    exclusion_policy: str = "skip"
    #: An rrule's BYMONTHDAY and BYSETPOS counted over business days (:mod:`.business_rrule`).
    rrule_business_days: bool = False
    #: The weekend days (ISO numbers) of the business days: the union of the calendars'.
    weekend_days: frozenset[int] = DEFAULT_WEEKEND

    def validate(self) -> None:
        """Raise :class:`InvalidSchedule` ``(field, message)`` for the first problem:
        unknown ``kind``; unknown ``timezone``; a naive datetime; ``end_at`` before
        ``start_at``; a missing required field or a field that does not belong to the kind
        (``cron`` on an interval, ``run_at`` on a cron, ...); an invalid interval, cron
        expression or rule (:func:`.rrule.validate_rrule`); an interval or rule without
        ``anchor``/``start_at``; a rule with both UNTIL and ``end_at``; a ``run_at``
        outside ``[start_at, end_at]``; exclusion calendars on a ``once`` or a holiday
        country or subdivision the ``holidays`` package does not know (field
        ``exclusion_calendars``). A spec found valid is not checked again (it is frozen;
        the worker's slot arithmetic asks several times per run)."""
        if self.__dict__.get("_valid"):
            return
        # Specs without calendars found valid before (the same fields: the same answer) are
        # not checked again either: most rows of a batch share a definition.
        key = self._cache_key()
        if key is not None and key in _VALID_SPECS:
            object.__setattr__(self, "_valid", True)
            return
        if self.kind not in KINDS:
            raise InvalidSchedule(
                "kind", f"kind must be one of {', '.join(KINDS)}; got {self.kind!r}"
            )
        validate_timezone(self.timezone)
        for name in ("run_at", "anchor", "start_at", "end_at"):
            if getattr(self, name) is not None:
                require_aware(getattr(self, name), name)
        if (
            self.start_at
            and self.end_at
            and truncate_to_second(self.end_at) < truncate_to_second(self.start_at)
        ):
            raise InvalidSchedule("end_at", "end_at must not be before start_at")
        self._forbid(KIND_FORBIDS[self.kind])
        getattr(self, f"_validate_{self.kind}")()
        if self.extra != ():
            self._validate_extra()
        self._validate_business_days()
        if self.exclusions:
            if self.kind == "once":
                raise InvalidSchedule(
                    EXCLUSIONS_FIELD,
                    "a once schedule takes no exclusion calendars: it runs at run_at "
                    "(choose another run_at, or cancel it)",
                )
            if self.kind == "manual":
                raise InvalidSchedule(
                    EXCLUSIONS_FIELD,
                    "a manual schedule takes no exclusion calendars: it runs only when triggered",
                )
            if self.kind == "after":
                raise InvalidSchedule(
                    EXCLUSIONS_FIELD,
                    "a schedule of kind 'after' takes no exclusion calendars: it runs the "
                    "instants its upstream schedules succeeded for (exclude dates on them)",
                )
            self.exclusions.validate()
        object.__setattr__(self, "_valid", True)
        if key is not None:
            if len(_VALID_SPECS) >= _VALID_SPECS_MAX:
                _VALID_SPECS.clear()
            _VALID_SPECS[key] = None

    def _cache_key(self) -> tuple[object, ...] | None:
        """The key of :data:`_VALID_SPECS`: the fields with their types (``60`` and
        ``60.0``, ``1`` and ``True`` are equal but not equally valid), or None when the
        spec has calendars, an instant not in UTC (two instants of a repeated wall time
        compare equal in their zone) or a value that cannot be hashed."""
        if self.exclusions is not None:
            return None
        values = (
            self.kind,
            self.interval_seconds,
            self.cron,
            self.timezone,
            self.run_at,
            self.rrule,
            self.anchor,
            self.start_at,
            self.end_at,
            self.extra,
            self.exclusion_policy,
            self.rrule_business_days,
            self.weekend_days,
        )
        for instant in (self.run_at, self.anchor, self.start_at, self.end_at):
            if instant is not None and (type(instant) is not datetime or instant.tzinfo is not UTC):
                return None
        key = (values, tuple(map(type, values)))
        try:
            hash(key)
        except TypeError:
            return None
        return key

    def _forbid(self, names: tuple[str, ...]) -> None:
        for name in names:
            if _given(getattr(self, name)):
                raise InvalidSchedule(
                    name, f"{with_article(self.kind)} schedule does not take {name}"
                )

    def _validate_interval(self) -> None:
        if self.interval_seconds is None:
            raise InvalidSchedule("interval_seconds", "an interval schedule needs interval_seconds")
        validate_interval(self.interval_seconds)
        if self.anchor is None and self.start_at is None:
            raise InvalidSchedule(
                "anchor", "an interval schedule needs an anchor (start_at or creation time)"
            )

    def _validate_cron(self) -> None:
        if self.cron is None or not _given(self.cron):
            raise InvalidSchedule("cron", "a cron schedule needs a cron expression")
        validate_cron(self.cron, self.timezone)

    def _validate_once(self) -> None:
        if self.run_at is None:
            raise InvalidSchedule("run_at", "a once schedule needs run_at")
        run_at = truncate_to_second(self.run_at)
        if self.start_at and run_at < truncate_to_second(self.start_at):
            raise InvalidSchedule("run_at", "run_at is before start_at")
        if self.end_at and run_at > truncate_to_second(self.end_at):
            raise InvalidSchedule("run_at", "run_at is after end_at")

    def _validate_extra(self) -> None:
        """Refuse, on field ``extra_specs``, further specs on a kind that takes none, a value
        that is not a tuple of strings (a row written behind ``save()``), more than
        :data:`EXTRA_MAX`, a repeated item (or one that repeats the main spec), and an item
        its own kind refuses (the message names its position: ``item 2: ...``)."""
        if self.kind not in EXTRA_KINDS:
            raise InvalidSchedule(
                EXTRA_FIELD, f"{with_article(self.kind)} schedule does not take {EXTRA_FIELD}"
            )
        if type(self.extra) is not tuple:
            raise InvalidSchedule(
                EXTRA_FIELD, "extra_specs must be a list of cron expressions or rules"
            )
        if len(self.extra) > EXTRA_MAX:
            raise InvalidSchedule(
                EXTRA_FIELD, f"at most {EXTRA_MAX} further specs; got {len(self.extra)}"
            )
        main = (self.cron if self.kind == "cron" else self.rrule) or ""
        seen: dict[str, int] = {" ".join(main.split()).upper(): 0}
        for position, item in enumerate(self.extra, start=1):
            if type(item) is not str or not item.strip():
                name = type(item).__name__
                shown = f"{'an' if name[:1] in 'aeiou' else 'a'} {name}"
                shown = "an empty text" if type(item) is str else shown
                raise InvalidSchedule(
                    EXTRA_FIELD,
                    f"item {position}: {shown} is not a cron expression or a rule",
                )
            key = " ".join(item.split()).upper()
            if key in seen:
                first = seen[key]
                what = "the main spec" if first == 0 else f"item {first}"
                raise InvalidSchedule(EXTRA_FIELD, f"item {position}: repeats {what}")
            seen[key] = position
            try:
                self._member(item).validate()
            except InvalidSchedule as exc:
                raise InvalidSchedule(EXTRA_FIELD, f"item {position}: {exc.message}") from exc

    def _validate_business_days(self) -> None:
        """Refuse an unknown ``exclusion_policy``, a policy that moves slots on a kind
        without wall times (interval, once, manual), weekend days that are no set of ISO
        weekday numbers, and ``rrule_business_days`` that is no bool, on a kind other than
        ``rrule`` or on a rule it cannot count (:func:`.business_rrule.check_business_rule`)."""
        check_policy(self.exclusion_policy)
        if self.exclusion_policy != "skip" and self.kind not in ("cron", "rrule"):
            raise InvalidSchedule(
                POLICY_FIELD,
                f"{with_article(self.kind)} schedule has no wall time to keep: "
                f"exclusion_policy {self.exclusion_policy} takes a cron or rrule schedule",
            )
        if not isinstance(self.weekend_days, frozenset) or self.weekend_days != frozenset(
            weekend_days(sorted(self.weekend_days, key=repr))
        ):
            raise InvalidSchedule(WEEKEND_FIELD, f"weekend_days: {self.weekend_days!r}")
        if type(self.rrule_business_days) is not bool:
            raise InvalidSchedule(
                "rrule_business_days",
                f"rrule_business_days must be true or false; got {self.rrule_business_days!r}",
            )
        if self.rrule_business_days:
            if self.kind != "rrule":
                raise InvalidSchedule(
                    "rrule_business_days",
                    f"{with_article(self.kind)} schedule has no rule to count over business "
                    "days: rrule_business_days takes an rrule schedule",
                )
            from .business_rrule import check_business_rule

            check_business_rule(self.rrule_plan().parts)

    def business_day_test(self) -> Callable[[date], bool]:
        """Whether a local date is a business day of this spec (not excluded, no weekend
        day); cached. The main member of a spec with further specs keeps its parent's."""
        cached = self.__dict__.get("_business")
        if cached is None:
            cached = business_day_test(self.weekend_days, self.exclusions)
            object.__setattr__(self, "_business", cached)
        return cached

    @property
    def moves_slots(self) -> bool:
        """Whether slots on days that are no business day move to one (a policy other than
        ``skip``, on a cron or rrule spec)."""
        return self.exclusion_policy != "skip" and self.kind in ("cron", "rrule")

    def _member(self, item: str) -> Spec:
        """The spec of one item of ``extra``: its kind, the main spec's zone, window and
        anchor, no exclusions (they apply to the union)."""
        kind = extra_kind(item)
        return Spec(
            kind=kind,
            cron=item.strip() if kind == "cron" else None,
            rrule=item.strip() if kind == "rrule" else None,
            timezone=self.timezone,
            anchor=self.anchor,
            start_at=self.start_at,
            end_at=self.end_at,
        )

    def members(self) -> tuple[Spec, ...]:
        """The specs whose union is this one's grid: itself without ``extra`` and without
        exclusions, then one per item of ``extra`` (:meth:`_member`); cached. Call it on a
        validated spec."""
        cached = self.__dict__.get("_members")
        if cached is None:
            main = replace(self, extra=(), exclusions=None, exclusion_policy="skip")
            object.__setattr__(main, "_business", self.business_day_test())
            cached = (main, *(self._member(item) for item in self.extra))
            object.__setattr__(self, "_members", cached)
        return cached

    def _validate_manual(self) -> None:
        """A manual spec has nothing to validate: :meth:`_forbid` refused every field."""

    def _validate_after(self) -> None:
        """An ``after`` spec has nothing to validate either (its upstreams are links,
        checked as a graph by the state package): :meth:`_forbid` refused every field."""

    def _validate_rrule(self) -> None:
        if self.rrule is None or not _given(self.rrule):
            raise InvalidSchedule(
                "rrule", "an rrule schedule needs a rule, e.g. FREQ=DAILY;BYHOUR=9;BYMINUTE=0"
            )
        plan = self.rrule_plan()
        if plan.parts.until is not None and self.end_at is not None:
            raise InvalidSchedule(
                "rrule", "give the end once: UNTIL in the rule or end_at, not both"
            )

    def rrule_plan(self) -> RulePlan:
        """The compiled rule of an rrule spec (cached per rule, zone and DTSTART). Raises
        :class:`InvalidSchedule` like :func:`.rrule.validate_rrule`."""
        if not isinstance(self.rrule, str):
            raise InvalidSchedule("rrule", "an rrule schedule needs a rule")
        validate_timezone(self.timezone)  # before the zone is loaded (a bad name is a field error)
        start = truncate_to_second(self.start_at) if self.start_at is not None else None
        dtstart = rrule_dtstart(self.timezone, start, self.anchor)
        return compile_rrule(self.rrule, self.timezone, dtstart)
