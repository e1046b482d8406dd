"""The chaos soak's audit of ``overlap_policy="allow"`` (bench/chaos_parallel.py):
fabricated rows of clean occurrences pass; rows that break each rule are counted under
that rule's name, and no other. A run whose lease lapsed (its worker frozen) does not
count against ``max_parallel`` past the lapse, though its callback ran on."""

from datetime import UTC, datetime, timedelta

from .bench_modules import import_bench

(chaos_parallel,) = import_bench("chaos_parallel")

T0 = datetime(2026, 12, 6, 10, 0, tzinfo=UTC)
BASE = T0.timestamp()
LEASE, RENEW = 4.0, 1.0
WORKER, OTHER = 100, 200  # worker pids; 1 is the soak itself (the in-process runs' ppid)


def schedule(limit=2, *, slots=10, missed=0, **more):
    row = {
        "id": 1,
        "name": "par",
        "max_parallel": limit,
        "start_at": T0,
        "end_at": None,
        "interval_seconds": 1,
        "next_run_at": T0 + timedelta(seconds=slots),
        "status": "active",
        "missed_count": missed,
    }
    row.update(more)
    return row


class Load:
    """Occurrences of schedule 1: attempts, receipts and the callbacks' runs."""

    def __init__(self):
        self.attempts, self.receipts, self.runs = [], [], {}

    def add(self, o, claimed, finished, status="succeeded", *, run=None, pid=WORKER, n=1):
        aid = len(self.attempts) + 1
        key = f"k:{o}"
        self.attempts.append(
            {
                "id": aid,
                "schedule_id": 1,
                "occurrence": o,
                "attempt": n,
                "idempotency_key": key,
                "origin": "scheduled",
                "claimed_at": T0 + timedelta(seconds=claimed),
            }
        )
        if status is not None:
            self.receipts.append(
                {
                    "attempt_id": aid,
                    "schedule_id": 1,
                    "occurrence": o,
                    "status": status,
                    "finished_at": T0 + timedelta(seconds=finished),
                }
            )
        if run is not None:
            start, end = run
            self.runs[(key, n)] = {
                "start": BASE + start,
                "end": None if end is None else BASE + end,
                "pid": pid,
                "ppid": 1,
            }
        return aid

    def judge(self, row, events=(), survivors=(), now=60.0):
        events = [(BASE + t, kind, pid) for t, kind, pid in events]
        return chaos_parallel.judge_parallel(
            [row],
            self.attempts,
            self.receipts,
            self.runs,
            events,
            list(survivors),
            LEASE,
            RENEW,
            BASE + now,
        )


def broken(result):
    return {name: n for name, n in result["violations"].items() if n}


def test_occurrences_side_by_side_up_to_the_limit_pass():
    load = Load()
    for o in range(1, 9):  # every second, 1.5 s each: two at once, never three
        load.add(o, o - 1, o + 0.6, run=(o - 0.95, o + 0.5))
    result = load.judge(schedule(slots=8))
    assert broken(result) == {}
    figures = result["schedules"]["par"]
    assert figures["max_concurrent_live"] == 2
    assert figures["max_leased_at_a_claim"] == 2
    assert figures["claims_at_the_limit"] == 7


def test_three_live_runs_of_a_limit_of_two_are_counted():
    load = Load()
    load.add(1, 0, 5, run=(0.1, 4.9))
    load.add(2, 1, 5, run=(1.1, 4.9))
    load.add(3, 2, 5, run=(2.1, 4.9))
    result = load.judge(schedule(slots=3))
    assert broken(result) == {"parallel_over_max": 1, "parallel_claims_over_max": 1}


def test_a_frozen_workers_run_stops_counting_when_its_lease_can_have_lapsed():
    """Worker 100 frozen at 1 s: its run's lease lapsed by 1 + 4 - 1 = 4 s at the
    earliest; two runs started after that beside it are within the limit, though its
    callback ran on to 9 s (``wall``)."""
    load = Load()
    load.add(1, 0, 9, "lease_expired", run=(0.1, 9.0))
    load.add(2, 4.5, 7, run=(4.6, 6.9), pid=OTHER)
    load.add(3, 5, 7, run=(5.1, 6.9), pid=OTHER)
    events = [(1.0, "stop", WORKER), (7.0, "cont", WORKER)]
    result = load.judge(schedule(slots=3), events)
    assert broken(result) == {}
    figures = result["schedules"]["par"]
    assert (figures["max_concurrent_live"], figures["max_concurrent_wall"]) == (2, 3)
    # Started before the earliest lapse (3.5 s < 4 s): three live at once.
    load.runs[("k:2", 1)]["start"] = BASE + 3.5
    load.runs[("k:3", 1)]["start"] = BASE + 3.6
    assert broken(load.judge(schedule(slots=3), events)) == {"parallel_over_max": 1}


