"""What ``manage.py schedules show`` and ``schedules receipts`` print: one schedule's
definition, state, next fire times, run in flight and latest receipts, and a schedule's
receipts with their durations and tracebacks. Plain text lines (the command writes them);
read-only, and every value shown is bounded as it is read (a row written behind ``save()``
prints, it never raises). It also holds the text the other subcommands share: instants
(:func:`utc`, :func:`in_zone`) and a ``ValidationError``'s messages (:func:`field_messages`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from zoneinfo import ZoneInfo

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from .. import timing
from ..cron_words import schedule_description, schedule_in_words
from ..humanize import duration_words
from ..models import ReceiptStatus, RunReceipt, Schedule
from ..projection import bound_text, format_traceback, result_preview
from ..running import running_attempt, running_count
from ..state.overlap_rules import queued_behind
from ..state.previous_rules import previous_of
from ..stats import schedule_stats
from ..stats_math import stats_rows

#: Fire times and receipts ``show`` lists.
SHOW_COUNT = 5
#: Default and largest ``--limit`` of ``receipts``.
RECEIPTS_LIMIT = 20
RECEIPTS_MAX = 1000
#: The longest error message a receipt line prints (characters).
MESSAGE_CHARS = 500
#: Characters of the last success's result ``show`` prints (the rest is cut).
PREVIOUS_RESULT_CHARS = 500


def check_status(value: str | None) -> str | None:
    """``value`` if it is a receipt status (or None); raises :class:`CommandError` naming
    the statuses otherwise."""
    if value is None or value in ReceiptStatus.values:
        return value
    raise CommandError(
        f"unknown receipt status {value!r}: use one of {', '.join(ReceiptStatus.values)}"
    )


def utc(value: datetime | None) -> str:
    """``2027-06-01T10:00:00Z`` (``-`` for None)."""
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if isinstance(value, datetime) else "-"


def in_zone(value: datetime | None, zone_name: str | None) -> str:
    """An instant in the schedule's zone and in UTC (``... JST · ...Z``; UTC once)."""
    if not isinstance(value, datetime):
        return "-"
    try:
        zone = ZoneInfo(timing.validate_timezone(zone_name or "UTC"))
    except timing.InvalidSchedule:
        return utc(value)
    if zone.key == "UTC":
        return utc(value)
    return f"{value.astimezone(zone):%Y-%m-%d %H:%M:%S %Z} · {utc(value)}"


def field_messages(exc: ValidationError) -> str:
    """``field: message`` pairs of a ``ValidationError`` (bare messages when it has none,
    and for ``__all__``)."""
    if not hasattr(exc, "error_dict"):
        return " ".join(exc.messages)
    return "; ".join(
        " ".join(messages) if field == "__all__" else f"{field}: {' '.join(messages)}"
        for field, messages in exc.message_dict.items()
    )


def duration(seconds: float | None) -> str:
    """``0.004 s``, ``12.3 s``, ``4 min 05 s``, ``2 h 03 min``; ``-`` when it never ran."""
    return duration_words(seconds)


def _describe(schedule: Schedule) -> str:
    try:
        return schedule_description(schedule)
    except (timing.InvalidSchedule, ValueError, OverflowError):
        return "(invalid definition)"


def receipt_line(receipt: RunReceipt) -> str:
    """One receipt: run, status, finish, duration, error (bounded)."""
    number = f"#{receipt.occurrence}.{receipt.attempt.attempt}"
    error = ": ".join(p for p in (receipt.error_type, receipt.error_message) if p)
    line = (
        f"{number:10} {receipt.status:13} finished {utc(receipt.finished_at)}"
        f"  took {duration(receipt.duration_seconds)}"
    )
    return f"{line}  {bound_text(error, MESSAGE_CHARS)}" if error else line


