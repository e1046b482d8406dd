"""Values as people read them, shared by the admin and the shell commands."""

from __future__ import annotations


def duration_words(seconds: float | None, empty: str = "-") -> str:
    """``seconds`` as ``0.042 s``, ``12.3 s``, ``4 min 05 s`` or ``2 h 03 min`` (a negative
    value reads as 0; ``empty`` for None: a run that never started)."""
    if seconds is None:
        return empty
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.3f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