def test_an_outage_cuts_every_workers_lease_as_a_freeze_does():
    """The PostgreSQL restart at 1 s (``outage``, pid 0: every worker): no renewal reaches
    the database, so a run's lease lapsed by 1 + 4 - 1 = 4 s at the earliest. A run in a
    thread runs on (to 9 s); one in a child is killed at its lease's deadline and leaves no
    ``done`` line: it ended by 1 + 4 = 5 s (``fenced_in_outage``), not at the audit. Two
    runs claimed after the lapse beside each are within the limit (the chaos soak on
    PostgreSQL counted three)."""
    events = [(1.0, "outage", 0), (4.0, "outage_end", 0)]
    for run in ((0.1, 9.0), (0.1, None)):
        load = Load()
        load.add(1, 0, 9, "lease_expired", run=run)
        load.add(2, 4.5, 7, run=(4.6, 6.9), pid=OTHER)
        load.add(3, 5, 7, run=(5.1, 6.9), pid=OTHER)
        result = load.judge(schedule(slots=3), events)
        assert broken(result) == {}, run
        figures = result["schedules"]["par"]
        assert figures["max_concurrent_live"] == 2
        if run[1] is None:
            assert figures["runs_ended_by"] == {"fenced_in_outage": 1, "done": 2}
        # Started before the earliest lapse: three live at once.
        load.runs[("k:2", 1)]["start"] = BASE + 3.5
        load.runs[("k:3", 1)]["start"] = BASE + 3.6
        assert broken(load.judge(schedule(slots=3), events)) == {"parallel_over_max": 1}


def test_a_run_without_done_ends_at_its_workers_sigkill():
    load = Load()
    load.add(1, 0, 8, "lease_expired", run=(0.1, None))
    load.add(2, 3, 5, run=(3.1, 4.9), pid=OTHER)
    load.add(3, 3.5, 5, run=(3.6, 4.9), pid=OTHER)
    result = load.judge(schedule(slots=3), [(2.0, "kill", WORKER)])
    assert broken(result) == {}
    assert result["schedules"]["par"]["runs_ended_by"] == {"sigkill": 1, "done": 2}


def test_an_occurrence_claimed_or_receipted_twice_is_counted():
    load = Load()
    load.add(1, 0, 1)
    load.add(1, 2, 3, n=2)  # a retry: never, with allow
    assert broken(load.judge(schedule(slots=1, missed=0))) == {
        "parallel_occurrence_claimed_twice": 2,  # two attempts, one numbered 2
        "parallel_occurrence_receipted_twice": 1,
        "parallel_slot_counted_twice": 1,
    }
    load = Load()
    aid = load.add(1, 0, 1)
    load.receipts.append(dict(load.receipts[0], attempt_id=aid, status="lease_expired"))
    assert broken(load.judge(schedule(slots=1))) == {"parallel_occurrence_receipted_twice": 1}


def test_every_slot_is_run_or_counted_once():
    """Slots 0..4 decided (next_run_at at 5 s): two run, one handed back unrun (counted in
    missed_count), two coalesced (counted)."""
    load = Load()
    load.add(1, 0, 1)
    load.add(2, 1, 1.5, "released")
    load.add(3, 4, 5)
    assert broken(load.judge(schedule(slots=5, missed=3))) == {}
    assert broken(load.judge(schedule(slots=5, missed=2))) == {"parallel_slot_unaccounted": 1}
    assert broken(load.judge(schedule(slots=5, missed=5))) == {"parallel_slot_counted_twice": 2}


def test_a_completed_grid_is_judged_to_its_end_inclusive():
    row = schedule(next_run_at=None, status="completed", end_at=T0 + timedelta(seconds=11))
    assert chaos_parallel.grid_slots(row) == 12
    assert chaos_parallel.grid_slots(dict(row, status="paused")) is None
    stuck = dict(row, status="active", missed_count=2)  # the grid ended, never completed
    assert chaos_parallel.grid_slots(stuck) == 12
    assert chaos_parallel.grid_slots(schedule(next_run_at=T0 + timedelta(seconds=2.5))) == 3
    load = Load()
    for o in range(1, 11):
        load.add(o, o - 1, o - 0.5)
    assert broken(load.judge(dict(row, missed_count=2))) == {}
    assert broken(load.judge(dict(row, missed_count=1))) == {"parallel_slot_unaccounted": 1}
    assert broken(load.judge(stuck)) == {"parallel_schedule_stuck": 1}


def test_the_claims_check_leaves_lapsed_leases_out():
    """At a claim, the occurrences leased are those claimed before it and receipted after
    it; one receipted ``lease_expired`` lapsed at an instant no row records: not counted
    (the callbacks' check judges it)."""
    load = Load()
    load.add(1, 0, 9, "lease_expired")
    load.add(2, 1, 9)
    load.add(3, 6, 9)
    assert broken(load.judge(schedule(slots=3))) == {}
    load.receipts[0]["status"] = "succeeded"
    assert broken(load.judge(schedule(slots=3))) == {"parallel_claims_over_max": 1}