def blackout_line(schedule: Schedule) -> str:
    """``show``'s line of the schedule's blackout windows (one query): their names, its
    ``blackout_policy``, the slots blacked out so far and a deferred run waiting; ``none``."""
    names = [w.name for w in schedule.blackout_windows.order_by("name")]
    if not names:
        return "  blackout windows: none"
    line = (
        f"  blackout windows: {', '.join(names)} (policy {schedule.blackout_policy}); "
        f"{schedule.blackout_count} slots blacked out so far"
    )
    if schedule.blackout_deferred:
        line += f", {schedule.blackout_deferred} deferred to the next run"
    return line


def chain_lines(schedule: Schedule) -> Iterator[str]:
    """``show``'s lines of the schedule's chain (two queries): the schedules it runs after,
    with its ``wait_seconds`` (kind ``after``), and those that run after it; none for a
    schedule with neither."""
    ups = list(schedule.upstream.order_by("name").values_list("name", flat=True))
    downs = list(schedule.downstream.order_by("name").values_list("name", flat=True))
    if schedule.kind == "after" or ups:
        yield (
            f"  runs after: {', '.join(ups) or 'none'} "
            f"(wait_seconds={schedule.wait_seconds}: an instant they have not all succeeded "
            "for by then is counted missed)"
        )
    if downs:
        yield f"  before: {', '.join(downs)}"


def show_lines(schedule: Schedule) -> Iterator[str]:
    """``schedules show NAME``: definition, state (its blackout windows and policy among
    it), the next :data:`SHOW_COUNT` fire times, the run in flight, the latest
    :data:`SHOW_COUNT` receipts and the statistics (:func:`stats_lines`)."""
    yield f"{schedule.name}: {_describe(schedule)}"
    words = schedule_in_words(schedule)
    if words:
        yield f"  in words: {words}"
    yield f"  callback: {schedule.callback}"
    yield f"  kind: {schedule.kind}, time zone: {schedule.timezone or 'UTC'}"
    yield f"  pool: {bound_text(str(schedule.pool), 64)}, priority: {schedule.priority}"
    policies = [
        f"max_attempts={schedule.max_attempts}",
        f"overlap={schedule.overlap_policy}",
        f"blackout={schedule.blackout_policy}",
    ]
    if schedule.overlap_policy == "allow":
        policies.append(f"max_parallel={schedule.max_parallel}")
    if schedule.timeout_seconds:
        policies.append(f"timeout_seconds={schedule.timeout_seconds}")
    yield f"  policies: {', '.join(policies)}"
    yield blackout_line(schedule)
    yield from chain_lines(schedule)
    if schedule.concurrency_group_id is not None:
        yield group_line(schedule)
    yield f"  status: {schedule.status}"
    for label, why in (("degraded", schedule.degraded_reason), ("paused", schedule.pause_reason)):
        if why:
            yield f"    {label}: {bound_text(why, MESSAGE_CHARS)}"
    if schedule.status == "paused" and schedule.paused_until is not None:
        yield f"    paused until: {in_zone(schedule.paused_until, schedule.timezone)}"
    yield f"  next run: {in_zone(schedule.next_run_at, schedule.timezone)}"
    if schedule.buffered_for is not None:
        last = queued_behind(schedule)
        queue = f", then the queue through {in_zone(last, schedule.timezone)}" if last else ""
        yield f"    buffered: the slot {in_zone(schedule.buffered_for, schedule.timezone)} runs next{queue}"
    yield f"  last run: {in_zone(schedule.last_run_at, schedule.timezone)}"
    yield from previous_lines(schedule)
    yield (
        f"  occurrence {schedule.occurrence}, attempt {schedule.attempt}; "
        f"{schedule.failure_count} consecutive failures, {schedule.missed_count} missed, "
        f"{schedule.excluded_count} excluded"
    )
    run = running_attempt(schedule)
    if run is None:
        yield "running: no"
    else:
        count = running_count(schedule)
        oldest = "the oldest of " if schedule.lease_token is None else ""
        of = f" ({oldest}{count} running)" if count > 1 else ""
        yield (
            f"running: #{run.occurrence}.{run.attempt} since {utc(run.claimed_at)} "
            f"on {run.worker}{of}"
        )
    yield f"next {SHOW_COUNT} fire times:"
    yield from _upcoming(schedule)
    recent = list(receipts_of(schedule, limit=SHOW_COUNT))
    yield f"last {SHOW_COUNT} receipts (newest first):" if recent else "no receipts yet"
    for receipt in recent:
        yield f"  {receipt_line(receipt)}"
    yield from stats_lines(schedule)


