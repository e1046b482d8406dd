"""Descriptions: short human words for a spec (``"every 5 minutes"``)."""

from __future__ import annotations

from .business_days import weekend_words
from .errors import InvalidSchedule
from .instants import truncate_to_second
from .rrule_words import rrule_in_words
from .spec import Spec, extra_kind

#: A manual schedule in words, wherever a definition is described (admin, API, CLI).
MANUAL_WORDS = "manual: runs only when triggered"
#: The words of a kind ``after`` schedule (its upstreams' names are the caller's to add).
AFTER_WORDS = "after its upstream schedules: runs each instant they all succeeded for"

_UNITS = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


def _describe_seconds(seconds: int) -> str:
    """``seconds`` in the largest unit that divides it (a second divides every int)."""
    unit, size = next((u, n) for u, n in _UNITS if seconds % n == 0)
    count = seconds // size
    return f"{count} {unit}{'' if count == 1 else 's'}"


def business_words(spec: Spec) -> str:
    """What ``exclusion_policy`` and ``rrule_business_days`` add to a spec's words
    (``""`` at their defaults): ``", moved to the next business day when a slot falls on a
    day that is no business day (weekend: Saturday and Sunday)"``."""
    parts = []
    if spec.rrule_business_days is True:
        parts.append("BYMONTHDAY and BYSETPOS counted over business days")
    if spec.exclusion_policy in ("previous_business_day", "next_business_day"):
        where = "previous" if spec.exclusion_policy == "previous_business_day" else "next"
        parts.append(
            f"moved to the {where} business day (same wall time) when a slot falls on an "
            "excluded date or a weekend day"
        )
    if not parts:
        return ""
    return f", {'; '.join(parts)} (weekend: {weekend_words(spec.weekend_days)})"


def describe(spec: Spec) -> str:
    """:func:`spec_words` and :func:`business_words`."""
    return spec_words(spec) + business_words(spec)


def spec_words(spec: Spec) -> str:
    """Short human words for a spec: ``"every 5 minutes"``, ``"every 1 hour"``,
    ``"cron '0 3 * * *' (Europe/Paris)"``, ``"rrule 'FREQ=DAILY;BYHOUR=9' (Europe/Paris)"``,
    ``"once at 2027-06-01 09:00:00 UTC"``, ``"manual: runs only when triggered"``.
    Does not validate; an interval is named in its largest whole unit. Further specs
    (``extra``) are named after the main one, joined by "and", the zone once:
    ``"cron '0 9 * * 1-5' and rrule 'FREQ=MONTHLY;BYMONTHDAY=1' (Europe/Paris)"``."""
    if spec.extra and spec.kind in ("cron", "rrule") and type(spec.extra) is tuple:
        main = spec.cron if spec.kind == "cron" else spec.rrule
        parts = [f"{spec.kind} '{main}'"]
        parts += [
            f"{extra_kind(item)} '{item.strip()}'" if isinstance(item, str) else repr(item)
            for item in spec.extra
        ]
        return f"{' and '.join(parts)} ({spec.timezone})"
    seconds = spec.interval_seconds
    if spec.kind == "interval" and isinstance(seconds, int) and seconds > 0:
        return f"every {_describe_seconds(seconds)}"
    if spec.kind == "cron":
        return f"cron '{spec.cron}' ({spec.timezone})"
    if spec.kind == "rrule":
        return f"rrule '{spec.rrule}' ({spec.timezone})"
    if spec.kind == "once" and spec.run_at is not None:
        return f"once at {truncate_to_second(spec.run_at):%Y-%m-%d %H:%M:%S} UTC"
    if spec.kind == "manual":
        return MANUAL_WORDS
    if spec.kind == "after":
        return AFTER_WORDS
    return f"{spec.kind} schedule"


def rrule_description(spec: Spec) -> str:
    """The rule of an ``rrule`` spec in English words, with the times it takes from its
    DTSTART spelled out (:func:`.rrule_words.rrule_in_words`: "every 2 weeks on Tuesday at
    09:00"); for a shape that has no words, the rule normalized (``FREQ=YEARLY;BYWEEKNO=1``);
    "" for another kind or a rule that is not valid. Never raises."""
    if spec.kind != "rrule" or not spec.rrule:
        return ""
    try:
        plan = spec.rrule_plan()
    except (InvalidSchedule, ValueError, TypeError, OverflowError, KeyError):
        return ""
    return rrule_in_words(spec.rrule, plan.dtstart) or plan.parts.normalized
