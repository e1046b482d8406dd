"""scripts/kernel-figures prints every figure of issue #25's table, each with its goal and a
verdict, and exits 0 unless ``--strict`` (bench/kernel_figures.py counts them)."""

import re
import subprocess
import sys
from pathlib import Path

from django.db import connection

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r"^\((?P<key>[a-h])\) .+  goal .+ (?P<verdict>PASS|FAIL)$")


def test_the_script_prints_every_figure_with_its_goal():
    # (g) is measured on SQLite whatever the suite's database: once, in the SQLite run.
    sqlite = connection.vendor == "sqlite"
    done = subprocess.run(
        [sys.executable, "bench/kernel_figures.py", "--sites", *([] if sqlite else ["--skip-sql"])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    rows = {m["key"]: line for line in done.stdout.splitlines() if (m := ROW.match(line))}
    assert sorted(rows) == list("abcdefgh"), done.stdout
    assert "error" not in rows["g"] and ("skipped" not in rows["g"]) == sqlite, rows["g"]
    assert re.search(r"\(c\) relative imports .*  \d+ ", rows["c"]), rows["c"]
    assert re.search(r"\d+ of \d+", rows["h"]), rows["h"]
    assert re.search(r"\d+ of 8 figures meet their goal", done.stdout)


def test_the_wrapper_is_executable():
    assert (ROOT / "scripts" / "kernel-figures").stat().st_mode & 0o111
