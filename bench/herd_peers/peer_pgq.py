"""pgqueuer in the herd (``bench/herd.py --peers pgqueuer``); runs in pgqueuer's venv.

    python peer_pgq.py setup     # pgq install (the schema)
    python peer_pgq.py worker    # asyncio.run: factory(), then PgQueuer.run()

How pgqueuer declares cron jobs (its docs, "Scheduler"/"Recurring jobs"): the decorator
``@pgq.schedule(entrypoint, "* * * * *")`` on an ``async def`` taking the ``Schedule``;
the schedules are upserted into ``pgqueuer_schedules`` when ``pgq run`` starts and every
runner polls for due rows, taking them with a row update (several runners do not run a
slot twice; a dispatched schedule is heartbeated, a stale one is picked again). N
entrypoints ``herd-<i>``, each recording job ``i``. Driver: ``PsycopgDriver`` on one
``psycopg.AsyncConnection`` (autocommit), as its quick start; ``PgQueuer.run()`` with its
defaults (the ones ``pgq run`` passes). Not ``pgq run`` itself: in pgqueuer 1.6.0 it
fails before starting, whatever ``--log-level``
(``AttributeError: 'str' object has no attribute 'name'`` in ``setup_fancy_logger``: the
option's parser returns a str where an enum is expected). The scheduled instant is not handed to the job as such: the bench takes the
minute the start falls in.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import herd_record


async def factory() -> Any:
    """What ``pgq run`` calls: a PgQueuer with the N schedules."""
    import psycopg
    from pgqueuer import PgQueuer
    from pgqueuer.db import PsycopgDriver

    conn = await psycopg.AsyncConnection.connect(herd_record.URL, autocommit=True)
    pgq = PgQueuer(PsycopgDriver(conn))
    for i in range(herd_record.N):

        def job(i: int = i) -> Any:
            async def noop(schedule: Any) -> None:
                herd_record.record(i)

            return noop

        pgq.schedule(f"herd-{i:05d}", herd_record.CRON)(job())
    herd_record.ready()
    return pgq


def pgq(*args: str) -> list[str]:
    return [sys.executable, "-m", "pgqueuer", "--pg-dsn", herd_record.URL, *args]


async def worker() -> None:
    """One runner: the factory's PgQueuer, run until the process is stopped."""
    await (await factory()).run()


if __name__ == "__main__":
    if sys.argv[1] == "setup":
        os.execv(sys.executable, pgq("install"))
    asyncio.run(worker())
