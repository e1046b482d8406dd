"""``run_scheduler`` with every SQL statement counted (used by ``bench/idle.py``).

    python bench/counting_worker.py COUNT_FILE -- [run_scheduler options]

Adds a ``connection.execute_wrapper`` to every database connection the worker opens (the
engine's own code is untouched) and rewrites COUNT_FILE with the running total about
every 0.5 s and at exit, as ``<statements> <unix time>``. ``DDS_BENCH_LOG_SQL=1`` also
prints each statement (time and first 120 characters) on stderr.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    count_file = Path(sys.argv[1])
    rest = sys.argv[sys.argv.index("--") + 1 :]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django.core.management import execute_from_command_line
    from django.db.backends.signals import connection_created

    lock = threading.Lock()
    total = [0]

    log_sql = os.environ.get("DDS_BENCH_LOG_SQL") == "1"

    def counter(execute, sql, params, many, context):
        with lock:
            total[0] += 1
        if log_sql:
            print(f"{time.time():.3f} SQL {sql[:120]}", file=sys.stderr, flush=True)
        return execute(sql, params, many, context)

    def on_connect(sender, connection, **kwargs):
        # The wrapper object outlives its connections (every reconnect fires this again).
        if counter not in connection.execute_wrappers:
            connection.execute_wrappers.append(counter)

    connection_created.connect(on_connect, weak=False)

    def dump() -> None:
        count_file.write_text(f"{total[0]} {time.time()}\n")

    def loop() -> None:
        while True:
            dump()
            time.sleep(0.5)

    threading.Thread(target=loop, daemon=True).start()
    atexit.register(dump)
    execute_from_command_line(["manage.py", "run_scheduler", *rest])


if __name__ == "__main__":
    main()