def previous_lines(schedule: Schedule) -> Iterator[str]:
    """``show``'s lines of the last successful run, as its callback reads it
    (``ctx.previous``, from the row: no query): occurrence, nominal instant (its zone and
    UTC), finish (UTC) and the result as JSON cut to :data:`PREVIOUS_RESULT_CHARS`
    characters; ``none yet`` before the first success."""
    found = previous_of(schedule)
    if found is None:
        yield "  last success (ctx.previous): none yet"
        return
    yield (
        f"  last success (ctx.previous): #{found.occurrence} for the slot "
        f"{in_zone(found.scheduled_for, schedule.timezone)}, finished {utc(found.finished_at)}"
    )
    result, truncated = result_preview(found.result, PREVIOUS_RESULT_CHARS)
    yield f"    result{' (cut)' if truncated else ''}: {result}"


def stats_lines(schedule: Schedule) -> Iterator[str]:
    """``show``'s statistics (:func:`..stats.schedule_stats`, three queries): one line per
    figure, its value over the last 24 h and the last 7 d, and the bound of the
    percentiles."""
    stats = schedule_stats(schedule.pk)
    yield (
        f"statistics (seconds; percentiles over the latest {stats.sample_limit} "
        "receipts of each window):"
    )
    yield f"  {'':14}{'last 24 h':>16}{'last 7 d':>16}"
    for label, values in stats_rows(list(stats.windows.values())):
        yield f"  {label:14}" + "".join(f"{v:>16}" for v in values)


def group_line(schedule: Schedule) -> str:
    """``show``'s line for a schedule's concurrency group: its name and limits."""
    group = schedule.concurrency_group
    assert group is not None
    cap = f"max {group.max_running} at once" if group.max_running else "no cap"
    return f"  concurrency group: {group.name} ({cap}, {group.rate or 'no rate'})"


def _upcoming(schedule: Schedule) -> Iterator[str]:
    try:
        views = schedule.upcoming_slots(SHOW_COUNT)
    except timing.InvalidSchedule as exc:  # a definition made invalid behind save()
        yield f"  (the stored definition is invalid: {bound_text(str(exc), MESSAGE_CHARS)})"
        return
    shown = [v for v in views if v.fires]
    if not shown:
        yield "  none"
    for view in shown:
        yield f"  {in_zone(view.at, schedule.timezone)}"


def receipts_of(
    schedule: Schedule, status: str | None = None, limit: int = RECEIPTS_LIMIT
) -> Iterable[RunReceipt]:
    """The schedule's receipts, newest first (``status``: only those), at most ``limit``:
    one query on the receipts' (schedule, finished_at) index."""
    receipts = RunReceipt.objects.filter(schedule_id=schedule.pk).select_related("attempt")
    if status is not None:
        receipts = receipts.filter(status=status)
    return receipts.order_by("-finished_at", "-occurrence")[:limit]


def receipts_lines(schedule: Schedule, status: str | None, limit: int) -> Iterator[str]:
    """``schedules receipts NAME``: each receipt (:func:`receipt_line`) with its start,
    and a failed one's traceback as Python prints it (files, lines, functions; never a
    variable's value)."""
    found = False
    for receipt in receipts_of(schedule, status, limit):
        found = True
        yield receipt_line(receipt)
        yield f"  started {utc(receipt.started_at)}, worker {receipt.attempt.worker}"
        lines = format_traceback(receipt.traceback)
        if lines:
            yield "  Traceback (most recent call last):"
            for line in lines:
                yield f"    {line}"
            error = ": ".join(p for p in (receipt.error_type, receipt.error_message) if p)
            yield f"  {bound_text(error, MESSAGE_CHARS)}"
    if not found:
        which = f" with status {status}" if status else ""
        yield f"{schedule.name}: no receipts{which}"
