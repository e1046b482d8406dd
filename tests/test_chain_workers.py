"""Chaining with real ``run_scheduler`` processes (issue #30 item 1, "Done means"), on
SQLite, PostgreSQL and MariaDB (``DATABASE_URL``). A three-step chain import -> aggregate
-> mail (kinds interval, after, after; the links written directly), run by two workers:

* every success of import with nominal instant t runs aggregate once with
  ``scheduled_for`` t, started after import's run for t ended, and mail once for t after
  aggregate's ended; no step runs for an instant its upstream did not succeed for; none
  runs twice. Checked from the callbacks' own start and end records (``tests.span``
  appends them to a file) joined with the attempts and receipts;
* import failing terminally (``FailRun``) leaves aggregate's and mail's instants
  receipted ``missed`` (``UpstreamNotDone``) once their ``wait_seconds`` passed, and
  neither runs;
* a backfill of import with ``cascade`` runs aggregate and mail again for each of its
  slots, each step after the one before.

The in-process semantics are in tests/test_chain_engine.py.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from django_durable_schedules import state
from django_durable_schedules.models import (
    ChainSlot,
    RunAttempt,
    RunReceipt,
    Schedule,
    ScheduleLink,
)

from .conftest import stop_all, wait_until
from .test_worker_process import log, wait_exit, wait_started

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

#: import's period (seconds) and its number of occurrences in the success scenario.
EVERY = 2
RUNS = 5


def _save(row: Schedule) -> Schedule:
    row.full_clean()
    row.save()
    return row


def chain(path, *, callback, runs, waits, seconds=(0.4, 0.3, 0.2)):
    """import (every :data:`EVERY` s from a whole second 2 s ahead, ``runs`` occurrences,
    one attempt each) -> aggregate -> mail, every step ``tests.span`` unless ``callback``
    says otherwise for import; ``waits``: aggregate's and mail's ``wait_seconds``."""
    start = (state.db_now() + timedelta(seconds=3)).replace(microsecond=0)
    a = _save(
        Schedule(
            name="import",
            callback=callback,
            kind="interval",
            interval_seconds=EVERY,
            timezone="UTC",
            start_at=start,
            max_runs=runs,
            max_attempts=1,
            payload={"path": str(path), "seconds": seconds[0]},
        )
    )
    steps = [a]
    for name, wait, secs in zip(("aggregate", "mail"), waits, seconds[1:], strict=True):
        row = _save(
            Schedule(
                name=name,
                callback="tests.span",
                kind="after",
                wait_seconds=wait,
                max_attempts=1,
                payload={"path": str(path), "seconds": secs},
            )
        )
        ScheduleLink.objects.create(downstream=row, upstream=steps[-1])
        steps.append(row)
    return steps


def spans(path):
    """``(name, occurrence, attempt) -> [(start, end), ...]`` from the callbacks' records
    (POSIX seconds, this host's clock: the workers run here)."""
    found: dict[tuple[str, int, int], list[tuple[float, float]]] = {}
    if not path.exists():
        return found
    for line in path.read_text().splitlines():
        name, occurrence, attempt, start, end, _pid = line.split()
        found.setdefault((name, int(occurrence), int(attempt)), []).append(
            (float(start), float(end))
        )
    return found


def runs_by_instant(path, name):
    """``scheduled_for -> [(start, end), ...]`` of the runs of ``name`` the callbacks
    recorded, each joined with its attempt's nominal instant."""
    slots = {
        (occurrence, attempt): at
        for occurrence, attempt, at in RunAttempt.objects.filter(schedule_name=name).values_list(
            "occurrence", "attempt", "scheduled_for"
        )
    }
    found: dict = {}
    for (step, occurrence, attempt), runs in spans(path).items():
        if step == name:
            found.setdefault(slots[(occurrence, attempt)], []).extend(runs)
    return found


def receipts(name, status=None):
    """``scheduled_for -> [receipt, ...]`` of ``name`` (with ``status`` when given)."""
    qs = RunReceipt.objects.filter(schedule__name=name).select_related("attempt")
    if status is not None:
        qs = qs.filter(status=status)
    found: dict = {}
    for receipt in qs:
        found.setdefault(receipt.attempt.scheduled_for, []).append(receipt)
    return found


def picture(workers) -> str:
    """The schedules, the chain slots, the receipts and the workers' output, for a failure."""
    rows = Schedule.objects.order_by("name").values_list(
        "name", "status", "occurrence", "missed_count", "next_run_at", "lease_token"
    )
    slots = ChainSlot.objects.order_by("downstream__name", "scheduled_for").values_list(
        "downstream__name", "scheduled_for", "deadline", "status", "done"
    )
    got = RunReceipt.objects.order_by("finished_at").values_list(
        "schedule__name", "occurrence", "attempt__scheduled_for", "status", "error_type",
        "finished_at",
    )  # fmt: skip
    return "\n".join(
        [f"now {state.db_now()}", "schedules:", *map(str, rows), "slots:", *map(str, slots)]
        + ["receipts:", *map(str, got), log(*workers)]
    )


class Stalled(AssertionError):
    """Raised when the chain did not run out within its time: a slot left ready or waiting
    past its deadline with no worker claiming it (what an idle worker did before its
    wake-up took chain slots into account)."""


def settle(predicate, workers, what, seconds):
    """Wait at most ``seconds`` for ``predicate``; on a timeout, say what the tables hold
    (no worker is stopped: the caller checks what ran, then raises)."""
    try:
        wait_until(predicate, seconds, interval=0.3, message=what)
        return None
    except AssertionError as exc:
        return Stalled(f"{exc}\n{picture(workers)}")


def start_workers(start_worker, prefix):
    ids = [f"{prefix}-{n}" for n in range(2)]
    workers = [
        start_worker("--worker-id", wid, "--max-idle", "0.3", "--concurrency", "4") for wid in ids
    ]
    wait_started(*ids, timeout=60)
    return workers


def stop(workers):
    stop_all(workers)  # side by side: each drain does not wait for the one before
    for w in workers:
        assert wait_exit(w, 30) == 0, log(w)


def test_each_step_runs_once_per_success_of_the_one_before_and_after_it(tmp_path, start_worker):
    path = tmp_path / "spans.txt"
    workers = start_workers(start_worker, "chain")
    began = time.monotonic()
    a, b, c = chain(path, callback="tests.span", runs=RUNS, waits=(60, 60))

    def import_done():
        a.refresh_from_db()
        return a.status == "completed"

    stalled = settle(import_done, workers, "import's last run", 3 + RUNS * EVERY + 5)

    def ran_out():
        return not ChainSlot.objects.open().exists() and len(receipts("mail")) >= RUNS

    # The tail: aggregate and mail for import's last instant, well within 5 s.
    stalled = stalled or settle(ran_out, workers, "the chain to run out", 5)
    time.sleep(0.6)  # a duplicate would show up now
    stop(workers)
    elapsed = time.monotonic() - began

    ran = {name: runs_by_instant(path, name) for name in ("import", "aggregate", "mail")}
    succeeded = receipts("import", "succeeded")
    assert len(succeeded) == RUNS and len(receipts("import")) == RUNS, picture(workers)
    assert sorted(ran["import"]) == sorted(succeeded)
    # What ran: each step once per instant at most, only for an instant the step before
    # succeeded for, started after that run ended, with the same nominal instant.
    for step, before in (("aggregate", "import"), ("mail", "aggregate")):
        got = receipts(step)
        assert {r.status for rs in got.values() for r in rs} <= {"succeeded"}, got
        assert set(got) == set(ran[step]) <= set(receipts(before, "succeeded")), (step, ran)
        for at, runs in ran[step].items():
            [(start, _end)] = runs  # never twice
            [(_start, end_before)] = ran[before][at]
            assert end_before <= start, (step, at, ran)
            # The engine's own record agrees: each claim after the upstream's completion.
            [receipt] = got[at]
            [receipt_before] = receipts(before, "succeeded")[at]
            assert receipt_before.finished_at <= receipt.attempt.claimed_at
    print(f"chain of {RUNS} instants in {elapsed:.1f} s: {[len(ran[n]) for n in ran]} runs")
    if stalled is not None:
        raise stalled
    # Every instant import succeeded for ran the whole chain.
    assert set(ran["aggregate"]) == set(ran["mail"]) == set(succeeded)
    assert set(ChainSlot.objects.values_list("status", flat=True)) == {"run"}
    for row in (b, c):
        row.refresh_from_db()
        assert (row.occurrence, row.missed_count, row.lease_token) == (RUNS, 0, None)


def test_a_terminally_failing_upstream_leaves_the_downstream_instants_missed(
    tmp_path, start_worker
):
    path = tmp_path / "spans.txt"
    workers = start_workers(start_worker, "fail")
    began = time.monotonic()
    # import fails each of its two occurrences on its one attempt.
    a, b, c = chain(path, callback="tests.fail", runs=2, waits=(3, 4))

    def counted():
        a.refresh_from_db()
        return (
            a.status == "completed"
            and not ChainSlot.objects.open().exists()
            and len(receipts("mail")) >= 2
        )

    # import's instants are t and t + 2 (t 3 s ahead); mail's last wait ends at t + 6.
    stalled = settle(counted, workers, "the slots counted", 3 + EVERY + 4 + 5)
    time.sleep(0.6)
    stop(workers)
    elapsed = time.monotonic() - began

    failed = receipts("import")
    assert len(failed) == 2, picture(workers)
    assert {r.status for rs in failed.values() for r in rs} == {"failed"}, picture(workers)
    assert spans(path) == {}  # neither downstream step ran (import's callback records none)
    for step, wait in (("aggregate", 3), ("mail", 4)):
        got = receipts(step)
        assert set(got) <= set(failed), (step, got)
        for at, [receipt] in got.items():
            assert (receipt.status, receipt.error_type) == ("missed", "UpstreamNotDone")
            assert f"within wait_seconds={wait}" in receipt.error_message
            assert receipt.started_at is None
            # Counted once its wait was over, not before.
            assert receipt.finished_at >= at + timedelta(seconds=wait)
    print(
        f"2 failures in {elapsed:.1f} s: {RunReceipt.objects.filter(status='missed').count()} missed"
    )
    if stalled is not None:
        raise stalled
    for step in ("aggregate", "mail"):
        assert set(receipts(step)) == set(failed)
    assert set(ChainSlot.objects.values_list("status", flat=True)) == {"missed"}
    for row in (b, c):
        row.refresh_from_db()
        assert (row.missed_count, row.lease_token) == (2, None)


def test_a_backfill_with_cascade_runs_the_chain_again_for_each_slot(tmp_path, start_worker):
    path = tmp_path / "spans.txt"
    workers = start_workers(start_worker, "cascade")
    a, b, c = chain(path, callback="tests.span", runs=None, waits=(60, 60))
    first = a.start_at
    instants = [first, first + timedelta(seconds=EVERY)]

    def chain_ran_twice():
        return set(instants) <= set(receipts("mail", "succeeded"))

    stalled = settle(chain_ran_twice, workers, "two instants of the chain", 3 + 2 * EVERY + 6)
    state.disable(a.pk)  # import's grid stops; a paused schedule still runs its backfill
    end = instants[-1] + timedelta(seconds=1)
    while state.db_now() <= end:  # a backfill's range is past (the chain may be that fast)
        time.sleep(0.1)
    state.request_backfill(a.pk, first, end, include_succeeded=True, cascade=True)

    def cascaded():
        return all(len(receipts("mail", "succeeded").get(at, [])) == 2 for at in instants)

    stalled = stalled or settle(cascaded, workers, "the backfill's cascade", 15)
    time.sleep(0.6)
    stop(workers)
    if stalled is not None:
        raise stalled
    ran = {name: runs_by_instant(path, name) for name in ("import", "aggregate", "mail")}
    for at in instants:
        # Twice each: the live instant and its backfill, each step after the one before.
        for step, before in (("aggregate", "import"), ("mail", "aggregate")):
            assert len(ran[step][at]) == 2 and len(ran[before][at]) == 2, (step, at, ran)
            (_, end_live), (_, end_again) = sorted(ran[before][at])
            (start_live, _), (start_again, _) = sorted(ran[step][at])
            assert end_live <= start_live and end_again <= start_again, (step, at, ran)
    backfill = a.backfills.get()
    assert backfill.cascade and backfill.status == "completed"
