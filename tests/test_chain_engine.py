"""Chaining through the engine's own transactions (issue #30 item 1): ``claim_due`` and
``complete`` in process, on every database. A three-step chain import -> aggregate -> mail
(kinds interval, after, after) runs each step once per success of the step before, in
order, with the upstream's nominal instant; an upstream that fails leaves the downstream
instants counted ``missed`` with the reason once ``wait_seconds`` passed."""

from __future__ import annotations

from datetime import timedelta

import pytest

from django_durable_schedules import state
from django_durable_schedules.models import (
    ChainSlot,
    ChainSlotStatus,
    RunReceipt,
    Schedule,
    ScheduleLink,
)
from django_durable_schedules.state import Outcome

from .factories import T0

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)
H = timedelta(hours=1)


def _save(row: Schedule) -> Schedule:
    row.full_clean()
    row.save()
    return row


def chain(wait: int = 3600) -> tuple[Schedule, Schedule, Schedule]:
    """import (hourly from T0) -> aggregate -> mail, each after the one before."""
    a = _save(
        Schedule(
            name="import",
            callback="tests.noop",
            kind="interval",
            interval_seconds=3600,
            timezone="UTC",
            start_at=T0,
            max_attempts=2,
            backoff_base_seconds=1,
            backoff_cap_seconds=1,
        )
    )
    b = _save(Schedule(name="aggregate", callback="tests.noop", kind="after", wait_seconds=wait))
    c = _save(Schedule(name="mail", callback="tests.noop", kind="after", wait_seconds=2 * wait))
    ScheduleLink.objects.create(downstream=b, upstream=a)
    ScheduleLink.objects.create(downstream=c, upstream=b)
    return a, b, c


def prices() -> Schedule:
    """A second hourly upstream on import's grid."""
    return _save(
        Schedule(
            name="prices",
            callback="tests.noop",
            kind="interval",
            interval_seconds=3600,
            timezone="UTC",
            start_at=T0,
        )
    )


def run(now, status="succeeded", **outcome):
    """One claim pass at ``now`` and the outcome ``status`` for every claim: the names and
    nominal instants claimed."""
    claims = state.claim_due(worker="w", now=now)
    state.complete([Outcome(c, status, **outcome) for c in claims], now=now + S)
    return [(c.schedule_name, c.scheduled_for) for c in claims]


def test_an_after_schedule_is_never_due_by_itself() -> None:
    a, b, c = chain()
    assert b.next_run_at is None and b.status == "active"
    assert b.upcoming(3) == []


def test_each_step_runs_once_per_success_of_the_one_before_in_order() -> None:
    a, b, c = chain()
    seen = []
    for hour in range(3):
        slot = T0 + hour * H
        seen += run(slot)  # import
        seen += run(slot + 2 * S)  # aggregate, now ready
        seen += run(slot + 4 * S)  # mail
        seen += run(slot + 6 * S)  # nothing more
    assert seen == [
        (name, T0 + hour * H) for hour in range(3) for name in ("import", "aggregate", "mail")
    ]
    assert set(ChainSlot.objects.values_list("status", flat=True)) == {ChainSlotStatus.RUN}
    b.refresh_from_db()
    assert (b.occurrence, b.missed_count, b.next_run_at, b.status) == (3, 0, None, "active")


def test_a_downstream_never_runs_before_its_upstream_succeeded() -> None:
    a, b, c = chain()
    claims = state.claim_due(worker="w", now=T0)  # import runs, not yet finished
    assert [cl.schedule_name for cl in claims] == ["import"]
    assert state.claim_due(worker="w", now=T0 + 10 * S) == []  # aggregate waits
    state.complete([Outcome(claims[0], "succeeded")], now=T0 + 20 * S)
    assert [cl.schedule_name for cl in state.claim_due(worker="w", now=T0 + 30 * S)] == [
        "aggregate"
    ]


