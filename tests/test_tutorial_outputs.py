"""docs/tutorial.md's quoted outputs, made by following the tutorial in a fresh project.

A new ``django-admin startproject mysite`` + ``startapp jobs`` in a temporary directory
gets the tutorial's own ``settings.py`` lines, ``urls.py`` and ``jobs/schedules.py`` (read
from the tutorial's code blocks), with this checkout's package on ``PYTHONPATH`` and the
test's Python; then the commands the tutorial runs, in its order, on the project's SQLite
database. Each console block of the tutorial preceded by ``<!-- output: NAME -->`` must
equal what the commands printed, once the parts that differ from run to run (times,
durations, worker names, ids, run counts) are normalised on both sides. So a changed start
line, a new migration or a reworded message fails here until the tutorial says it too.

``DDS_REGENERATE_DOCS=1`` rewrites those blocks from this run instead of asserting.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TUTORIAL = REPO / "docs" / "tutorial.md"
REGENERATE = os.environ.get("DDS_REGENERATE_DOCS") == "1"

pytestmark = pytest.mark.process

#: ``<!-- output: NAME -->``, then a fenced block: group 1 the name, 2 the fence's opening
#: line, 3 the block's text.
MARKED_BLOCK = re.compile(r"<!-- output: ([\w-]+) -->\n(```\w*\n)(.*?)```", re.S)

# What differs from run to run, replaced on both sides before comparing.
VARYING = [
    # 2026-12-01 12:44:59,913 / 2026-12-01T12:44:56Z / 2026-12-01T12:49:06.597000Z
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?Z?"), "<TIME>"),
    (re.compile(r"\bCES?T\b"), "<ZONE>"),  # Paris in winter or summer
    (re.compile(r"\b\d+\.\d+s\b"), "<SECONDS>"),  # durations and lateness
    (re.compile(r"\b[\w.-]+:\d+:[0-9a-f]{6}\b"), "<WORKER>"),  # host:pid:random
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<ID>"),
    (re.compile(r"\((\d+) runs?\)"), "(<N> runs)"),  # a worker's run count when it stops
    (re.compile(r"occurrence \d+ attempt"), "occurrence <N> attempt"),
    # The API's numbers that vary: seconds, and which occurrence a receipt is of.
    (re.compile(r'("(?:\w*seconds|lateness|occurrence)": ?)[-\d.e+]+'), r"\1<N>"),
    (re.compile(r"(<ID>:)\d+"), r"\1<N>"),
    (re.compile(r"<TIME>[+-]\d\d:\d\d"), "<TIME>"),  # a local time's offset
    (re.compile(r"#\d+\.(\d+)"), r"#<N>.\1"),  # occurrence numbers after a restart vary
]


def normalised(text: str) -> str:
    """``text`` with what varies between runs replaced by placeholders."""
    for pattern, placeholder in VARYING:
        text = pattern.sub(placeholder, text)
    return text


def code_block(text: str, first_line: str) -> str:
    """The tutorial's first fenced code block whose first line starts with ``first_line``."""
    for block in re.findall(r"```\w*\n(.*?)```", text, re.S):
        if block.startswith(first_line):
            return block
    raise AssertionError(f"docs/tutorial.md has no code block starting with {first_line!r}")


