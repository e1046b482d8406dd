"""APScheduler 3 in the herd (``bench/herd.py --peers apscheduler``); runs in its venv.

    python peer_aps.py setup     # N jobs with a CronTrigger('* * * * *') in the job store
    python peer_aps.py worker    # one BlockingScheduler on the same job store

How APScheduler 3 declares a cron job (its user guide, "Adding jobs", "cron" trigger):
``scheduler.add_job(func, CronTrigger.from_crontab('* * * * *'), id=..., kwargs=...)``,
one per job, stored in a ``SQLAlchemyJobStore`` on the peer's PostgreSQL database
(``postgresql+psycopg://``). Everything else is the default: a ``ThreadPoolExecutor`` of
10 threads, ``misfire_grace_time`` 1 s, ``coalesce`` off, ``max_instances`` 1. Its FAQ
says a job store must not be shared by several schedulers ("Sharing a persistent job store
among two or more processes will lead to incorrect scheduler behavior like duplicate
execution or the scheduler missing jobs"), so the bench runs ONE scheduler process: the
SIGKILL of the second minute leaves none. APScheduler 3 does not hand the scheduled
instant to the job: the bench takes the minute the start falls in.
"""

from __future__ import annotations

import sys
from datetime import UTC

import herd_record


def noop(job: int = 0) -> None:
    """The job: record its start."""
    herd_record.record(job)


def jobstores() -> dict[str, object]:
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore

    url = herd_record.URL.replace("postgres://", "postgresql+psycopg://", 1)
    return {"default": SQLAlchemyJobStore(url=url)}


def setup() -> None:
    from apscheduler.schedulers.background import BackgroundScheduler
    from apscheduler.triggers.cron import CronTrigger

    scheduler = BackgroundScheduler(jobstores=jobstores(), timezone=UTC)
    scheduler.start(paused=True)
    for i in range(herd_record.N):
        scheduler.add_job(
            "peer_aps:noop",
            CronTrigger.from_crontab(herd_record.CRON, timezone=UTC),
            id=f"herd-{i:05d}",
            kwargs={"job": i},
            replace_existing=True,
        )
    print(len(scheduler.get_jobs()))
    scheduler.shutdown(wait=False)


def worker() -> None:
    from apscheduler.schedulers.blocking import BlockingScheduler

    scheduler = BlockingScheduler(jobstores=jobstores(), timezone=UTC)
    herd_record.ready()
    scheduler.start()


if __name__ == "__main__":
    {"setup": setup, "worker": worker}[sys.argv[1]]()
