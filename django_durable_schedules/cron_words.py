"""Cron expressions in words (``"0 9 * * 1-5"`` -> ``"At 09:00, Monday through Friday"``),
for the admin, the API (``cron_description``) and the ``schedules`` command.

The words come from `cron-descriptor <https://pypi.org/project/cron-descriptor/>`_, in the
active Django language where it has a translation (``fr`` -> ``fr_FR``), else English; a
24-hour clock. Macros (``@daily``) are expanded first. The description is of the fields
only: the zone they are read in is the schedule's, shown beside them.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

from django.utils import translation

from . import timing
from .db.names import calendar_names, calendar_weekends, read_calendar_links
from .timing.cron_syntax import CRON_MACROS

try:  # an optional nicety: without the library, no words (the expression is still shown)
    import cron_descriptor
    from cron_descriptor import ExpressionDescriptor, Options
except ImportError:  # pragma: no cover - it is a dependency of the package
    cron_descriptor = None


@functools.cache
def _locales() -> frozenset[str]:
    if cron_descriptor is None:  # pragma: no cover
        return frozenset()
    folder = Path(cron_descriptor.__file__).parent / "locale"
    return frozenset(p.stem for p in folder.glob("*.mo")) | {"en_US"}


def locale_for(language: str | None) -> str:
    """The cron-descriptor locale for a Django language code: ``"fr"`` -> ``"fr_FR"``,
    ``"pt-br"`` -> ``"pt_PT"`` (the language's only one), unknown -> ``"en_US"``."""
    if not language:
        return "en_US"
    lang, _, region = language.replace("_", "-").partition("-")
    exact = f"{lang.lower()}_{region.upper()}"
    if exact in _locales():
        return exact
    same = sorted(code for code in _locales() if code.split("_")[0] == lang.lower())
    return same[0] if same else "en_US"


@functools.lru_cache(maxsize=2048)
def _describe(expression: str, locale: str) -> str:
    if cron_descriptor is None:  # pragma: no cover
        return ""
    fields = CRON_MACROS.get(expression.strip().lower(), expression)
    options = Options()
    options.use_24hour_time_format = True
    options.locale_code = locale
    options.throw_exception_on_parse_error = True
    try:
        return str(ExpressionDescriptor(fields, options).get_description())
    except Exception:  # noqa: BLE001 - any expression it cannot read has no words
        return ""


def cron_in_words(expression: str | None, language: str | None = None) -> str:
    """``expression`` in words in ``language`` (default: the active Django language), or
    ``""`` for an empty expression or one the library cannot read (the expression itself
    is validated elsewhere: :func:`.timing.validate_cron`). Never raises."""
    if not expression or not isinstance(expression, str):
        return ""
    return _describe(
        " ".join(expression.split()), locale_for(language or translation.get_language())
    )


def schedule_description(schedule: Any) -> str:
    """A schedule's definition in words, for any kind (:func:`.timing.describe`: ``"every 5
    minutes"``, ``"cron '0 3 * * *' (Europe/Paris)"``), its business-day rules naming the
    weekend days its business days use (:func:`weekend_of`): ``", moved to the next
    business day (same wall time) when a slot falls on an excluded date or a weekend day
    (weekend: Friday and Saturday)"``. The one description of the API's ``description``,
    the admin's cadence and ``manage.py schedules``. Raises what :meth:`Schedule.spec`
    raises for a definition written behind ``save()`` (:class:`.timing.InvalidSchedule`,
    ``ValueError``, ``TypeError``, ``OverflowError``)."""
    spec = schedule.spec(exclusions=False)
    if timing.business_words(spec):  # only these words name the weekend
        spec = dataclasses.replace(spec, weekend_days=weekend_of(schedule))
    return timing.describe(spec)


def weekend_of(schedule: Any) -> frozenset[int]:
    """The weekend days (ISO numbers) of ``schedule``'s business days as the engine reads
    them (:meth:`.timing.Exclusions.weekend_days`): a day any of its calendars calls a
    weekend day (values the engine cannot read left out), Saturday and Sunday without
    calendars. Read from the row's annotation (:func:`.db.names.with_calendar_names`: no
    query), else one query (:func:`.db.names.read_calendar_links`, kept on the row); an
    unsaved row has no calendars."""
    if schedule.pk is None or schedule._state.adding:
        return timing.DEFAULT_WEEKEND
    values = calendar_weekends(schedule)
    if values is None:
        read_calendar_links(schedule)
        values = calendar_weekends(schedule) or []
    return _union(values)


def _union(values: list[Any]) -> frozenset[int]:
    """The weekend days of calendars whose ``weekend_days`` are ``values``, combined as
    the engine combines them (:meth:`.timing.Exclusions.weekend_days`)."""
    weekends = [(str(number), value) for number, value in enumerate(values)]
    return timing.exclusions_of([], [], weekends).weekend_days()


def schedule_in_words(
    schedule: Any,
    language: str | None = None,
    *,
    calendars: list[str] | None = None,
    name_calendars: bool = True,
) -> str:
    """The words of a cron or rrule schedule's whole grid: its main spec's (cron in
    ``language``, :func:`cron_in_words`; a rule in English,
    :func:`.timing.rrule_description`), then each further spec's (``extra_specs``) in
    order, joined by ``"; "``: ``"At 09:00, Monday through Friday; At 08:00, on day 1 of
    the month"``. A further spec without words is given as written. ``""`` for another
    kind, a main spec without words, or a definition that cannot be read (written behind
    ``save()``). Its business-day rules follow (:func:`business_in_words`; ``calendars``:
    the names to give for its calendars, None: those the row holds; ``name_calendars``
    False: none named, as for a reader who may not see them). Never raises."""
    if getattr(schedule, "kind", None) not in ("cron", "rrule"):
        return ""
    try:
        spec = schedule.spec(exclusions=False)
        if spec.extra:
            spec.validate()  # members() reads a validated list only
        members = spec.members() if spec.extra else (spec,)
    except (timing.InvalidSchedule, ValueError, TypeError, OverflowError, KeyError):
        return ""
    main, *extra = members
    first = _member_words(main, language)
    if not first:  # the main spec has no words: none (the definition is shown as is)
        return ""
    if schedule.kind == "rrule" and schedule.rrule_business_days is True:
        first += ", counted over business days"
    words = "; ".join([first, *(_member_words(m, language) or _written(m) for m in extra)])
    return words + business_in_words(schedule, calendars=calendars, name_calendars=name_calendars)


#: What each exclusion policy that moves a slot adds to the words.
_POLICY_WORDS = {
    "previous_business_day": "moved to the previous business day (same time of day) "
    "when it falls on an excluded date or a weekend day",
    "next_business_day": "moved to the next business day (same time of day) "
    "when it falls on an excluded date or a weekend day",
}


def business_in_words(
    schedule: Any, *, calendars: list[str] | None = None, name_calendars: bool = True
) -> str:
    """What a schedule's business-day rules add after its words (English): ``""`` when
    neither applies; else, for a policy that moves slots (``exclusion_policy``),
    ``", moved to the previous business day (same time of day) when it falls on an
    excluded date or a weekend day"``, then which business days: ``" (calendar FR)"``,
    ``" (calendars FR, US)"``, ``" (no exclusion calendar: business days are Monday to
    Friday)"``; calendars whose weekend days (:func:`weekend_of`) are not Saturday and
    Sunday add them: ``" (calendar il; weekend: Friday and Saturday)"``, ``"; no weekend"``
    (only when the row holds them: the list query's annotation). The names are read only from what the row
    already holds (the list query's annotation, :func:`.db.names.with_calendar_names`, or a
    prefetch) unless ``calendars`` gives them: a row without them gives no parenthesis
    rather than a query, and so does ``name_calendars`` False. (``rrule_business_days`` adds
    ``", counted over business days"`` after the rule's own words:
    :func:`schedule_in_words`.) Never raises."""
    counted = schedule.kind == "rrule" and getattr(schedule, "rrule_business_days", False) is True
    policy = _POLICY_WORDS.get(getattr(schedule, "exclusion_policy", "skip"), "")
    if not (counted or policy):
        return ""
    text = f", {policy}" if policy else ""
    names = sorted(calendars) if calendars is not None else _calendar_names(schedule)
    if names is None or not name_calendars:
        return text
    if not names:
        return text + " (no exclusion calendar: business days are Monday to Friday)"
    plural = "s" if len(names) > 1 else ""
    values = calendar_weekends(schedule)
    weekend = _union(values) if values else timing.DEFAULT_WEEKEND
    said = ""
    if weekend != timing.DEFAULT_WEEKEND:  # Saturday and Sunday go without saying
        said = f"; weekend: {timing.weekend_words(weekend)}" if weekend else "; no weekend"
    return text + f" (calendar{plural} {', '.join(names)}{said})"


def _calendar_names(schedule: Any) -> list[str] | None:
    """The names of ``schedule``'s exclusion calendars if the row holds them (annotated or
    prefetched), else None: never a query."""
    names = calendar_names(schedule)
    if names is not None:
        return names
    cache = getattr(schedule, "_prefetched_objects_cache", {})
    if "exclusion_calendars" in cache:
        return sorted(c.name for c in cache["exclusion_calendars"])
    return None


def _member_words(member: Any, language: str | None) -> str:
    if member.kind == "cron":
        return cron_in_words(member.cron, language)
    return timing.rrule_description(member)


def _written(member: Any) -> str:
    return str(member.cron if member.kind == "cron" else member.rrule)
