"""The indefinite article of the package's own words, for messages: "an active schedule",
"a once schedule"."""

from __future__ import annotations

#: Words of this package that take "an" (its statuses and kinds; "once" says "wuns").
_AN = frozenset({"active", "interval", "enqueued", "expired", "unknown", "invalid", "open"})


def with_article(word: str) -> str:
    """``word`` with its indefinite article: ``"an active"``, ``"an interval"``,
    ``"a once"``, ``"a paused"`` (for the package's own statuses and kinds)."""
    return f"{'an' if word.split(' ')[0] in _AN else 'a'} {word}"
