"""``run_scheduler`` hides its start-up heap from the cyclic garbage collector while the
worker runs (``gc.freeze``: a herd of no-op runs spent about half the worker's CPU in
``gc_collect_main`` walking Django's objects), and gives it back when the command returns,
so a command run inside a longer process (a test) leaves nothing frozen."""

from __future__ import annotations

import gc

import pytest
from django.core.management import call_command

from django_durable_schedules.worker import Worker, heap


def test_freeze_then_thaw():
    gc.unfreeze()
    try:
        frozen = heap.freeze_startup_heap()
        assert frozen > 0 and gc.get_freeze_count() == frozen
        # Objects made afterwards are collected as usual.
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1
    finally:
        heap.thaw_startup_heap()
    assert gc.get_freeze_count() == 0


@pytest.mark.django_db(transaction=True)
def test_run_scheduler_runs_frozen_and_thaws(monkeypatch):
    seen: list[int] = []
    real_run = Worker.run

    def run(self: Worker) -> int:
        seen.append(gc.get_freeze_count())
        return real_run(self)

    monkeypatch.setattr(Worker, "run", run)
    call_command("run_scheduler", "--once", verbosity=0)
    assert seen and seen[0] > 0  # the worker ran with the start-up heap frozen
    assert gc.get_freeze_count() == 0  # and the command gave it back