class Site:
    """The tutorial's ``mysite`` project: runs ``manage.py`` commands and keeps what each
    console block of the tutorial shows (``$ python manage.py ...`` and its output)."""

    def __init__(self, root: Path):
        self.root = root
        self.dir = root / "mysite"
        self.env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL")
        }
        self.env.update(PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
        self.returncode = 0  # the last command's

    def run(self, *args: str, ok: bool = True, cwd: Path | None = None) -> str:
        """``python manage.py ARGS`` (stdout and stderr, as a terminal shows them)."""
        done = subprocess.run(
            [sys.executable, "manage.py", *args] if cwd is None else [sys.executable, *args],
            cwd=cwd or self.dir,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=60,
        )
        self.returncode = done.returncode
        if ok:
            assert done.returncode == 0, done.stdout
        return done.stdout

    def console(self, *args: str, ok: bool = True) -> str:
        """The console block of one command: its prompt line, then its output."""
        return f"$ python manage.py {' '.join(args)}\n{self.run(*args, ok=ok)}"

    def worker(self, *args: str) -> Worker:
        return Worker(self, *args)


class Worker:
    """A ``run_scheduler`` of the site, its log read as it comes."""

    def __init__(self, site: Site, *args: str):
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "run_scheduler", *args],
            cwd=site.dir,
            env=site.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def wait_for(self, pattern: str, timeout: float = 90) -> None:
        """Wait until a log line matches ``pattern`` (a regular expression)."""
        deadline = time.monotonic() + timeout
        while not any(re.search(pattern, line) for line in self.lines):
            assert self.proc.poll() is None, "".join(self.lines)
            assert time.monotonic() < deadline, f"no {pattern!r} in:\n{''.join(self.lines)}"
            time.sleep(0.05)

    def stop(self, *signals: int) -> None:
        for sig in signals or (signal.SIGTERM,):
            self.proc.send_signal(sig)
            time.sleep(0.2)
        self.proc.wait(30)
        self._reader.join(10)  # the last lines

    def log(self, *words: str) -> str:
        """The log lines that contain one of ``words`` (all of them without words)."""
        return "".join(
            line for line in self.lines if not words or any(word in line for word in words)
        )

    def log_from(self, first: str, *words: str) -> str:
        """The log lines from the first that contains ``first`` on, those that contain it
        or one of ``words`` (a run's ``started`` line left out)."""
        lines = self.log(first, *words).splitlines(True)
        start = next(i for i, line in enumerate(lines) if first in line)
        return "".join(line for line in lines[start:] if " started (" not in line)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def migrate_output(output: str) -> str:
    """``migrate``'s output as the tutorial quotes it: its header, ``...``, and the last two
    migrations it applied (this app's latest, and sessions')."""
    lines = output.splitlines()
    return "\n".join([*lines[:3], "...", *lines[-2:]]) + "\n"


def check_output(output: str) -> str:
    """``check``'s output with the hint's list of known keys cut after three."""
    return re.sub(r"(Known keys: (?:\w+, ){3})[^\n]*", r"\1...", output)


#: Run by ``manage.py shell -c`` in the tutorial's site: what curl would print for the
#: tutorial's API calls (the response bodies), and the receipt and attempt of
#: reminders.ops' triggered run, as JSON.
API_CALLS = """
import json
from rest_framework.test import APIClient
from django_durable_schedules.models import Schedule
client = APIClient(HTTP_HOST="localhost")
client.login(username="admin", password="tutorial")
ops = Schedule.objects.get(name="reminders.ops")
upcoming = client.get(f"/api/schedules/{ops.pk}/upcoming/?count=2")
# The triggered run's (a slot of the even minute may have run too).
attempts = client.get(f"/api/attempts/?schedule={ops.pk}").json()["results"]
attempt = next(a for a in attempts if a["origin"] == "triggered")
receipts = client.get(f"/api/receipts/?schedule={ops.pk}").json()["results"]
receipt = next(r for r in receipts if r["attempt"] == attempt["id"])
probe = APIClient(HTTP_HOST="localhost").get("/api/health/probe/")
assert probe.status_code == 200, probe.content
print(json.dumps({
    "upcoming": upcoming.content.decode(),
    "probe": probe.content.decode(),
    "receipt": receipt,
    "attempt": attempt,
}))
"""


def health_output(output: str) -> str:
    """``schedules health``'s JSON as the tutorial quotes it: the verdict, its problems, and
    the failing and live-worker counts, the other keys left out as ``...``."""
    health = json.loads(output)
    shown = [
        f'  "{key}": {json.dumps(health[key])},'
        for key in ("healthy", "problems", "failing", "live_workers")
    ]
    return "\n".join(["{", *shown[:2], "  ...", *shown[2:], "  ...", "}"]) + "\n"


