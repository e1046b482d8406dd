"""oban (Python) in the herd (``bench/herd.py --peers oban``); runs in oban's venv.

    python peer_oban.py setup     # exec: python -m oban install
    python peer_oban.py worker    # exec: python -m oban start --cron-modules peer_oban

How oban declares cron jobs (its Python docs, "Periodic jobs"): ``@worker(queue=...,
cron="* * * * *")`` on a worker class with ``async def process(self, job)``. A cron entry
is a worker class (it takes no arguments), so the N jobs are N classes ``Herd<i>``
built in a loop at import, each recording job ``i`` and the slot oban stamps in
``job.meta["cron_at"]``. Only the leader (elected through the ``oban_leaders`` table)
inserts the minute's cron jobs, so several nodes do not duplicate them; every node runs
the ``default`` queue. ``oban start`` with its defaults and ``--queues default:10`` (the
CLI's own example; a queue must be named), ``--cron-modules peer_oban``.
"""

from __future__ import annotations

import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import herd_record


def make(i: int) -> type:
    """The worker class of job ``i``."""

    async def process(self: Any, job: Any) -> None:
        herd_record.record(i, datetime.fromisoformat(job.meta["cron_at"]))

    name = f"Herd{i:05d}"
    return type(name, (), {"process": process, "__module__": __name__, "__qualname__": name})


if __name__ == "__main__":
    url = herd_record.URL.replace("postgres://", "postgresql://", 1)
    os.environ["PYTHONPATH"] = str(Path(__file__).resolve().parent)
    if sys.argv[1] == "setup":
        args = ["install", "--dsn", url]
    else:
        args = ["start", "--dsn", url, "--queues", "default:10", "--cron-modules", "peer_oban"]
        args += ["--log-level", "warning"]
    os.execv(sys.executable, [sys.executable, "-m", "oban", *args])
else:
    from oban import worker

    for _i in range(herd_record.N):
        _cls = worker(queue="default", cron=herd_record.CRON)(make(_i))
        globals()[_cls.__name__] = _cls
    if herd_record.WORKER != "setup":
        herd_record.ready()
