"""A receipt is built in one place: ``state.records.build_receipt`` sets every field of a
receipt (the value every rule returns and every path inserts); nothing else in the package
constructs a ``Receipt`` or a ``RunReceipt`` row."""

from __future__ import annotations

import ast
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from django_durable_schedules.models import RunAttempt, Schedule
from django_durable_schedules.state.records import (
    ERROR_TYPE_MAX_CHARS,
    NOTED_MESSAGE_MAX_CHARS,
    build_receipt,
)
from django_durable_schedules.state.values import Claim, Failure, Outcome

PACKAGE = Path(__file__).resolve().parent.parent / "django_durable_schedules"
#: The module that builds receipts, and the models that define the row.
BUILDER = "state/records.py"
CONSTRUCTORS = {"Receipt", "RunReceipt"}
NOW = datetime(2027, 6, 1, 10, 0, tzinfo=UTC)


def _constructions(tree: ast.Module):
    """Calls ``Receipt(...)``, ``RunReceipt(...)`` and ``RunReceipt.build(...)``."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in CONSTRUCTORS:
            yield node.lineno
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "build"
            and isinstance(func.value, ast.Name)
            and func.value.id == "RunReceipt"
        ):
            yield node.lineno


def test_only_the_builder_constructs_a_receipt():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(("migrations/", "models/")) or rel == BUILDER:
            continue
        tree = ast.parse(path.read_text(), rel)
        found += [f"{rel}:{line}" for line in _constructions(tree)]
    assert found == []


def _claim(**fields):
    values = dict(
        attempt_id=uuid.uuid4(),
        schedule_id=uuid.uuid4(),
        schedule_name="s",
        callback="cb",
        occurrence=3,
        attempt=2,
        scheduled_for=NOW,
        claimed_at=NOW,
        lease_token=uuid.uuid4(),
        lease_expires_at=NOW,
        idempotency_key="k",
        payload=None,
    )
    return Claim(**{**values, **fields})


def test_the_receipt_of_an_outcome_on_a_row_carries_the_row_after_the_rule():
    claim = _claim()
    row = Schedule(id=claim.schedule_id, failure_count=4, next_run_at=NOW)
    outcome = Outcome(claim, "failed", result={"a": 1}, error_type="E" * 300, error_message="m")
    receipt = build_receipt(claim, "failed", NOW, row=row, ran=outcome, slots_skipped=2)
    assert receipt.attempt_id == claim.attempt_id
    assert (receipt.schedule_id, receipt.occurrence) == (row.id, 3)
    assert (receipt.failure_count_after, receipt.next_run_at) == (4, NOW)
    assert receipt.result == {"a": 1}
    assert receipt.error_type == "E" * ERROR_TYPE_MAX_CHARS
    assert (receipt.error_message, receipt.slots_skipped) == ("m", 2)
    model = receipt.model()
    assert model.error_type == receipt.error_type
    assert model.succeeded_occurrence is None


def test_a_note_is_appended_to_the_message_and_the_whole_bounded():
    claim = _claim()
    failure = Failure.of(claim, "failed", error_type="E", error_message="x" * 2000)
    row = Schedule(id=claim.schedule_id, failure_count=1)
    receipt = build_receipt(failure, "failed", NOW, row=row, ran=failure, note="paused")
    assert len(receipt.error_message) == NOTED_MESSAGE_MAX_CHARS
    assert receipt.error_message.endswith("…")
    alone = build_receipt(claim, "failed", NOW, row=row, note="paused")
    assert alone.error_message == "paused"
    short = build_receipt(claim, "failed", NOW, row=row, error_message="boom", note="paused")
    assert short.error_message == "boom; paused"


def test_without_a_row_the_receipt_names_the_schedule_and_plans_no_next_run():
    attempt = RunAttempt(id=uuid.uuid4(), occurrence=7)
    schedule_id = uuid.uuid4()
    receipt = build_receipt(
        attempt, "succeeded", NOW, schedule_id=schedule_id, failure_count_after=2
    )
    assert (receipt.attempt_id, receipt.schedule_id) == (attempt.id, schedule_id)
    assert (receipt.occurrence, receipt.failure_count_after) == (7, 2)
    assert receipt.next_run_at is None
    assert receipt.model().succeeded_occurrence == 7
    with pytest.raises(TypeError):
        build_receipt(attempt, "failed", NOW)


def test_an_outcome_and_its_fields_are_not_both_given():
    claim = _claim()
    row = Schedule(id=claim.schedule_id)
    with pytest.raises(TypeError):
        build_receipt(claim, "failed", NOW, row=row, ran=Outcome(claim, "failed"), error_type="E")
