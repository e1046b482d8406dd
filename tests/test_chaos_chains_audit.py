"""The chaos soak's chain audit (bench/chaos_chains.py): fabricated rows of a clean chain
pass; rows that break each rule are counted under that rule's name, and no other."""

from datetime import UTC, datetime, timedelta

import pytest

from .bench_modules import import_bench

(chaos_chains,) = import_bench("chaos_chains")

T0 = datetime(2026, 12, 6, 10, 0, tzinfo=UTC)
STOP = T0 + timedelta(seconds=120)
ROOT, OTHER, DOWN = "root", "other", "down"
LINKS = [(DOWN, ROOT), (DOWN, OTHER)]


def at(seconds):
    return T0 + timedelta(seconds=seconds)


def attempt(schedule, instant, claimed, finished, status, *, origin="scheduled", n=1, **more):
    return {
        "schedule_id": schedule,
        "occurrence": 1,
        "attempt": n,
        "scheduled_for": at(instant),
        "nominal_for": None,
        "claimed_at": at(claimed),
        "origin": origin,
        "receipt__status": status,
        "receipt__finished_at": None if finished is None else at(finished),
        "receipt__error_type": more.get("error_type", ""),
    }


def slot(instant, status, finished=None, wait=6):
    return {
        "downstream_id": DOWN,
        "scheduled_for": at(instant),
        "deadline": at(instant + wait),
        "status": status,
        "finished_at": None if finished is None else at(finished),
    }


def clean():
    """Instant 0: both roots succeed, the downstream runs after them; instant 3: one root
    fails, the downstream's instant is missed at its deadline."""
    attempts = [
        attempt(ROOT, 0, 0.1, 0.5, "succeeded"),
        attempt(OTHER, 0, 0.1, 0.7, "succeeded"),
        attempt(DOWN, 0, 0.9, 1.2, "succeeded"),
        attempt(ROOT, 3, 3.1, 3.4, "failed"),
        attempt(OTHER, 3, 3.1, 3.3, "succeeded"),
        attempt(DOWN, 3, 9.2, 9.2, "missed", error_type="UpstreamNotDone"),
    ]
    slots = [slot(0, "run", finished=0.9), slot(3, "missed", finished=9.2)]
    return attempts, slots


def judge(attempts, slots, stop=STOP):
    return chaos_chains.judge_chains(LINKS, attempts, slots, stop)


def flagged(report):
    return {name for name, n in report["violations"].items() if n}


def test_a_clean_chain_passes():
    report = judge(*clean())
    assert flagged(report) == set()
    assert report["totals"]["slots_by_status"] == {"missed": 1, "run": 1}
    assert report["totals"]["ready_to_claim_free_seconds"]["max"] == pytest.approx(0.2)


def test_an_instant_succeeded_twice():
    attempts, slots = clean()
    attempts.append({**attempt(DOWN, 0, 1.5, 1.8, "enqueued"), "occurrence": 2})
    report = judge(attempts, slots)
    assert flagged(report) == {"chain_instant_succeeded_twice"}
    assert report["examples"]["chain_instant_succeeded_twice"] == [
        f"{DOWN} @ {at(0).isoformat()}: x2"
    ]


def test_a_rerun_or_backfill_of_an_instant_is_no_second_success():
    attempts, slots = clean()
    attempts.append({**attempt(DOWN, 0, 30, 31, "succeeded", origin="rerun"), "occurrence": 3})
    attempts.append({**attempt(DOWN, 0, 40, 41, "succeeded", origin="backfill"), "occurrence": 4})
    assert flagged(judge(attempts, slots)) == set()


def test_a_downstream_claimed_before_an_upstream_succeeded():
    attempts, slots = clean()
    attempts[1] = attempt(OTHER, 0, 0.1, 1.0, "succeeded")  # after the claim at 0.9
    report = judge(attempts, slots)
    assert flagged(report) == {"chain_ran_before_upstreams"}
    assert "other succeeded" in report["examples"]["chain_ran_before_upstreams"][0]


def test_a_downstream_that_ran_an_instant_an_upstream_never_succeeded_for():
    attempts, slots = clean()
    attempts[-1] = attempt(DOWN, 3, 4.0, 4.2, "failed")
    slots[-1] = slot(3, "run", finished=4.0)
    report = judge(attempts, slots)
    assert "chain_ran_before_upstreams" in flagged(report)
    assert report["examples"]["chain_ran_before_upstreams"][0].endswith("root succeeded never")


def test_a_slot_left_waiting_past_its_deadline():
    attempts, slots = clean()
    attempts.pop()  # no missed receipt
    slots[-1] = slot(3, "waiting")
    report = judge(attempts, slots)
    assert flagged(report) == {"chain_slot_undecided"}
    assert "waiting" in report["examples"]["chain_slot_undecided"][0]


@pytest.mark.parametrize(
    "row",
    [
        attempt(DOWN, 3, 9.2, 9.2, "missed", error_type="SomethingElse"),
        attempt(DOWN, 3, 9.2, 9.3, "failed"),
    ],
)
def test_a_slot_marked_missed_without_its_upstream_not_done_receipt(row):
    attempts, slots = clean()
    attempts[-1] = row
    assert "chain_slot_undecided" in flagged(judge(attempts, slots))


