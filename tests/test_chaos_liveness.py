"""The chaos soak's liveness checks (bench/chaos.py ``healthy_unclaimed``): a plain
``chaos-every-*`` schedule must be claimed after the last poison written, a claim handed
back unrun not counted; during the soak (``receipted=True``) a claim still in flight is not
counted yet either, so what the soak waits for holds at the audit too."""

from datetime import timedelta

import pytest

from django_durable_schedules import state
from django_durable_schedules.models import Schedule
from django_durable_schedules.state import Outcome

from .bench_modules import import_bench

(chaos,) = import_bench("chaos")

pytestmark = [pytest.mark.django_db, pytest.mark.vendor_independent]


def test_a_healthy_schedule_counts_once_a_claim_after_the_last_poison_is_not_handed_back():
    now = state.db_now().replace(microsecond=0)
    for name in ("chaos-every-done", "chaos-every-released", "chaos-every-running", "other"):
        Schedule.objects.create(
            name=name, callback="tests.noop", kind="interval", interval_seconds=60, next_run_at=now
        )
    poisoned = [
        {"victim": "v1", "result": "written", "at": now - timedelta(seconds=1)},
        {"victim": "v2", "result": "refused", "at": now + timedelta(hours=1)},  # not written
    ]
    assert set(chaos.healthy_unclaimed(poisoned)) == {
        "chaos-every-done",
        "chaos-every-released",
        "chaos-every-running",
    }  # never claimed
    claims = {c.schedule_name: c for c in state.claim_due(worker="w", now=now)}
    state.complete(
        [
            Outcome(claim=claims["chaos-every-done"], status="succeeded", started_at=now),
            Outcome(claim=claims["chaos-every-released"], status="released"),
        ]
    )
    assert set(chaos.healthy_unclaimed(poisoned)) == {"chaos-every-released"}
    assert set(chaos.healthy_unclaimed(poisoned, receipted=True)) == {
        "chaos-every-released",
        "chaos-every-running",
    }
    # A poison written after every claim: none of them counts.
    later = [*poisoned, {"victim": "v3", "result": "written", "at": now + timedelta(seconds=1)}]
    assert len(chaos.healthy_unclaimed(later)) == 3
    assert chaos.healthy_unclaimed([]) == {}  # no poison written: nothing to prove


@pytest.mark.django_db(transaction=True)  # waiting_on closes its connections, as the soak
def test_the_soak_waits_on_a_poisoned_row_until_its_pass_paused_it_or_went_on():
    """``chaos.waiting_on`` (what the soak runs on past ``--duration`` for) names a surface
    victim whose pass neither paused it with a reason nor claimed it since its poison, as
    the audit's ``surface_victim_stalled`` would; once it is paused degraded, or claimed
    after the poison, nothing is waited on."""
    now = state.db_now().replace(microsecond=0)
    poisoned = []
    for name in ("chaos-svictim-paused", "chaos-svictim-claimed"):
        Schedule.objects.create(
            name=name, callback="tests.noop", kind="interval", interval_seconds=60,
            next_run_at=now,
        )  # fmt: skip
        poisoned.append({"victim": name, "result": "written", "surface": "x", "at": now})
    assert chaos.waiting_on(poisoned, surfaces=True) == [
        "chaos-svictim-paused (x): active",
        "chaos-svictim-claimed (x): active",
    ]
    assert chaos.waiting_on(poisoned, surfaces=False) == []
    Schedule.objects.filter(name="chaos-svictim-paused").update(
        status="paused", degraded_reason="bad row"
    )
    assert chaos.waiting_on(poisoned, surfaces=True) == ["chaos-svictim-claimed (x): active"]
    (claim,) = state.claim_due(worker="w", now=now + timedelta(seconds=1))
    assert claim.schedule_name == "chaos-svictim-claimed"
    assert chaos.waiting_on(poisoned, surfaces=True) == []


def test_the_chaos_kills_only_a_worker_that_is_up(tmp_path):
    """A worker still importing Django (no ``starting`` line in its log yet), or up for less
    than the time asked, is never the one SIGKILLed: the kill stays due (``kill_random``
    returns False) until one has been up that long."""
    import random
    from datetime import datetime

    fleet = chaos.Fleet({}, tmp_path, 4, random.Random(1))
    fleet.procs = {"chaos-w001": None, "chaos-w002": None}  # not touched while none is up
    (tmp_path / "chaos-w001.log").write_text("")
    assert not fleet.up("chaos-w001") and not fleet.up("chaos-w002")  # no log at all
    assert fleet.kill_random() is False

    def started(seconds_ago):
        at = datetime.now() - timedelta(seconds=seconds_ago)
        return (
            f"{at:%Y-%m-%d %H:%M:%S},{at.microsecond // 1000:03} INFO "
            "django_durable_schedules.worker: worker chaos-w002 starting (concurrency 4, "
            "batch 100, claim ahead 0.05s, lease 4.0s) pools=default\n"
        )

    (tmp_path / "chaos-w002.log").write_text(started(2))
    assert fleet.up("chaos-w002") and not fleet.up("chaos-w001")
    assert not fleet.up("chaos-w002", 5.0)
    assert fleet.kill_random(5.0) is False
    (tmp_path / "chaos-w002.log").write_text(started(6))
    assert fleet.up("chaos-w002", 5.0)
