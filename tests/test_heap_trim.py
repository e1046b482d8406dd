"""The worker hands the heap memory its threads freed back to the system (issue #24 item
16): glibc keeps the free pages of a thread's malloc arena while a chunk above them lives,
so resident memory creeps up although no Python object grows. ``heap.trim`` (glibc's
``malloc_trim``) returns them; the worker calls it every ``HEAP_TRIM_SECONDS`` before it
sleeps."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.core.checks import run_checks
from django.test.utils import override_settings

from django_durable_schedules.conf import app_settings
from django_durable_schedules.worker import heap

ROOT = Path(__file__).resolve().parents[1]

FRAGMENT = textwrap.dedent(
    """
    import json, threading
    from django_durable_schedules.worker import heap

    def rss():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

    held = []

    def work():  # what a callback thread leaves behind: most freed, a few chunks alive
        blobs = [bytes(4096) for _ in range(10000)]
        held.append(blobs[::50] + [blobs[-1]])
        del blobs

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    before = rss()
    released = heap.trim()
    print(json.dumps({"before": before, "after": rss(), "released": released}))
    """
)


@pytest.mark.skipif(not heap.available(), reason="glibc's malloc_trim only")
def test_a_trim_returns_what_threads_freed_to_the_system():
    out = subprocess.run(
        [sys.executable, "-c", FRAGMENT], cwd=ROOT, capture_output=True, text=True, check=True
    )
    got = json.loads(out.stdout)
    # 4 threads x 40 MiB allocated, 2 % kept: glibc kept almost all of it resident.
    assert got["before"] > 100, got
    assert got["released"] and got["after"] < got["before"] / 2, got


def test_the_duty_trims_at_its_cadence_only():
    now = [0.0]
    duty = heap.HeapTrim(60.0, clock=lambda: now[0])
    if not heap.available():
        assert duty.every == 0 and not duty.maybe()
        return
    assert not duty.maybe()
    now[0] = 59.9
    assert not duty.maybe()
    now[0] = 60.0
    assert duty.maybe() and duty.trims == 1
    now[0] = 100.0
    assert not duty.maybe()
    assert not heap.HeapTrim(0.0, clock=lambda: now[0]).maybe()


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(None, 0.0), (0, 0.0), (-5, 0.0), (30, 30.0), (0.1, 1.0), (1e12, 86400.0), ("x", 60.0)],
)
def test_the_setting_is_bounded(value, seconds):
    with override_settings(DURABLE_SCHEDULES={"HEAP_TRIM_SECONDS": value}):
        assert app_settings.HEAP_TRIM_SECONDS == seconds


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["x", float("nan"), True])
def test_a_setting_that_is_no_number_is_reported(value):
    with override_settings(DURABLE_SCHEDULES={"HEAP_TRIM_SECONDS": value}):
        ids = [m.id for m in run_checks() if "HEAP_TRIM_SECONDS" in m.msg]
    assert ids == ["durable_schedules.E006"]
