"""django-q2 in the herd (``bench/herd.py --peers django-q2``); runs in django-q2's venv.

    python peer_djq.py setup     # migrate, then N Schedule rows (cron '* * * * *')
    python peer_djq.py worker    # one cluster: ``qcluster`` with the documented defaults

How django-q2 declares a cron job (its docs, "Schedules"): a ``Schedule`` row with
``schedule_type=Schedule.CRON`` and ``cron='* * * * *'`` (croniter installed), created
here with ``Schedule.objects.create``, one per job, each calling ``peer_djq.noop`` with
``job=i``; ``intended_date_kwarg='slot'`` hands the scheduled instant to the job. Broker:
the Django ORM (``Q_CLUSTER = {'name': 'herd', 'orm': 'default'}``), nothing else set:
``workers`` = CPU count, the scheduler runs in each cluster's guard loop every 30 s and
takes the due rows with ``SELECT ... FOR UPDATE`` (so several clusters do not duplicate).
A "worker" of the bench is one ``qcluster`` (its own process group: sentinel, pusher,
monitor and workers), as on several hosts.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import herd_record


def noop(job: int = 0, slot: str | None = None) -> None:
    """The job: record its start (and its scheduled instant)."""
    herd_record.record(job, datetime.fromisoformat(slot) if slot else None)


def configure() -> None:
    import django
    from django.conf import settings

    url = urlsplit(herd_record.URL)
    if not settings.configured:
        settings.configure(
            DATABASES={
                "default": {
                    "ENGINE": "django.db.backends.postgresql",
                    "NAME": url.path.lstrip("/"),
                    "HOST": url.hostname,
                    "PORT": url.port or 5432,
                    "USER": url.username,
                    "PASSWORD": url.password or "",
                }
            },
            INSTALLED_APPS=["django_q"],
            SECRET_KEY="herd-bench",
            USE_TZ=True,
            TIME_ZONE="UTC",
            Q_CLUSTER={"name": "herd", "orm": "default"},
            DEFAULT_AUTO_FIELD="django.db.models.AutoField",
        )
    django.setup()


def setup() -> None:
    from django.core.management import call_command
    from django_q.models import Schedule

    call_command("migrate", verbosity=0)
    first = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    for i in range(herd_record.N):
        Schedule.objects.create(
            name=f"herd-{i:05d}",
            func="peer_djq.noop",
            kwargs=f"job={i}",
            intended_date_kwarg="slot",
            schedule_type=Schedule.CRON,
            cron=herd_record.CRON,
            repeats=-1,
            next_run=first,
        )
    print(Schedule.objects.count())


def worker() -> None:
    from django.core.management import call_command

    herd_record.ready()
    call_command("qcluster")


if __name__ == "__main__":
    configure()
    {"setup": setup, "worker": worker}[sys.argv[1]]()