def test_a_slot_marked_run_without_a_receipted_attempt():
    attempts, slots = clean()
    attempts[2] = attempt(DOWN, 0, 0.9, None, None)
    assert flagged(judge(attempts, slots)) == {"chain_slot_undecided"}


def test_slots_due_near_the_stop_are_not_judged():
    attempts, slots = clean()
    attempts.pop()
    slots[-1] = slot(3, "waiting")
    stop = at(3 + 6 + chaos_chains.END_MARGIN - 0.5)  # the deadline within the margin
    assert flagged(judge(attempts, slots, stop)) == set()


def busy_with_an_earlier_instant():
    """Instant -3 (both upstreams succeeded for it) as the downstream's occurrence 2, which
    holds it from 8 to 25: a run past its lease on a frozen worker (recovered at 14), its
    retry after the backoff (16-18, failed), the last retry (20-25)."""
    return [
        attempt(ROOT, -3, -2.9, -2.5, "succeeded"),
        attempt(OTHER, -3, -2.9, -2.5, "succeeded"),
        {**attempt(DOWN, -3, 8, 14, "lease_expired"), "occurrence": 2},
        {**attempt(DOWN, -3, 16, 18, "failed", n=2), "occurrence": 2},
        {**attempt(DOWN, -3, 20, 25, "succeeded", n=3), "occurrence": 2},
    ]


def test_a_slot_past_its_deadline_while_its_downstream_is_busy_is_not_yet_undecided():
    """The chaos soak's flake (SQLite, load 6-9): instant 3's slot (deadline 9) stayed
    waiting 16 s past its deadline, its downstream busy with an earlier occurrence to 25
    (the engine settles slots only on a free downstream); 9 s free before the stop."""
    attempts, slots = clean()
    attempts.pop()
    attempts += busy_with_an_earlier_instant()
    slots[-1] = slot(3, "waiting")
    assert flagged(judge(attempts, slots, stop=at(25 + 9))) == set()
    report = judge(attempts, slots, stop=at(25 + 11))
    assert flagged(report) == {"chain_slot_undecided"}
    assert report["examples"]["chain_slot_undecided"][0].endswith("11.0 s free after it")


def test_a_retry_waiting_at_the_stop_holds_the_downstream_to_the_stop():
    attempts, slots = clean()
    attempts.pop()
    attempts += busy_with_an_earlier_instant()[:4]  # failed at 18, its retry not yet run
    slots[-1] = slot(3, "waiting")
    stop = at(40)
    assert flagged(judge(attempts, slots, stop)) == {"chain_slot_undecided"}
    report = chaos_chains.judge_chains(LINKS, attempts, slots, stop, retry_waiting={DOWN})
    assert flagged(report) == set()


def test_busy_spans_cover_an_occurrence_from_its_claim_to_its_last_receipt():
    mine = [a for a in busy_with_an_earlier_instant() if a["schedule_id"] == DOWN]
    spans = chaos_chains.busy_spans(mine + [attempt(DOWN, 3, 30, 30, "missed")], STOP)
    assert spans == [(at(8), at(25))]
    open_run = [{**attempt(DOWN, 6, 40, None, None), "occurrence": 3}]
    assert chaos_chains.busy_spans(open_run, STOP) == [(at(40), STOP)]


def test_a_ready_slot_left_unclaimed_while_its_downstream_was_free():
    attempts, slots = clean()
    attempts[2] = attempt(DOWN, 0, 20, 20.3, "succeeded")
    slots[0] = slot(0, "run", finished=20)
    report = judge(attempts, slots)
    assert flagged(report) == {"chain_ready_stalled"}
    assert "19.3 s with the downstream free" in report["examples"]["chain_ready_stalled"][0]


def test_a_ready_slot_waiting_for_its_busy_downstream_is_no_stall():
    """Ready at 0.7, claimed at 20: the downstream ran another instant (claimed at 0.5,
    lease expired at 19.5) in between, so it was free for 0.5 s only."""
    attempts, slots = clean()
    attempts[2] = attempt(DOWN, 0, 20, 20.3, "succeeded")
    attempts.append({**attempt(DOWN, -3, 0.5, 19.5, "lease_expired"), "occurrence": 0})
    slots[0] = slot(0, "run", finished=20)
    report = judge(attempts, slots)
    assert "chain_ready_stalled" not in flagged(report)
    assert report["totals"]["ready_to_claim_free_seconds"]["max"] == pytest.approx(0.5)


def test_a_slot_still_ready_at_the_stop_counts_to_the_stop():
    attempts, slots = clean()
    del attempts[2]
    slots[0] = slot(0, "ready")
    report = judge(attempts, slots)
    assert {"chain_ready_stalled", "chain_slot_undecided"} == flagged(report)


def test_free_seconds():
    s = chaos_chains.free_seconds
    assert s(at(0), at(10), []) == 10
    assert s(at(0), at(10), [(at(2), at(4)), (at(3), at(5)), (at(8), at(12))]) == 5
    assert s(at(0), at(10), [(at(-5), at(20))]) == 0
