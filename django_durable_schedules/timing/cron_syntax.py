"""Cron syntax: the macros, the five fields and their accepted values, checked field by
field with messages naming the bad field and token (before cronsim sees the expression)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import InvalidSchedule

#: The ``@`` macros accepted in a cron field, and the 5-field expression each one means.
CRON_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


@dataclass(frozen=True)
class _CronField:
    name: str
    low: int
    high: int
    max_step: int  # a step larger than the field's range is refused
    names: tuple[str, ...] = ()
    name_base: int = 0  # value of names[0]


_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
CRON_FIELDS = (
    _CronField("minute", 0, 59, 60),
    _CronField("hour", 0, 23, 24),
    _CronField("day-of-month", 1, 31, 31),
    _CronField("month", 1, 12, 12, _MONTH_NAMES, 1),
    _CronField("day-of-week", 0, 7, 7, _DAY_NAMES, 0),
)
_DIGITS = re.compile(r"[0-9]+")


def _cron_error(field: _CronField, message: str) -> InvalidSchedule:
    return InvalidSchedule("cron", f"{field.name}: {message}")


def _check_value(field: _CronField, token: str) -> int:
    """The integer a single field value stands for (number or name), or an error."""
    upper = token.upper()
    if field.names and upper in field.names:
        return field.names.index(upper) + field.name_base
    if not _DIGITS.fullmatch(token):
        hint = f" or a name such as {field.names[0]}" if field.names else ""
        raise _cron_error(field, f"{token!r} is not a number{hint}")
    value = int(token)
    if not field.low <= value <= field.high:
        raise _cron_error(field, f"{token!r} is out of range {field.low}-{field.high}")
    return value


def _check_step(field: _CronField, item: str, step: str) -> None:
    if not _DIGITS.fullmatch(step):
        raise _cron_error(field, f"step {step!r} in {item!r} is not a number")
    if int(step) == 0:
        raise _cron_error(field, f"step 0 in {item!r} is not allowed (steps start at 1)")
    if int(step) > field.max_step:
        raise _cron_error(
            field,
            f"step {int(step)} in {item!r} is larger than the field range "
            f"{field.low}-{field.high if field.name != 'day-of-week' else 6} "
            "(steps restart every period; use an interval schedule for 'every N')",
        )


def _check_range_or_value(field: _CronField, item: str, base: str) -> None:
    if base == "*":
        return
    if "-" in base:
        first, _, last = base.partition("-")
        if _check_value(field, first) > _check_value(field, last):
            raise _cron_error(
                field, f"range {item!r} runs backwards (wrap-around ranges are not supported)"
            )
        return
    _check_value(field, base)


def _check_day_of_month_extension(field: _CronField, item: str) -> bool:
    """True if ``item`` is an accepted day-of-month extension (L, LW); error if it is an
    extension cronsim does not evaluate (nW, L-n, nL, L/n ...)."""
    upper = item.upper()
    if upper in ("L", "LW"):
        return True
    if "W" in upper:
        raise _cron_error(
            field,
            f"{item!r} (nearest weekday) is not supported; only 'LW' (last weekday of "
            "the month) is",
        )
    if "L" in upper:
        raise _cron_error(
            field,
            f"{item!r} is not supported; use 'L' (last day of the month) or 'LW' "
            "(last weekday of the month)",
        )
    return False


def _check_day_of_week_extension(field: _CronField, item: str) -> bool:
    """True if ``item`` is an accepted day-of-week extension (nL, n#k); error for the
    L forms cronsim does not evaluate."""
    upper = item.upper()
    if "#" in upper:
        day, _, nth = upper.partition("#")
        _check_value(field, day)
        if not _DIGITS.fullmatch(nth) or not 1 <= int(nth) <= 5:
            raise _cron_error(field, f"{item!r}: the occurrence after '#' must be 1-5")
        return True
    if "L" in upper:
        if upper.endswith("L") and _DIGITS.fullmatch(upper[:-1]):
            _check_value(field, upper[:-1])
            return True
        raise _cron_error(
            field,
            f"{item!r} is not supported; write the last weekday of the month as its "
            "number followed by L, e.g. '5L' for the last Friday",
        )
    return False


def check_item(field: _CronField, item: str) -> None:
    """Validate one comma-separated item of a field; raise InvalidSchedule naming both."""
    if item == "":
        raise _cron_error(field, "empty list item (check the commas)")
    if "?" in item:
        raise _cron_error(field, f"{item!r}: '?' is not supported; use '*'")
    if field.name == "day-of-month" and _check_day_of_month_extension(field, item):
        return
    if field.name == "day-of-week" and _check_day_of_week_extension(field, item):
        return
    base, slash, step = item.partition("/")
    if slash:
        _check_step(field, item, step)
    _check_range_or_value(field, item, base)


def expand_cron(expr: str) -> tuple[str, str]:
    """(normalized, five-field expansion) of a cron expression, or InvalidSchedule."""
    if not isinstance(expr, str) or not expr.strip():
        raise InvalidSchedule("cron", "cron expression is empty")
    words = expr.split()
    if words[0].startswith("@"):
        macro = words[0].lower()
        if macro == "@reboot":
            raise InvalidSchedule(
                "cron", "'@reboot' is not supported: a schedule needs a time of day"
            )
        if macro not in CRON_MACROS or len(words) != 1:
            raise InvalidSchedule(
                "cron",
                f"unknown cron macro {expr.strip()!r}; use one of {', '.join(CRON_MACROS)}",
            )
        return macro, CRON_MACROS[macro]
    if len(words) != 5:
        raise InvalidSchedule(
            "cron",
            "a cron expression has 5 fields (minute hour day-of-month month day-of-week), "
            f"got {len(words)}",
        )
    normalized = " ".join(words)
    return normalized, normalized


def is_wildcard_cron(expr: str) -> bool:
    """True when the minute or the hour field starts with ``*``.

    Macros count as their expansion: ``@hourly`` (``0 * * * *``) is a wildcard job, the
    others are fixed-time. Wildcard jobs fire at every real instant whose local reading
    matches; fixed-time jobs fire once per wall-clock match.
    Raises :class:`InvalidSchedule` ``("cron", ...)`` when ``expr`` has no 5 fields.
    """
    minute, hour = expand_cron(expr)[1].split()[:2]
    return minute.startswith("*") or hour.startswith("*")
