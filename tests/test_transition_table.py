"""The transition table in code is the one docs/concepts.md shows, and the one the operator
actions are driven by (``state.control.ALLOWED``).

``DDS_WRITE_DOCS=1`` rewrites the docs' table from the code instead of comparing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from django_durable_schedules.models import Status
from django_durable_schedules.state import control, transitions

DOC = Path(__file__).resolve().parent.parent / "docs" / "concepts.md"
BEGIN, END = "<!-- transition-table:begin -->", "<!-- transition-table:end -->"
BETWEEN = re.compile(f"(?<={re.escape(BEGIN)}\n)(.*?)(?={re.escape(END)})", re.S)


def test_the_docs_show_the_codes_table():
    text = DOC.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    rendered = transitions.render_markdown()
    if os.environ.get("DDS_WRITE_DOCS"):
        DOC.write_text(BETWEEN.sub(lambda _: rendered, text))
        text = DOC.read_text()
    [shown] = BETWEEN.findall(text)
    assert shown == rendered, "run DDS_WRITE_DOCS=1 pytest tests/test_transition_table.py"


def test_the_control_rows_are_the_allowed_source_statuses():
    rows = {t.action: t.sources for t in transitions.TABLE if t.action}
    assert rows == control.ALLOWED
    assert set(control.ALREADY) <= set(control.ALLOWED)


def test_every_row_is_well_formed():
    families = {"claim", "outcome", "control"}
    seen = set()
    for t in transitions.TABLE:
        assert t.family in families and t.sources <= set(Status.values)
        # Only the creation row starts from no status (the row does not exist yet).
        assert t.sources or (t.family, t.event.split()[0]) == ("control", "create")
        assert (t.family, t.event) not in seen, t.event
        seen.add((t.family, t.event))
        assert "|" not in t.event + t.target + t.next_run_at + t.receipt
    assert {t.family for t in transitions.TABLE} == families


def test_allowed_actions_reads_the_table():
    from django_durable_schedules.models import Schedule

    for status in Status.values:
        for lease in (None, "held"):
            row = Schedule(status=status)
            row.lease_token = lease  # an unsaved row: only status and lease are read
            expected = {
                action
                for action, sources in control.ALLOWED.items()
                if status in sources and not (lease and action in control.NOT_WHILE_RUNNING)
            }
            assert control.allowed_actions(row) == expected
    assert control.allowed_actions(Schedule(status=Status.ACTIVE)) == {
        "disable",
        "trigger",
        "cancel",
        "delete",
    }
