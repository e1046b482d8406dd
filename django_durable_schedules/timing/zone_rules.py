"""Which time zone rules this process reads: the tzdata release, and a short identity of
one zone's rules, found where :mod:`zoneinfo` finds them (the directories of
``zoneinfo.TZPATH`` first, then the ``tzdata`` package).

A tzdata update can move a zone's future wall times to other instants (Mexico abolished
DST in tzdata 2022f, Egypt brought it back in 2023c). A schedule's stored ``next_run_at``
was planned under the rules of the process that planned it; the zone identity is part of
its fingerprint (:meth:`.models.definition.DefinitionMixin.compute_definition_hash`), so a
claim under other rules checks the stored instant against the current grid. The release
is recorded in each worker's heartbeat, so health can warn about a fleet whose hosts read
different releases.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.resources
import os
import zoneinfo

from .zones import NOT_SCHEDULE_ZONES, known_zones

#: Hex digits of a zone's rules identity in a fingerprint.
ZONE_RULES_ID_LENGTH = 7


def _tzif_bytes(name: str) -> bytes | None:
    """The TZif data ``zoneinfo.ZoneInfo(name)`` loads, or None when there is none."""
    for directory in zoneinfo.TZPATH:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            try:
                with open(path, "rb") as f:
                    return f.read()
            except OSError:
                return None
    try:
        *folders, resource = name.split("/")
        package = ".".join(["tzdata", "zoneinfo", *folders])
        return importlib.resources.files(package).joinpath(resource).read_bytes()
    except (ImportError, OSError, ValueError):
        return None


@functools.lru_cache(maxsize=1024)
def zone_rules_id(name: str) -> str:
    """A short identity (``ZONE_RULES_ID_LENGTH`` hex digits of SHA-1) of the rules this
    process reads for the IANA zone ``name``: it changes when a tzdata update changes the
    zone's data. ``""`` for UTC, a name that is not a schedule's zone, or data that cannot
    be read. Cached per name (:func:`reload_zone_rules` forgets)."""
    if not isinstance(name, str) or name == "UTC" or name in NOT_SCHEDULE_ZONES:
        return ""
    if name not in known_zones():
        return ""
    data = _tzif_bytes(name)
    if data is None:
        return ""
    return hashlib.sha1(data).hexdigest()[:ZONE_RULES_ID_LENGTH]


def _version_in(directory: str) -> str | None:
    for file, prefix in (("tzdata.zi", "# version "), ("+VERSION", "")):
        try:
            with open(os.path.join(directory, file), encoding="ascii", errors="replace") as f:
                line = f.readline().strip()
        except OSError:
            continue
        if line.startswith(prefix) and line[len(prefix) :].strip():
            return line[len(prefix) :].strip()[:40]
    return None


@functools.cache
def rules_version() -> str:
    """The tzdata release this process's zones come from (``"2025b"``): that of the first
    ``zoneinfo.TZPATH`` directory holding zone files (its ``tzdata.zi`` or ``+VERSION``),
    else that of the ``tzdata`` package; ``"unknown"`` when neither says. At most 40
    characters; cached (:func:`reload_zone_rules` forgets)."""
    for directory in zoneinfo.TZPATH:
        if os.path.isfile(os.path.join(directory, "UTC")) or os.path.isfile(
            os.path.join(directory, "Europe", "Paris")
        ):
            return _version_in(directory) or "unknown"
    try:
        return str(importlib.import_module("tzdata").IANA_VERSION)[:40]
    except (ImportError, AttributeError):
        return "unknown"


def reload_zone_rules() -> None:
    """Forget every cached zone and what was computed from one (``ZoneInfo`` objects, cron
    and calendar-rule plans, zone identities, the release), so that the rules are read
    again, e.g. after ``zoneinfo.reset_tzpath()``. A worker reads them once at start;
    restart workers after a tzdata update instead."""
    from . import cron, cron_plan, rrule, rrule_grid, zones

    zoneinfo.ZoneInfo.clear_cache()
    for cached in (
        zones.zone_info,
        cron_plan.compile_cron,
        cron.plain_day,
        cron.day_instants,
        rrule.cached_rule_plan,
        rrule_grid.cached_grid,
        rrule_grid.grid_run,
        zone_rules_id,
        rules_version,
    ):
        cached.cache_clear()
