"""The Markdown of the transition table (:data:`.transitions.TABLE`), as docs/concepts.md
shows it between its markers."""

from __future__ import annotations

from ..models import Status
from .transitions import ANY, TABLE

_FAMILIES = {
    "claim": "Claims (`claim_due`)",
    "outcome": "Outcomes (`complete`, `expire_leases`)",
    "control": "Control actions and edits",
}


def _sources(sources: frozenset[str]) -> str:
    if sources == ANY:
        return "any"
    if not sources:
        return "(new)"
    return ", ".join(s for s in Status.values if s in sources)


def render_markdown() -> str:
    """:data:`TABLE` as the Markdown that docs/concepts.md shows between its markers."""
    out: list[str] = []
    for family, title in _FAMILIES.items():
        out += [
            f"**{title}**",
            "",
            "| From | Event | To | `next_run_at` | Receipt |",
            "| --- | --- | --- | --- | --- |",
        ]
        out += [
            f"| {_sources(t.sources)} | {t.event} | {t.target} | {t.next_run_at} | {t.receipt} |"
            for t in TABLE
            if t.family == family
        ]
        out.append("")
    return "\n".join(out)