def follow_tutorial(tmp_path: Path) -> dict[str, str]:
    """Follow docs/tutorial.md in a new project under ``tmp_path``: the console block of
    each marked output, by name."""
    text = TUTORIAL.read_text()
    site = Site(tmp_path)
    blocks: dict[str, str] = {}

    # 1. Install: a project and an app, the tutorial's settings, URLs and schedules.
    site.run("-m", "django", "startproject", "mysite", cwd=tmp_path)
    site.run("startapp", "jobs")
    settings_file = site.dir / "mysite" / "settings.py"
    # The tutorial's lines replace startproject's INSTALLED_APPS (a later assignment wins).
    settings = settings_file.read_text() + "\n" + code_block(text, "INSTALLED_APPS = [")
    settings_file.write_text(settings.replace('"LEASE_SECONDS"', '"LEASE_SECOND"'))
    blocks["check-misspelled-key"] = check_output(site.run("check", ok=False))
    settings_file.write_text(settings)
    assert site.run("check") == "System check identified no issues (0 silenced).\n"
    (site.dir / "mysite" / "urls.py").write_text(
        code_block(text, "from django.contrib import admin")
    )
    (site.dir / "jobs" / "schedules.py").write_text(
        code_block(text, "# jobs/schedules.py").split("\n", 1)[1]
    )

    # 2. Your first schedules: migrate creates them.
    migrate = "$ python manage.py migrate\n" + migrate_output(site.run("migrate"))
    blocks["migrate-and-list"] = migrate + site.console("schedules", "list")
    blocks["upcoming-nightly"] = site.console(
        "schedules", "upcoming", "reports.nightly", "--count", "3"
    )

    # 3. The worker: it starts, runs digest.build twice on its grid, drains on SIGTERM.
    worker = site.worker()
    try:
        # 5. While it waits for digest.build's second slot: a schedule made in the admin
        # (here as a row: the same save), and its fire times.
        site.run(
            "shell",
            "-c",
            "from django_durable_schedules.models import Schedule; "
            "Schedule.objects.create(name='reminders.ops', callback='reminders.send', "
            "kind='cron', cron='*/2 * * * *', timezone='Europe/Paris', "
            "payload={'to': 'ops@example.com'})",
        )
        blocks["upcoming-reminders"] = site.console(
            "schedules", "upcoming", "reminders.ops", "--count", "3"
        )
        # 8. (Meanwhile too) retention, dry run.
        prune = site.console("prune_runs", "--older-than", "30", "--dry-run")
        worker.wait_for(r"digest\.build #2\.1 succeeded")
        worker.stop(signal.SIGTERM)
    finally:
        worker.kill()
    runs = worker.log("starting", "digest.build")
    blocks["worker-runs"] = "$ python manage.py run_scheduler\n" + runs
    blocks["worker-drain"] = worker.log("draining", "stopped")

    # 3, continued: a long callback, drained on the first signal.
    with (site.dir / "jobs" / "schedules.py").open("a") as f:
        f.write("\n\n" + code_block(text, "# jobs/schedules.py, to try the drain"))
    worker = site.worker()
    try:
        worker.wait_for(r"long\.job #\d+\.1 started")
        worker.stop(signal.SIGTERM)
    finally:
        worker.kill()
    blocks["drain-long-job"] = worker.log_from("draining", "long.job #", "stopped")

    # 6. A schedule made in the admin (here as a row) whose callback always raises, at most
    # 3 attempts: retried after 5 s and 10 s, then given up; health meanwhile.
    site.run(
        "shell",
        "-c",
        "from django_durable_schedules.models import Schedule; "
        "Schedule.objects.create(name='partner.import', callback='partner.import', "
        "kind='interval', interval_seconds=3600, max_attempts=3)",
    )
    worker = site.worker()
    try:
        # While its retries wait: 4's Trigger now (the same action) and superuser, and 8's
        # trigger.
        site.run("schedules", "trigger", "reminders.ops")
        site.env["DJANGO_SUPERUSER_PASSWORD"] = "tutorial"
        site.run("createsuperuser", "--noinput", "--username", "admin", "--email", "a@b.example")
        trigger = site.console("schedules", "trigger", "digest.build")
        blocks["trigger-and-prune"] = trigger + prune
        worker.wait_for(r"partner\.import #1\.3 failed")
        blocks["health"] = "$ python manage.py schedules health\n" + health_output(
            site.run("schedules", "health")
        )
        # 5, 6, 7: the API, as curl sees it (the worker is live: the probe answers 200).
        api = json.loads(site.run("shell", "--no-imports", "-c", API_CALLS).splitlines()[-1])
        # A schedule whose callback is not registered: degraded by the worker, unhealthy.
        site.run(
            "shell",
            "-c",
            "from django_durable_schedules.models import Schedule; "
            "Schedule.objects.create(name='legacy.export', callback='legacy.export', "
            "kind='interval', interval_seconds=3600)",
        )
        worker.wait_for(r"legacy\.export degraded")
        unhealthy = site.run("schedules", "health", ok=False)
        assert site.returncode == 1, unhealthy
        blocks["degraded"] = (
            worker.log("legacy.export degraded")
            + "$ python manage.py schedules health; echo $?\n...\n"
            + unhealthy.splitlines()[-1]
            + f"\n{site.returncode}\n"
        )
        worker.stop(signal.SIGTERM)
    finally:
        worker.kill()
    blocks["partner-fails"] = worker.log("partner.import #")
    # The first run of reminders.ops (the trigger's, or its slot's if an even minute came
    # first: the same lines), not interleaved with another's.
    first_run = re.search(r"reminders\.ops #\d+\.1 ", worker.log("reminders.ops #"))
    assert first_run, worker.log()
    blocks["reminders-run"] = worker.log(first_run.group())

    blocks["api-upcoming"] = (
        "$ curl -u admin:PASSWORD 'localhost:8765/api/schedules/<id>/upcoming/?count=2'\n"
        + api["upcoming"]
        + "\n"
    )
    blocks["api-probe"] = "$ curl -s localhost:8765/api/health/probe/\n" + api["probe"] + "\n"
    blocks["api-receipt"] = json.dumps(api["receipt"], indent=4, ensure_ascii=False) + "\n"
    blocks["api-attempt"] = json.dumps(api["attempt"], indent=4, ensure_ascii=False) + "\n"

    # 3, continued: long.job triggered, cut off by a second signal, and run again as the
    # next attempt by another worker once its lease expires.
    blocks["trigger-long-job"] = site.console("schedules", "trigger", "long.job")
    first = site.worker("--lease-seconds", "2")
    try:
        first.wait_for(r"long\.job #\d+\.1 started")
        first.stop(signal.SIGTERM, signal.SIGTERM)
    finally:
        first.kill()
    second = site.worker()
    try:
        second.wait_for(r"long\.job #\d+\.2 succeeded")
        second.stop(signal.SIGTERM)
    finally:
        second.kill()
    blocks["lease-expired"] = second.log_from("lease expired: long.job", "long.job #")
    return blocks


