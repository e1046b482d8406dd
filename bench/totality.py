"""The long profile of the totality properties (issue 11: no single value stops the fleet).

Runs ``tests/test_totality_properties.py`` with many more Hypothesis examples than the test
suite does, on one database, and prints pytest's output, then one JSON summary line:

    .venv/bin/python bench/totality.py [--examples 500] [--worker-examples 10]
        [--database-url URL] [--seed N] [-k EXPR]

``--database-url`` (default: ``$DATABASE_URL``, else a SQLite file in a temporary
directory) is the server the test database is created on, as in ``scripts/test``:
``postgres://postgres@127.0.0.1:5432/test``, ``mysql://root@127.0.0.1:3306/test``.
``--examples`` sets ``DDS_HYPOTHESIS_EXAMPLES`` (examples per in-process property),
``--worker-examples`` ``DDS_HYPOTHESIS_WORKER_EXAMPLES`` (each one a real worker process
for several seconds). ``--seed`` makes the run reproducible (``--hypothesis-seed``).
Exit status: pytest's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = "tests/test_totality_properties.py"


def vendor_of(url: str | None) -> str:
    if not url or url.startswith("sqlite"):
        return "sqlite"
    if url.startswith(("postgres", "pgsql")):
        return "postgresql"
    return "mysql"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", type=int, default=500, help="examples per in-process property")
    p.add_argument("--worker-examples", type=int, default=10, help="examples of the worker one")
    p.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    p.add_argument("--seed", type=int, help="Hypothesis seed (default: random)")
    p.add_argument("-k", dest="keyword", help="only the properties matching this expression")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    env = dict(os.environ)
    env.update(
        DDS_HYPOTHESIS_EXAMPLES=str(args.examples),
        DDS_HYPOTHESIS_WORKER_EXAMPLES=str(args.worker_examples),
        DDS_HYPOTHESIS_SHRINK="1",  # a failure is reported as its smallest example
    )
    if vendor_of(args.database_url) == "sqlite":
        env.pop("DATABASE_URL", None)
        env["DDS_SQLITE_DIR"] = tempfile.mkdtemp(prefix="dds-totality-")
        if args.database_url:
            env["DATABASE_URL"] = args.database_url
    else:
        env["DATABASE_URL"] = args.database_url
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"]
    cmd += ["-p", "no:logging", "-rA", TESTS]  # -rA: one PASSED/FAILED line per property
    if args.seed is not None:
        cmd.append(f"--hypothesis-seed={args.seed}")
    if args.keyword:
        cmd += ["-k", args.keyword]
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = round(time.monotonic() - started, 1)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    results = {
        name: outcome.lower()
        for outcome, name in re.findall(
            r"^(PASSED|FAILED|ERROR|SKIPPED) \S+::(\w+)", done.stdout, re.M
        )
    }
    summary = {
        "bench": "totality",
        "ok": done.returncode == 0,
        "database": vendor_of(args.database_url),
        "examples": args.examples,
        "worker_examples": args.worker_examples,
        "seed": args.seed,
        "seconds": seconds,
        "properties": results,
        "passed": sum(1 for r in results.values() if r == "passed"),
        "failed": sum(1 for r in results.values() if r in ("failed", "error")),
        "pytest_exit": done.returncode,
    }
    print(json.dumps(summary), flush=True)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
