"""The column lists of the claim and the completion name each column once (a column named
twice is an ambiguous batch UPDATE on PostgreSQL; two branches adding the same column
merged into one list once did exactly that)."""

from __future__ import annotations

from django_durable_schedules.models import Schedule
from django_durable_schedules.state.columns import CLAIM_FIELDS, FINISH_FIELDS


def test_each_column_list_names_each_column_once():
    for columns in (CLAIM_FIELDS, FINISH_FIELDS):
        assert len(set(columns)) == len(columns), sorted(c for c in columns if columns.count(c) > 1)


def test_each_listed_column_is_a_schedule_column():
    names = {f.name for f in Schedule._meta.concrete_fields}
    assert set(CLAIM_FIELDS) <= names and set(FINISH_FIELDS) <= names
