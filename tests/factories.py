"""factory-boy factories with traits for the common schedule shapes."""

import uuid
from datetime import UTC, datetime, timedelta

import factory

from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule

T0 = datetime(2027, 6, 1, 10, 0, 0, tzinfo=UTC)


class ScheduleFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Schedule

    name = factory.Sequence(lambda n: f"sched-{n}")
    callback = "tests.noop"
    kind = "interval"
    interval_seconds = 60
    timezone = "UTC"
    created_at = T0

    class Params:
        cron_job = factory.Trait(kind="cron", interval_seconds=None, cron="*/5 * * * *")
        once = factory.Trait(kind="once", interval_seconds=None, run_at=T0 + timedelta(minutes=5))


class AttemptFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = RunAttempt

    schedule = factory.SubFactory(ScheduleFactory)
    schedule_name = factory.LazyAttribute(lambda o: o.schedule.name)
    occurrence = factory.Sequence(lambda n: n + 1)
    attempt = 1
    scheduled_for = T0
    claimed_at = T0
    lease_token = factory.LazyFunction(uuid.uuid4)
    lease_expires_at = T0 + timedelta(seconds=30)
    worker = "factory"
    idempotency_key = factory.LazyAttribute(lambda o: f"{o.schedule.id}:{o.occurrence}")


class ReceiptFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = RunReceipt

    attempt = factory.SubFactory(AttemptFactory)
    schedule = factory.LazyAttribute(lambda o: o.attempt.schedule)
    occurrence = factory.LazyAttribute(lambda o: o.attempt.occurrence)
    status = "skipped"
    # As state.complete writes it: the occurrence for a success, NULL otherwise (a CHECK).
    succeeded_occurrence = factory.LazyAttribute(
        lambda o: o.occurrence if o.status in ("succeeded", "enqueued") else None
    )
    finished_at = T0 + timedelta(seconds=1)


DAY = timedelta(days=1)


def due_schedules(rows, *, due=T0, offset=0, spacing=0, prefix="s", **fields):
    """Bulk-create (one INSERT, and one of their ``created`` events: nothing planned)
    active hourly ``tests.noop`` schedules in UTC, created a day before ``due``, and return
    them.

    ``rows``: a count (named ``{prefix}-0000``, ``{prefix}-0001``, ...), or names, or
    dicts of one row's fields (its ``name``, an ``offset`` of its own, any model field).
    Row ``i`` is due at ``due`` plus ``offset + i * spacing`` seconds (plus its own
    ``offset``); ``fields`` go on every row (``concurrency_group=``, ``priority=``,
    ``pool=``...), a row's own fields win."""
    if isinstance(rows, int):
        rows = [f"{prefix}-{i:04d}" for i in range(rows)]
    made = []
    for i, row in enumerate(rows):
        own = {"name": row} if isinstance(row, str) else dict(row)
        seconds = offset + i * spacing + own.pop("offset", 0)
        values = {
            "callback": "tests.noop",
            "kind": "interval",
            "interval_seconds": 3600,
            "timezone": "UTC",
            "created_at": due - DAY,
            "next_run_at": due + timedelta(seconds=seconds),
            **fields,
            **own,
        }
        made.append(Schedule(**values))
    return Schedule.objects.bulk_create(made)


def complete_elsewhere(outcomes):
    """Complete ``outcomes`` (``state.Outcome``) on another connection, committed before
    this returns: a worker ending runs in the middle of this thread's transaction."""
    import threading

    from django.db import connections

    from django_durable_schedules import state

    def complete():
        try:
            state.complete(outcomes)
        finally:
            connections.close_all()

    thread = threading.Thread(target=complete)
    thread.start()
    thread.join()
