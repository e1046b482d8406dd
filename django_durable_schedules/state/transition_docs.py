"""The Markdown of the transition table (:data:`.transitions.TABLE`), as docs/concepts.md
shows it between its markers; :func:`write_docs` rewrites that part of the file
(``scripts/transition-table``)."""

from __future__ import annotations

import re
from pathlib import Path

from ..models import Status
from .transition_table import TABLE
from .transition_terms import ANY, Transition

_FAMILIES = {
    "claim": "Claims (`claim_due`)",
    "outcome": "Outcomes (`complete`, `expire_leases`)",
    "recovery": "Leases and recovery (`renew_leases`, `expire_leases`, `recover_degraded`)",
    "control": "Control actions and edits",
    "alert": "Alerts (`sweep_deadlines`, `complete`, `claim_due`, `expire_leases`)",
}

BEGIN, END = "<!-- transition-table:begin -->", "<!-- transition-table:end -->"
#: The text between the markers (the first line after BEGIN up to END).
BETWEEN = re.compile(f"(?<={re.escape(BEGIN)}\n)(.*?)(?={re.escape(END)})", re.S)
#: docs/concepts.md in a checkout (the package lives beside docs/).
DOC = Path(__file__).resolve().parents[2] / "docs" / "concepts.md"
#: The command that rewrites the docs' table from the code.
REGENERATE = "scripts/transition-table"


def _sources(sources: frozenset[str]) -> str:
    if sources == ANY:
        return "any"
    if not sources:
        return "(new)"
    return ", ".join(s for s in Status.values if s in sources)


def _line(t: Transition) -> str:
    cells = (f"`{t.id}`", _sources(t.sources), t.event, t.target, t.next_run_at, t.receipt)
    return f"| {' | '.join(cells)} |"


def render_markdown() -> str:
    """:data:`TABLE` as the Markdown that docs/concepts.md shows between its markers: one
    table per family, a row per transition, its id first."""
    out: list[str] = []
    for family, title in _FAMILIES.items():
        out += [
            f"**{title}**",
            "",
            "| Row | From | Event | To | `next_run_at` | Receipt |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        out += [_line(t) for t in TABLE if t.family == family]
        out.append("")
    return "\n".join(out)


def shown_in(text: str) -> str:
    """The table ``text`` (a docs page) shows between its markers; raises ``ValueError``
    unless it has each marker once."""
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise ValueError(f"expected {BEGIN} and {END} once each")
    [shown] = BETWEEN.findall(text)
    return str(shown)


def write_docs(path: Path = DOC) -> bool:
    """Rewrite the table between the markers of ``path`` (docs/concepts.md) from the code.
    Returns whether the file changed."""
    text = path.read_text()
    shown_in(text)  # the markers are there, once
    new = BETWEEN.sub(lambda _: render_markdown(), text)
    if new == text:
        return False
    path.write_text(new)
    return True
