"""A row a claim locks after it read its instant is claimed with an instant after that lock
(the chaos soak's ``parallel_claims_over_max`` on PostgreSQL, ``chaos-par-2``).

Where rows lock (PostgreSQL, MariaDB) a claim takes its instant after its live read, so a
row another worker completed is seen only once that commit happened
(tests/test_chain_claim_clock.py for the chain and backfill slots). When the head of the
batch is held back (an ``allow`` row at its ``max_parallel``, a full concurrency group) the
claim reads more due rows to fill the places, after that instant: an occurrence of such a
row that ended in between, from another worker, is seen ended (its lease gone) and a new
one admitted in its place, but under the earlier instant its ``claimed_at`` preceded the
ended one's ``finished_at``: the engine's own records then showed ``max_parallel`` + 1
occurrences leased at once, though never more than ``max_parallel`` ran. Here the
occurrence ends, from another connection, just before the claim reads the rows that fill
its batch."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection

from django_durable_schedules import state
from django_durable_schedules.models import OccurrenceLease, RunReceipt, Schedule
from django_durable_schedules.state import Outcome, runs

from .factories import complete_elsewhere
from .test_parallel import make

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor == "sqlite", reason="SQLite serialises claims"),
]


def due(*rows):
    past = state.db_now() - timedelta(minutes=1)
    Schedule.objects.filter(pk__in=[r.pk for r in rows]).update(next_run_at=past)


def test_a_row_read_to_fill_a_held_back_place_is_claimed_after_what_ended_before_its_lock(
    monkeypatch,
):
    full = make(
        "full", 1, priority=10, interval_seconds=3600
    )  # the head of the batch, held at its limit
    other = make("other", 2, priority=0, interval_seconds=3600)  # read to fill its place
    due(full, other)
    first = {c.schedule_name: c for c in state.claim_due(worker="w1")}
    due(other)
    (second,) = state.claim_due(worker="w1")
    assert second.schedule_name == "other"
    due(full, other)
    assert OccurrenceLease.objects.filter(schedule=other).count() == 2
    real = runs._read_due
    reads = []

    def ended_before_the_fill(*args, **kwargs):
        reads.append(args)
        if len(reads) == 2:  # the read that fills the held-back place
            complete_elsewhere([Outcome(first["other"], "succeeded")])
        return real(*args, **kwargs)

    monkeypatch.setattr(runs, "_read_due", ended_before_the_fill)
    claims = state.claim_due(worker="w2", limit=1)
    assert len(reads) >= 2
    assert Schedule.objects.get(pk=full.pk).parallel_full_until is not None
    ended = RunReceipt.objects.filter(attempt_id=first["other"].attempt_id).first()
    if ended is None:  # MariaDB: the claim's locking scan passed the row, the completion
        assert claims == []  # waited for it (deferred), so both occurrences still run
        assert OccurrenceLease.objects.filter(schedule=other).count() == 2
        return
    (third,) = claims
    assert third.schedule_name == "other"
    assert third.claimed_at >= ended.finished_at
