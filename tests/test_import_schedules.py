"""``manage.py import_schedules`` against the real django-celery-beat and django-q2 models.

Their apps are installed only by ``tests.settings_import``; run this file with
``python -m pytest --ds tests.settings_import tests/test_import_schedules.py`` (.ci/run
does). Under the default settings it is skipped, except for the not-installed error.
"""

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.test.utils import override_settings

from django_durable_schedules.models import Schedule, ScheduleEvent

pytestmark = pytest.mark.django_db(transaction=True)
needs_beat = pytest.mark.skipif(
    not apps.is_installed("django_celery_beat"), reason="needs --ds tests.settings_import"
)
needs_q = pytest.mark.skipif(
    not apps.is_installed("django_q"), reason="needs --ds tests.settings_import"
)
T = datetime(2027, 6, 1, 6, 15, tzinfo=UTC)


def run(*args):
    out = StringIO()
    call_command("import_schedules", *args, stdout=out)
    return out.getvalue()


@pytest.mark.skipif(apps.is_installed("django_celery_beat"), reason="installed")
def test_a_source_that_is_not_installed_is_an_error():
    with pytest.raises(CommandError, match="not in INSTALLED_APPS"):
        run("--from", "celery-beat")


@needs_beat
def test_import_from_celery_beat():
    from django_celery_beat.models import (
        ClockedSchedule,
        CrontabSchedule,
        IntervalSchedule,
        PeriodicTask,
        SolarSchedule,
    )

    every = IntervalSchedule.objects.create(every=10, period=IntervalSchedule.MINUTES)
    cron = CrontabSchedule.objects.create(
        minute="0", hour="4", day_of_week="1-5", timezone="Europe/Paris"
    )
    clock = ClockedSchedule.objects.create(clocked_time=T + timedelta(days=30))
    solar = SolarSchedule.objects.create(event="sunset", latitude=48.85, longitude=2.35)
    PeriodicTask.objects.create(
        name="ten minutes", task="proj.tasks.tick", interval=every, kwargs='{"n": 1}'
    )
    PeriodicTask.objects.create(name="weekday 4am", task="tests.echo", crontab=cron, enabled=False)
    PeriodicTask.objects.create(name="once", task="tests.noop", clocked=clock, one_off=True)
    PeriodicTask.objects.create(name="sun", task="tests.noop", solar=solar)
    PeriodicTask.objects.create(name="not ours", task="proj.tasks.other", interval=every)

    out = run("--from", "celery-beat", "--dry-run", "--callback-map", "proj.tasks.tick=tests.noop")
    assert "dry run: 3 would create, 2 skipped" in out and not Schedule.objects.exists()

    out = run(
        "--from", "celery-beat", "--callback-map", "proj.tasks.tick=tests.noop", "--disable-source"
    )
    assert "3 created, 2 skipped" in out
    assert "solar schedules have no equivalent" in out and "'proj.tasks.other'" in out
    tick = Schedule.objects.get(name="ten-minutes")
    assert (tick.kind, tick.interval_seconds, tick.callback, tick.payload) == (
        "interval",
        600,
        "tests.noop",
        {"n": 1},
    )
    wk = Schedule.objects.get(name="weekday-4am")
    assert (wk.cron, wk.timezone, wk.status) == ("0 4 * * 1-5", "Europe/Paris", "paused")
    once = Schedule.objects.get(name="once")
    assert once.kind == "once" and once.run_at == T + timedelta(days=30)
    assert ScheduleEvent.objects.filter(source="import", action="created").count() == 3
    assert set(PeriodicTask.objects.filter(enabled=True).values_list("name", flat=True)) == {
        "sun",
        "not ours",
    }

    out = run("--from", "celery-beat", "--callback-map", "proj.tasks.tick=tests.noop")
    assert "3 exists, 2 skipped" in out and Schedule.objects.count() == 3


