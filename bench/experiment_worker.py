"""``run_scheduler`` with prototype changes patched in at run time, for measuring proposed
engine changes end to end before anyone edits the engine (its files are not modified).

    DJANGO_SETTINGS_MODULE=tests.settings DATABASE_URL=... \\
        python bench/experiment_worker.py values-update,full-batches -- --batch-size 100 ...

``throughput.py --experiment values-update,full-batches`` starts its workers this way.
Experiments:

* ``values-update``: the schedule batch writer (``db.batch.update_rows``, as the state
  package's ``runs`` and ``completion`` call it) writes all rows of a batch with one
  ``UPDATE ... FROM (VALUES ...)`` (PostgreSQL) instead of one ``UPDATE`` per row;
* ``full-batches``: before completing and claiming, the worker loop waits (at most 5 ms)
  for the runs still in flight, so each pass completes and claims a whole batch instead of
  the two half batches (~16 + ~16 of 32) the loop settles into;
* ``lazy-expiry``: ``expire_leases`` runs at most once a second instead of every pass;
* ``plain-orm``: the hot path without its two uses of Django's non-public ORM API
  (``db/compiled.py`` and ``models/loading.py``, see docs/architecture.md "The hot path's
  ORM"): the claim, completion and wake-up reads evaluate their querysets as the ORM does
  (built and compiled on every call) and rows are loaded through ``Model.__init__``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests package
sys.path.insert(0, str(Path(__file__).resolve().parent))  # profile_cycle

EXPERIMENTS = ("values-update", "full-batches", "lazy-expiry", "plain-orm")


def apply(names: list[str]) -> None:
    from django_durable_schedules import state, worker
    from django_durable_schedules.state import completion, runs

    unknown = set(names) - set(EXPERIMENTS)
    if unknown:
        raise SystemExit(f"unknown experiment(s) {sorted(unknown)}; known: {EXPERIMENTS}")
    if "values-update" in names:
        from profile_cycle import values_update

        runs.update_rows = completion.update_rows = values_update
    if "full-batches" in names:
        original = worker.Worker._complete_finished

        def complete_finished(self: worker.Worker) -> None:
            deadline = time.monotonic() + 0.005
            while (
                self._runs.in_flight
                and self._runs.done.qsize() < len(self._runs.in_flight)
                and time.monotonic() < deadline
            ):
                time.sleep(0.0002)
            original(self)

        worker.Worker._complete_finished = complete_finished
    if "lazy-expiry" in names:
        original_expire = state.expire_leases
        last = [0.0]

        def expire_leases(*args, **kwargs):
            now = time.monotonic()
            if now - last[0] < 1.0:
                return 0
            last[0] = now
            return original_expire(*args, **kwargs)

        state.expire_leases = expire_leases
    if "plain-orm" in names:
        plain_orm()


def plain_orm() -> None:
    """Patch in the ORM as it is: querysets evaluated on every call, ``Model.from_db``."""
    from django.db.models import Model, Q
    from django.db.models.functions import Now

    from django_durable_schedules.db.fast_orm import FastLoading
    from django_durable_schedules.db.locks import locked
    from django_durable_schedules.models import Schedule
    from django_durable_schedules.models.calendars import with_calendar_flag
    from django_durable_schedules.state import completion, runs, workers
    from django_durable_schedules.state.columns import FINISH_UNREAD

    def read_rows(model, key, using, build, *, value=None):
        return list(build())

    def read_values(key, using, build, *, value=None):
        return list(build())

    def read_finished(ids, using, read_clock):
        qs = Schedule.objects.using(using).filter(Q(id__in=ids))
        qs = qs.defer(*FINISH_UNREAD)
        qs = with_calendar_flag(qs)
        if read_clock:
            qs = qs.annotate(_db_now=Now())
        return list(locked(qs, using, skip_locked=True))

    def from_db(cls, db, field_names, values, **kwargs):
        return Model.from_db.__func__(cls, db, field_names, values, **kwargs)

    def build(cls, **values):
        return cls(**values)

    runs.read_rows = read_rows
    workers.read_values = read_values
    completion._read_rows = read_finished
    FastLoading.from_db = classmethod(from_db)
    FastLoading.build = classmethod(build)


def main() -> None:
    argv = sys.argv[1:]
    names = [n for n in argv[0].split(",") if n] if argv and argv[0] != "--" else []
    rest = argv[argv.index("--") + 1 :] if "--" in argv else []
    django.setup()
    apply(names)
    from django.core.management import execute_from_command_line

    execute_from_command_line(["manage.py", "run_scheduler", *rest])


if __name__ == "__main__":
    main()
