"""Time zones: the IANA zone names a schedule may use and their ``ZoneInfo`` (cached)."""

from __future__ import annotations

import functools
from zoneinfo import ZoneInfo, available_timezones

from .errors import InvalidSchedule

# Present in some system zone databases but not IANA zone names a schedule may use: the
# host's own zone and zic's internal defaults.
NOT_SCHEDULE_ZONES = frozenset({"localtime", "posixrules", "Factory"})


@functools.cache
def known_zones() -> frozenset[str]:
    return frozenset(available_timezones()) | {"UTC"}


@functools.cache
def _by_lower_case() -> dict[str, str]:
    return {name.lower(): name for name in known_zones() - NOT_SCHEDULE_ZONES}


def zone_names() -> list[str]:
    """Every IANA zone name a schedule may use, sorted (for choices and completion)."""
    return sorted(known_zones() - NOT_SCHEDULE_ZONES)


def canonical_timezone(name: str) -> str:
    """``name`` in its IANA spelling when it matches one ignoring case and surrounding
    spaces (``' europe/paris'`` -> ``'Europe/Paris'``, ``'utc'`` -> ``'UTC'``); otherwise
    ``name`` unchanged, for :func:`validate_timezone` to refuse. Input is normalised with
    it where it enters (the model, the admin, the API); stored names are canonical."""
    if not isinstance(name, str):
        return name
    return _by_lower_case().get(name.strip().lower(), name)


@functools.lru_cache(maxsize=512)
def zone_info(name: str) -> ZoneInfo:
    """The ``ZoneInfo`` of the IANA name ``name``, cached (:func:`.zone_rules.reload_zone_rules`
    clears it). Raises what ``ZoneInfo`` raises for an unknown name (a ``KeyError``)."""
    return ZoneInfo(name)


def validate_timezone(name: str) -> str:
    """Return ``name`` if it is an IANA time zone name that ``zoneinfo`` can load.

    Typos (``'America/New_Yrok'``), the empty string, case variants (``'utc'``), file
    paths and host-specific entries such as ``'localtime'`` are refused.

    Raises :class:`InvalidSchedule` ``("timezone", "unknown IANA time zone '...'")``.
    """
    message = f"unknown IANA time zone {name!r}"
    if not isinstance(name, str) or name in NOT_SCHEDULE_ZONES or name not in known_zones():
        raise InvalidSchedule("timezone", message)
    try:
        zone_info(name)
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        raise InvalidSchedule("timezone", message) from None
    return name
