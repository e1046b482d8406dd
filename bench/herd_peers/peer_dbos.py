"""DBOS in the herd (``bench/herd.py --peers dbos``); runs in DBOS's venv.

    python peer_dbos.py setup     # launch once, DBOS.apply_schedules with N schedules
    python peer_dbos.py worker    # one DBOS process of the app, blocking

How DBOS 3 declares cron jobs (its Python docs, "Scheduling Workflows"): schedules are
stored in the system database; ``DBOS.apply_schedules([...])`` creates a set of named
schedules atomically, each ``{"schedule_name", "workflow_fn", "schedule", "context"}``,
after ``DBOS.launch()``; the workflow takes ``(scheduled_time, context)``. (The
``@DBOS.scheduled`` decorator of DBOS 1-2 is gone in 3.x.) One workflow, N schedules
``herd-<i>`` with ``context=i``. Configuration: ``DBOS(config={"name": "herd",
"system_database_url": ...})``, nothing else: every process runs a thread per schedule
which sleeps to the next cron instant plus a random jitter of up to 10% of the sleep
(capped at 10 s; DBOS's own "thundering herd" guard), then enqueues the workflow with the
id ``sched-<name>-<instant>`` unless it exists (so several processes do not duplicate a
slot); the queue runs it on one of the processes.
"""

from __future__ import annotations

import sys
import threading
from datetime import datetime
from typing import Any

import herd_record
from dbos import DBOS

DBOS(
    config={
        "name": "herd",
        "system_database_url": herd_record.URL.replace("postgres://", "postgresql://", 1),
    }
)


@DBOS.workflow()
def noop(scheduled_time: datetime, context: Any) -> None:
    """The job: record its start and its scheduled instant."""
    herd_record.record(int(context), scheduled_time)


def setup() -> None:
    DBOS.launch()
    DBOS.apply_schedules(
        [
            {
                "schedule_name": f"herd-{i:05d}",
                "workflow_fn": noop,
                "schedule": herd_record.CRON,
                "context": i,
            }
            for i in range(herd_record.N)
        ]
    )
    print(len(DBOS.list_schedules()))
    DBOS.destroy()


def worker() -> None:
    DBOS.launch()
    herd_record.ready()
    threading.Event().wait()


if __name__ == "__main__":
    {"setup": setup, "worker": worker}[sys.argv[1]]()