def marked_blocks(text: str) -> dict[str, str]:
    """The tutorial's marked output blocks, by name."""
    return {m.group(1): m.group(3) for m in MARKED_BLOCK.finditer(text)}


def test_tutorial_outputs_are_what_the_commands_print(tmp_path):
    """Every marked output block of docs/tutorial.md is what following the tutorial prints
    today (normalised), and every block the test makes is in the tutorial."""
    made = follow_tutorial(tmp_path)
    text = TUTORIAL.read_text()
    if REGENERATE:
        TUTORIAL.write_text(
            MARKED_BLOCK.sub(
                lambda m: (
                    f"<!-- output: {m.group(1)} -->\n{m.group(2)}"
                    f"{made.get(m.group(1), m.group(3))}```"
                ),
                text,
            )
        )
        text = TUTORIAL.read_text()
    quoted = marked_blocks(text)
    assert sorted(quoted) == sorted(made), "marked blocks and the blocks this test makes differ"
    stale = {
        name: (quoted[name], made[name])
        for name in made
        if normalised(quoted[name]) != normalised(made[name])
    }
    assert not stale, "docs/tutorial.md is stale (DDS_REGENERATE_DOCS=1 rewrites it):\n" + (
        "\n".join(f"== {n}\n-- quoted:\n{q}-- printed:\n{p}" for n, (q, p) in stale.items())
    )


def test_tutorial_names_the_admin_entries():
    """The tutorial's list of the admin's *Durable schedules* entries is the app's
    registered models, in the admin index's order."""
    from django.apps import apps
    from django.contrib import admin

    models = apps.get_app_config("durable_schedules").get_models()
    names = sorted(
        str(m._meta.verbose_name_plural).capitalize() for m in models if admin.site.is_registered(m)
    )
    words = {
        3: "three",
        4: "four",
        5: "five",
        6: "six",
        7: "seven",
        8: "eight",
        9: "nine",
        10: "ten",
        11: "eleven",
        12: "twelve",
    }
    said = f"**Durable schedules** has {words[len(names)]} entries: {', '.join(names[:-1])} and {names[-1]}."
    flat = " ".join(TUTORIAL.read_text().split())
    assert said in flat, said