def test_a_retried_upstream_drives_the_same_downstream_instant() -> None:
    a, b, c = chain()
    assert run(T0, "failed", error_type="Boom") == [("import", T0)]
    assert run(T0 + 5 * S) == [("import", T0)]  # attempt 2 of the same occurrence
    assert run(T0 + 10 * S) == [("aggregate", T0)]


def test_an_upstream_that_fails_leaves_the_downstream_instants_missed_after_the_wait() -> None:
    a, b, c = chain(wait=600)
    run(T0, "failed", error_type="Boom")
    run(T0 + 5 * S, "failed", error_type="Boom")  # its last attempt: the occurrence failed
    assert run(T0 + 599 * S) == []  # aggregate's wait is not over
    assert run(T0 + 600 * S) == []  # over: counted, nothing runs
    missed = RunReceipt.objects.filter(schedule__name="aggregate").get()
    assert missed.status == "missed" and missed.error_type == "UpstreamNotDone"
    assert "within wait_seconds=600 (0 had)" in missed.error_message
    assert not RunReceipt.objects.filter(schedule__name="mail").exists()
    run(T0 + 1200 * S)  # mail's own wait (1,200 s) is over too
    assert RunReceipt.objects.get(schedule__name="mail").status == "missed"
    b.refresh_from_db()
    assert (b.occurrence, b.missed_count) == (1, 1)
    # The next hour runs the whole chain again.
    assert [n for n, _ in run(T0 + H) + run(T0 + H + 2 * S) + run(T0 + H + 4 * S)] == [
        "import",
        "aggregate",
        "mail",
    ]


def test_a_downstream_with_two_upstreams_waits_for_both() -> None:
    a, b, c = chain()
    x = prices()
    ScheduleLink.objects.create(downstream=b, upstream=x)
    claims = state.claim_due(worker="w", now=T0)
    assert sorted(cl.schedule_name for cl in claims) == ["import", "prices"]
    first = next(cl for cl in claims if cl.schedule_name == "import")
    state.complete([Outcome(first, "succeeded")], now=T0 + S)
    assert state.claim_due(worker="w", now=T0 + 2 * S) == []  # prices still runs
    other = next(cl for cl in claims if cl.schedule_name == "prices")
    state.complete([Outcome(other, "succeeded")], now=T0 + 3 * S)
    assert run(T0 + 4 * S) == [("aggregate", T0)]


