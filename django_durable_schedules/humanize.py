"""Values as people read them, shared by the admin and the shell commands."""

from __future__ import annotations


def duration_words(seconds: float | None, empty: str = "-", *, short: bool = False) -> str:
    """``seconds`` as ``0.042 s``, ``12.3 s``, ``4 min 05 s`` or ``2 h 03 min`` (a negative
    value reads as 0; ``empty`` for None: a run that never started). ``short`` (where many
    are shown side by side: the timeline) drops a decimal below a minute: ``0.04 s``,
    ``12 s``."""
    if seconds is None:
        return empty
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.2f} s" if short else f"{seconds:.3f} s"
    if seconds < 60:
        return f"{seconds:.0f} s" if short else f"{seconds:.1f} s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


#: The units :func:`gap_words` counts in, largest first: (name, seconds).
_GAP_UNITS = (("year", 365 * 86400), ("day", 86400), ("hour", 3600), ("minute", 60))


def gap_words(seconds: float) -> str:
    """A gap of ``seconds`` in its largest whole unit: ``3 days``, ``1 year``, ``5 hours``,
    ``2 minutes``, ``45 seconds`` (whole units, rounded down; a negative value reads as 0)."""
    whole = max(0, int(seconds))
    for name, size in _GAP_UNITS:
        if whole >= size:
            count = whole // size
            return f"{count} {name}{'' if count == 1 else 's'}"
    return f"{whole} second{'' if whole == 1 else 's'}"
