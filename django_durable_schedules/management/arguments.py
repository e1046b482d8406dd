"""The argparse types of ``manage.py schedules``: each turns one command-line value into
what a subcommand takes, or refuses it with an ``ArgumentTypeError`` naming the rule
(argparse prints it as a usage error; nothing is written).
"""

from __future__ import annotations

import argparse
from datetime import datetime

from django.core.exceptions import ValidationError
from django.utils.dateparse import parse_datetime

from ..models import pool_validator
from ..models.labels import Label, parse_label
from . import schedule_text

#: The most fire times ``upcoming --count`` lists.
MAX_COUNT = 1000


def count_type(value: str) -> int:
    """``--count`` of ``upcoming``: an integer in [1, MAX_COUNT] (argparse type)."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
    if not 1 <= number <= MAX_COUNT:
        raise argparse.ArgumentTypeError(f"--count must be between 1 and {MAX_COUNT}")
    return number


def pool_type(value: str) -> str:
    """``--pool`` of ``list``: a pool's name (``Schedule.pool``'s rule; argparse type)."""
    try:
        pool_validator(value)
    except ValidationError:
        raise argparse.ArgumentTypeError(
            f"invalid pool {value!r}: {pool_validator.message}"
        ) from None
    return value


def label_type(value: str) -> Label:
    """``--label`` of ``list``: ``key`` or ``key:value`` (:func:`..models.labels.parse_label`;
    argparse type), the parsed ``(key, value)``."""
    try:
        return parse_label(value)
    except ValidationError as error:
        raise argparse.ArgumentTypeError(f"invalid label {value!r}: {error.messages[0]}") from None


def limit_type(value: str) -> int:
    """``--limit`` of ``receipts``: an integer in [1, RECEIPTS_MAX] (argparse type)."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
    if not 1 <= number <= schedule_text.RECEIPTS_MAX:
        raise argparse.ArgumentTypeError(
            f"--limit must be between 1 and {schedule_text.RECEIPTS_MAX}"
        )
    return number


def aware_datetime(value: str) -> datetime:
    """An ISO 8601 instant with a UTC offset (argparse type)."""
    parsed = parse_datetime(value)
    if parsed is None or parsed.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{value!r} is not an ISO 8601 datetime with an offset")
    return parsed