def test_a_claim_and_a_completion_pay_no_statement_for_chains_when_there_are_none(
    django_assert_max_num_queries,
) -> None:
    """The claim and completion of plain schedules read nothing of the chain tables: the
    links' flag rides on their locking reads (an ``EXISTS`` in the same statement)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from .factories import due_schedules

    due_schedules(3, due=T0)
    with CaptureQueriesContext(connection) as ctx:
        claims = state.claim_due(worker="w", now=T0)
        state.complete([Outcome(c, "succeeded") for c in claims], now=T0 + S)
    assert len(claims) == 3
    statements = [q["sql"] for q in ctx.captured_queries]
    assert not any("chainslot" in sql for sql in statements)
    assert all("schedulelink" not in sql or "EXISTS" in sql.upper() for sql in statements)


def test_a_backfill_with_cascade_runs_the_chain_again_for_each_slot() -> None:
    a, b, c = chain()
    for hour in range(2):  # two hours run the whole chain
        slot = T0 + hour * H
        run(slot), run(slot + 2 * S), run(slot + 4 * S)
    now = T0 + H + 600 * S  # the live grid's next slot (T0 + 2 h) is far
    plain = state.request_backfill(a.pk, T0, T0 + H + S, include_succeeded=True, now=now)
    seen = []
    for step in range(8):
        seen += run(now + (2 * step + 1) * S)
    assert [n for n, _ in seen] == ["import", "import"]  # no cascade: a alone
    assert plain.pk
    now += 20 * S
    made = state.request_backfill(
        a.pk, T0, T0 + H + S, include_succeeded=True, cascade=True, now=now
    )
    assert made.cascade
    seen = []
    for step in range(12):
        seen += run(now + (2 * step + 1) * S)
    # Each instant once per step, in chain order (the next backfill slot may share a
    # claim pass with the step below it).
    expected = [(n, at) for at in (T0, T0 + H) for n in ("import", "aggregate", "mail")]
    assert sorted(seen) == sorted(expected)
    for at in (T0, T0 + H):
        assert [n for n, when in seen if when == at] == ["import", "aggregate", "mail"]


def test_a_backfilled_upstream_slot_drives_a_downstream_slot_still_waiting() -> None:
    a, b, c = chain()
    run(T0, "failed", error_type="Boom")
    run(T0 + 5 * S, "failed", error_type="Boom")  # the occurrence failed; aggregate waits
    state.request_backfill(a.pk, T0, T0 + S, now=T0 + 60 * S)
    assert run(T0 + 61 * S) == [("import", T0)]  # the backfill slot succeeds
    assert run(T0 + 62 * S) == [("aggregate", T0)]


def test_cascade_is_asked_on_the_api_the_admin_and_the_command(admin_client, monkeypatch) -> None:
    """Each surface stores the choice: the API's body and answer, the admin's range form
    through its confirmation page (a hidden field), ``schedules backfill --cascade``."""
    from io import StringIO

    from django.core.management import call_command

    from django_durable_schedules.admin import ScheduleAdmin  # noqa: F401 - registers
    from django_durable_schedules.models import Backfill

    a, b, c = chain()
    start, end = "2026-01-01T00:00:00Z", "2026-01-01T03:00:00Z"
    rng = {"start": start, "end": end}
    cron = _save(Schedule(name="hourly", callback="tests.noop", kind="cron", cron="0 * * * *"))
    ScheduleLink.objects.create(downstream=b, upstream=cron)
    made = admin_client.post(
        f"/api/schedules/{cron.pk}/backfill/",
        {**rng, "cascade": True},
        content_type="application/json",
    )
    assert made.status_code == 201, made.content
    assert made.json()["cascade"] is True
    admin_client.delete(f"/api/schedules/{cron.pk}/backfill/")
    base = {"action": "backfill", "_selected_action": [str(cron.pk)]}
    page = admin_client.post("/admin/durable_schedules/schedule/", {**base, **rng, "cascade": "on"})
    assert page.status_code == 200 and 'name="cascade" value="on"' in page.content.decode()
    admin_client.post(
        "/admin/durable_schedules/schedule/",
        {**base, **rng, "cascade": "on", "post": "yes"},
        follow=True,
    )
    latest = Backfill.objects.filter(source="admin").get()
    assert latest.cascade is True
    state.cancel_backfill(cron.pk)
    call_command(
        "schedules",
        "backfill",
        cron.name,
        "--from",
        start,
        "--to",
        end,
        "--cascade",
        stdout=StringIO(),
    )
    assert Backfill.objects.filter(source="command").get().cascade is True


def test_a_prune_deletes_decided_chain_slots_and_keeps_open_ones() -> None:
    from django_durable_schedules.db.retention import prune_finished

    a, b, c = chain(wait=600)
    run(T0), run(T0 + 2 * S), run(T0 + 4 * S)  # hour 0: the chain ran, slots decided
    run(T0 + H)  # hour 1: import ran; aggregate's slot is ready, mail's waits
    assert ChainSlot.objects.filter(status__in=["ready", "waiting"]).count() == 2
    result = prune_finished(timedelta(minutes=1), now=T0 + H + 60 * S)
    assert result.chain_slots == 2
    assert ChainSlot.objects.count() == 2  # the open ones are kept


def test_a_cancelled_downstream_gets_no_slot_and_the_ones_below_it_are_counted() -> None:
    a, b, c = chain(wait=600)
    state.cancel(b.pk)
    run(T0)  # import succeeds
    assert not ChainSlot.objects.filter(downstream=b).exists()
    assert run(T0 + 1200 * S) == []  # mail's wait is over: counted
    assert RunReceipt.objects.get(schedule__name="mail").error_type == "UpstreamNotDone"


def test_an_idle_worker_wakes_for_a_ready_chain_slot_and_for_the_next_deadline() -> None:
    """A ready slot of a free downstream is due at once; a waiting one wakes the worker at
    its deadline; a ready slot of a downstream that runs now wakes nobody (no busy loop)."""
    a, b, c = chain(wait=600)
    claims = state.claim_due(worker="w", now=T0)
    wake = state.next_wakeup()
    assert wake.due is not None and wake.due <= T0 + 600 * S  # aggregate's deadline
    state.complete([Outcome(claims[0], "succeeded")], now=T0 + S)
    wake = state.next_wakeup()  # aggregate is ready: at once (the database clock)
    assert wake.due is not None and wake.due <= state.db_now()
    (running,) = state.claim_due(worker="w", now=T0 + 2 * S)
    assert running.schedule_name == "aggregate"
    wake = state.next_wakeup()  # mail waits for aggregate: its deadline (1,200 s)
    assert wake.due is not None and wake.due > T0 + 1000 * S


def test_a_slot_past_its_deadline_on_a_busy_downstream_is_counted_once_it_is_free() -> None:
    """One occurrence at a time: aggregate still runs hour 0 when hour 1's slot (import
    failed) passes its deadline, so that slot stays waiting and
    is counted missed at the first claim after aggregate's run ends (what the chaos soak's
    ``chain_slot_undecided`` allows: bench/chaos_chains.py)."""
    a, b, c = chain(wait=600)
    run(T0)  # import, hour 0
    (running,) = state.claim_due(worker="w", now=T0 + 2 * S, lease_seconds=7200)
    assert running.schedule_name == "aggregate"
    run(T0 + H, "failed", error_type="Boom")
    run(T0 + H + 5 * S, "failed", error_type="Boom")  # hour 1's import failed
    assert run(T0 + H + 700 * S) == []  # past the deadline, aggregate busy: not counted
    slot = ChainSlot.objects.get(downstream=b, scheduled_for=T0 + H)
    assert slot.status == ChainSlotStatus.WAITING
    assert not RunReceipt.objects.filter(schedule=b, status="missed").exists()
    state.complete([Outcome(running, "succeeded")], now=T0 + H + 800 * S)
    assert run(T0 + H + 801 * S) == []  # free again: the next claim counts it
    slot.refresh_from_db()
    assert slot.status == ChainSlotStatus.MISSED
    missed = RunReceipt.objects.get(schedule=b, status="missed")
    assert missed.error_type == "UpstreamNotDone"


def test_a_changed_upstream_set_moves_the_open_slots_along() -> None:
    """Removing the upstream a slot still waited for makes it ready (the remaining one
    succeeded); emptying the upstreams (another kind) deletes the open slots."""
    a, b, c = chain()
    x = prices()
    state.update_schedule(b.pk, upstream=["import", "prices"])
    claims = {cl.schedule_name: cl for cl in state.claim_due(worker="w", now=T0)}
    state.complete([Outcome(claims["import"], "succeeded")], now=T0 + S)
    assert ChainSlot.objects.get(downstream=b).status == "waiting"  # prices still runs
    state.update_schedule(b.pk, upstream=["import"])
    assert ChainSlot.objects.get(downstream=b).status == "ready"
    state.complete([Outcome(claims["prices"], "succeeded")], now=T0 + 2 * S)
    state.update_schedule(c.pk, kind="interval", interval_seconds=60, upstream=[])
    assert not ChainSlot.objects.filter(downstream=c).exists()
    assert x.pk


def test_chain_slots_keep_a_share_of_full_batches() -> None:
    """A fleet whose live rows fill every batch still runs a ready chain slot in the next
    batch (before: only once a batch had places left, so it waited, or was counted missed,
    while the live backlog lasted)."""
    from .factories import due_schedules

    a, b, c = chain()
    run(T0)  # import ran: aggregate's slot is ready
    due_schedules(8, due=T0 + S)
    first = [cl.schedule_name for cl in state.claim_due(worker="w", limit=4, now=T0 + 2 * S)]
    assert "aggregate" in first and len(first) == 4, first