@needs_q
def test_import_reads_every_form_django_q2_itself_writes():
    """Rows created through django-q2's own API: ``schedule()`` stores kwargs as a dict
    literal (``'{}'``, ``"{'x': 1, 'y': 'b'}"``); the admin and older code the keyword form."""
    from django_q.models import Schedule as QSchedule
    from django_q.tasks import schedule

    schedule("tests.noop", name="plain", schedule_type=QSchedule.HOURLY, next_run=T)
    schedule("tests.echo", 1, "a", x=1, y="b", name="with-args", schedule_type="D", next_run=T)
    QSchedule.objects.create(
        name="keywords", func="tests.echo", schedule_type="D", next_run=T, kwargs="x=1, y='b'"
    )
    assert set(QSchedule.objects.values_list("kwargs", flat=True)) >= {"{}", "x=1, y='b'"}
    out = run("--from", "django-q2")
    assert "3 created" in out, out
    with_args = Schedule.objects.get(name="with-args")
    assert with_args.payload == {"x": 1, "y": "b", "args": [1, "a"]}
    assert Schedule.objects.get(name="keywords").payload == {"x": 1, "y": "b"}
    assert Schedule.objects.get(name="plain").payload == {}


@needs_q
def test_import_from_django_q2():
    from django_q.models import Schedule as QSchedule

    QSchedule.objects.create(
        name="nightly",
        func="proj.jobs.nightly",
        schedule_type="D",
        next_run=T,
        kwargs="dry_run=False",
    )
    QSchedule.objects.create(func="tests.noop", schedule_type="I", minutes=5, repeats=4, next_run=T)
    QSchedule.objects.create(
        name="cron job", func="tests.noop", schedule_type="C", cron="*/20 8-18 * * 1-5", next_run=T
    )
    QSchedule.objects.create(
        name="done", func="tests.noop", schedule_type="O", repeats=0, next_run=T
    )
    with override_settings(TIME_ZONE="America/New_York"):
        out = run(
            "--from",
            "django-q2",
            "--callback-map",
            "proj.jobs.nightly=tests.echo",
            "--disable-source",
        )
    assert "3 created, 1 skipped" in out and "nothing left to run" in out
    nightly = Schedule.objects.get(name="nightly")
    assert (nightly.kind, nightly.cron, nightly.timezone) == (
        "cron",
        "15 2 * * *",
        "America/New_York",
    )
    assert nightly.payload == {"dry_run": False}
    five = Schedule.objects.get(metadata__source_id=str(QSchedule.objects.get(minutes=5).pk))
    assert five.name.startswith("django-q-") and five.interval_seconds == 300
    assert five.max_runs == 4
    assert Schedule.objects.get(name="cron-job").cron == "*/20 8-18 * * 1-5"
    assert list(QSchedule.objects.exclude(repeats=0).values_list("name", flat=True)) == []
    out = run("--from", "django-q2", "--callback-map", "proj.jobs.nightly=tests.echo")
    assert "3 exists" in out and Schedule.objects.count() == 3


@needs_beat
def test_the_migrating_recipe_installs_everything_django_celery_beat_needs_but_django():
    """Issue #31 item 6: docs/migrating.md's recipe installs django-celery-beat with
    ``--no-deps`` and then its dependencies; it left out ``celery``, so the pasted recipe
    gave an app that cannot be imported. Every requirement of the installed release (but
    Django's pin, and markers for old Pythons) must be on the recipe's second line."""
    import shlex
    from importlib.metadata import requires
    from pathlib import Path

    from packaging.requirements import Requirement

    doc = (Path(__file__).resolve().parents[1] / "docs" / "migrating.md").read_text()
    commands = [x.strip() for x in doc.splitlines() if x.strip().startswith("$ pip install")]
    line = next(x for x in commands if "--no-deps" not in x)
    named = {Requirement(t).name.lower() for t in shlex.split(line.split("pip install", 1)[1])}
    wanted = {
        Requirement(r).name.lower()
        for r in requires("django-celery-beat") or []
        if Requirement(r).marker is None or Requirement(r).marker.evaluate()
    } - {"django"}
    assert wanted and wanted <= named, f"missing from the recipe: {sorted(wanted - named)}"
