"""How the admin shows things: instants in the schedule's zone and in UTC, outcomes (a
coloured label, the strip of the last :data:`STRIP_LENGTH`, the legend), status badges, the
cadence in words, the lists of names in action messages, the admin's stylesheet, and
``_safe_reverse`` (a URL, or None where the site has no such page).

The HTML is in templates, ``templates/durable_schedules/admin/fragments/``: each helper
here that returns markup builds its template's context and renders it
(:func:`render_fragment`); the text formatters (``fmt_utc``, ``fmt_zone``, ...) return plain
text. The template tag library :mod:`..templatetags.durable_schedules_admin` renders the
same helpers inside templates.

Pure formatting, no queries of their own (``_attempt_outcome`` reads an attempt's receipt,
which its callers select with the attempt).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.contrib.admin.utils import quote
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator
from django.utils.timesince import timesince, timeuntil

from .. import timing
from ..cron_words import cron_in_words
from ..models import ReceiptStatus, RunAttempt, RunReceipt, Schedule

#: Outcomes in the strip of the schedule list and change page.
STRIP_LENGTH = 20
#: Names listed in one action message before "and N more".
MESSAGE_NAMES = 10

_CSS = {"all": ["durable_schedules/admin.css"]}
_EMPTY = "—"
#: The folder of the admin's HTML fragments.
FRAGMENTS = "durable_schedules/admin/fragments/"


def render_fragment(name: str, context: Mapping[str, Any]) -> SafeString:
    """The fragment template ``FRAGMENTS/<name>.html`` rendered with ``context``, without
    the whitespace around it (its header comment's line break, its final newline)."""
    return mark_safe(render_to_string(f"{FRAGMENTS}{name}.html", dict(context)).strip())


def _zone(name: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def _is_utc(name: str | None) -> bool:
    return (name or "UTC") in ("UTC", "Etc/UTC", "Etc/UCT", "UCT", "Universal", "Zulu")


def fmt_utc(value: datetime | None) -> str:
    """``2027-06-01 10:00:00 UTC`` (or a dash)."""
    if value is None:
        return _EMPTY
    return f"{value.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def fmt_zone(value: datetime, zone_name: str | None) -> str:
    """``2027-06-01 12:00:00 CEST``: the instant as read in the schedule's zone."""
    local = value.astimezone(_zone(zone_name))
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}"


def _relative(value: datetime, now: datetime) -> str:
    if value <= now:
        return f"{timesince(value, now)} ago" if (now - value).total_seconds() >= 60 else "now"
    return f"in {timeuntil(value, now)}" if (value - now).total_seconds() >= 60 else "now"


def _plural(n: int, word: str = "schedule") -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _names(items: Sequence[str]) -> str:
    shown = "; ".join(items[:MESSAGE_NAMES])
    if len(items) > MESSAGE_NAMES:
        shown += f"; and {len(items) - MESSAGE_NAMES} more"
    return shown


def _receipt_title(receipt: RunReceipt, zone: str | None = None) -> str:
    """``#12 failed · <finished, in the schedule's zone and UTC> · <error>``."""
    finished = fmt_utc(receipt.finished_at)
    if not _is_utc(zone) and receipt.finished_at is not None:
        finished = f"{fmt_zone(receipt.finished_at, zone)} ({finished})"
    title = f"#{receipt.occurrence} {receipt.get_status_display()} · {finished}"
    if receipt.error_type or receipt.error_message:
        error = ": ".join(p for p in (receipt.error_type, receipt.error_message) if p)
        title += f" · {Truncator(error).chars(160)}"
    return title


def outcome_strip(
    receipts: Sequence[RunReceipt],
    *,
    link: str | None = None,
    length: int = STRIP_LENGTH,
    large: bool = False,
    zone: str | None = None,
) -> SafeString:
    """The last ``length`` outcomes as coloured marks, oldest left, newest right.

    ``receipts`` are newest first (as fetched). Each mark has the status in its colour
    *and* in its title (hover) and accessible label; empty slots are outlined. ``link`` is a
    receipt change URL with ``{}`` where the receipt id goes.
    """
    recent = list(receipts[:length])
    counts: dict[str, int] = {}
    for r in recent:
        counts[r.get_status_display()] = counts.get(r.get_status_display(), 0) + 1
    summary = ", ".join(f"{n} {label}" for label, n in counts.items()) or "no runs yet"
    marks = [
        {
            "status": r.status,
            "title": _receipt_title(r, zone),
            "url": link.replace("{}", quote(str(r.pk))) if link else None,
        }
        for r in reversed(recent)
    ]
    return render_fragment(
        "outcome_strip",
        {
            "large": large,
            "count": len(recent),
            "summary": summary,
            "empty_slots": range(length - len(recent)),
            "marks": marks,
        },
    )


def outcome_label(status: str, label: str | None = None) -> SafeString:
    """A coloured dot and the outcome's name."""
    return render_fragment(
        "outcome_label", {"status": status, "label": label or ReceiptStatus(status).label}
    )


def status_badges(obj: Schedule) -> SafeString:
    """The status as a coloured badge, plus "running" (lease held) and "degraded"."""
    return render_fragment(
        "status_badges",
        {
            "schedule": obj,
            "title": obj.pause_reason or obj.get_status_display(),
            "running": obj.lease_token is not None,
            "lease_until": fmt_utc(obj.lease_expires_at),
        },
    )


def _when(value: datetime | None, zone_name: str | None, *, now: datetime) -> SafeString:
    """An instant in the schedule's zone and, below it, in UTC (once if the zone is UTC)."""
    if value is None:
        return SafeString(_EMPTY)  # a dash, no markup
    utc_only = _is_utc(zone_name)
    return render_fragment(
        "when",
        {
            "hint": f"{zone_name or 'UTC'} · {_relative(value, now)}",
            "local": None if utc_only else fmt_zone(value, zone_name),
            "utc": fmt_utc(value),
        },
    )


def cadence(obj: Schedule) -> SafeString | str:
    """``every 5 minutes``; for cron the expression and its zone, with the expression in
    words below it (``At 09:00, Monday through Friday``, :func:`..cron_words.cron_in_words`);
    for rrule the rule and its zone, with the rule in words (:func:`..timing.rrule_description`)."""
    try:
        text = timing.describe(obj.spec())
    except (timing.InvalidSchedule, ValueError, TypeError):
        return f"{obj.kind} schedule"
    words = cron_in_words(obj.cron) if obj.kind == "cron" else ""
    if obj.kind == "rrule":
        words = timing.rrule_description(obj.spec())
    if not words:
        return text
    return render_fragment("cadence", {"text": text, "words": words})


def _attempt_outcome(obj: RunAttempt) -> SafeString | str:
    try:
        receipt = obj.receipt
    except RunReceipt.DoesNotExist:
        return render_fragment("outcome_label", {"open": True})
    return outcome_label(receipt.status)


def _safe_reverse(name: str, current_app: str) -> str | None:
    try:
        return reverse(name, current_app=current_app)
    except NoReverseMatch:
        return None


def _legend() -> list[SafeString]:
    return [outcome_label(value, label) for value, label in ReceiptStatus.choices]
