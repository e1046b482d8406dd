"""A chain slot that becomes ready while a claim is under way is claimed with an instant
after its upstream ended (the chaos soak's ``chain_ran_before_upstreams`` on PostgreSQL).

Where rows lock (PostgreSQL, MariaDB) a claim takes its instant after its live read, so a
row another worker released is seen only once that commit happened. The chain slots and
the backfill slots are read after that instant: a completion committed in between makes a
slot ready that the claim then takes, and its ``claimed_at`` (the earlier instant) preceded
the upstream's ``finished_at``. They now take the database clock after their own read.
Here the upstream's completion commits, from another connection, just before the claim
reads the chain slots."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection

from django_durable_schedules import state
from django_durable_schedules.models import RunReceipt, Schedule
from django_durable_schedules.state import Outcome, runs

from .factories import complete_elsewhere
from .test_chain_engine import chain, prices

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor == "sqlite", reason="SQLite serialises claims"),
]


def test_a_chain_slot_made_ready_during_a_claim_is_claimed_after_its_upstream_ended(
    monkeypatch,
):
    imported, aggregate, _ = chain()
    past = state.db_now() - timedelta(minutes=1)
    Schedule.objects.filter(pk=imported.pk).update(next_run_at=past)
    (first,) = state.claim_due(worker="w1", limit=1)
    assert first.schedule_name == "import"
    live = prices()  # a live row due: the claim below reads it, and takes its instant then
    Schedule.objects.filter(pk=live.pk).update(next_run_at=past)
    real = runs.chain_reserve

    def upstream_ends_first(*args, **kwargs):
        complete_elsewhere([Outcome(first, "succeeded")])
        return real(*args, **kwargs)

    monkeypatch.setattr(runs, "chain_reserve", upstream_ends_first)
    claims = {c.schedule_name: c for c in state.claim_due(worker="w2")}
    assert set(claims) == {"prices", "aggregate"}
    ended = RunReceipt.objects.get(schedule=imported, status="succeeded").finished_at
    assert claims["aggregate"].claimed_at >= ended
