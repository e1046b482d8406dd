"""The pure mapping of django-celery-beat / django-q2 rows (duck-typed rows, no apps)."""

from datetime import UTC, datetime
from types import SimpleNamespace
from zoneinfo import ZoneInfo

import pytest

from django_durable_schedules import importers
from django_durable_schedules.models import Schedule, ScheduleEvent

REG = {"send-report", "cleanup"}
T = datetime(2027, 3, 10, 8, 30, 0, 250000, tzinfo=UTC)  # a Wednesday


def beat(**kw):
    row = dict(
        pk=7,
        name="Send report",
        task="app.tasks.send_report",
        args="[]",
        kwargs="{}",
        interval=None,
        crontab=None,
        solar=None,
        clocked=None,
        one_off=False,
        start_time=None,
        expires=None,
        enabled=True,
        last_run_at=None,
        queue=None,
        exchange=None,
        routing_key=None,
        priority=None,
        expire_seconds=None,
        headers="{}",
    )
    row.update(kw)
    return SimpleNamespace(**row)


def q(**kw):
    row = dict(
        pk=3,
        name="nightly",
        func="app.tasks.nightly",
        args=None,
        kwargs=None,
        schedule_type="D",
        minutes=None,
        repeats=-1,
        next_run=T,
        cron=None,
        hook=None,
        cluster=None,
        intended_date_kwarg=None,
    )
    row.update(kw)
    return SimpleNamespace(**row)


CMAP = {"app.tasks.send_report": "send-report", "app.tasks.nightly": "cleanup"}


def test_names_become_valid_schedule_names():
    assert importers.schedule_name("Send report (daily)!", "x") == "Send-report-daily"
    assert importers.schedule_name("  ", "celery-beat-1") == "celery-beat-1"
    assert importers.schedule_name("-é-", "fb") == "e"  # the accent goes, the letter stays
    assert importers.schedule_name("-—-", "fb") == "fb"
    assert len(importers.schedule_name("a" * 300, "fb")) == 128


def test_callback_map_parsing():
    assert importers.parse_callback_map(["a.b=c", " x = y "]) == {"a.b": "c", "x": "y"}
    with pytest.raises(ValueError):
        importers.parse_callback_map(["nope"])


def test_celery_interval_keeps_its_phase_and_payload():
    p = importers.plan_celery_beat(
        beat(
            interval=SimpleNamespace(every=15, period="minutes"),
            last_run_at=T,
            kwargs='{"to": "ops"}',
            args="[1, 2]",
            queue="q1",
        ),
        CMAP,
        REG,
    )
    assert p.skip == "" and p.name == "Send-report"
    f = p.fields
    assert (f["kind"], f["interval_seconds"], f["callback"]) == ("interval", 900, "send-report")
    assert f["start_at"] == T.replace(microsecond=0)
    assert f["payload"] == {"to": "ops", "args": [1, 2]}
    assert f["metadata"] == {"imported_from": "celery-beat", "source_id": "7"}
    assert any("queue" in n for n in p.notes) and any("renamed" in n for n in p.notes)


def test_celery_crontab_clocked_one_off_and_disabled():
    cron = SimpleNamespace(
        minute="0",
        hour="3",
        day_of_month="*",
        month_of_year="*",
        day_of_week="1-5",
        timezone=ZoneInfo("Europe/Paris"),
    )
    p = importers.plan_celery_beat(
        beat(crontab=cron, one_off=True, enabled=False, expires=T), CMAP, REG
    )
    assert p.fields["kind"] == "cron" and p.fields["cron"] == "0 3 * * 1-5"
    assert p.fields["timezone"] == "Europe/Paris" and p.fields["max_runs"] == 1
    assert p.fields["end_at"] == T.replace(microsecond=0) and p.enabled is False
    p = importers.plan_celery_beat(
        beat(clocked=SimpleNamespace(clocked_time=T), one_off=True), CMAP, REG
    )
    assert p.fields["kind"] == "once" and p.fields["run_at"] == T.replace(microsecond=0)
    assert "max_runs" not in p.fields


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (
            beat(task="app.tasks.unknown", interval=SimpleNamespace(every=1, period="hours")),
            "not a registered callback",
        ),
        (beat(solar=SimpleNamespace(event="sunset")), "solar"),
        (beat(interval=SimpleNamespace(every=5, period="microseconds")), "below one second"),
        (
            beat(
                crontab=SimpleNamespace(
                    minute="0",
                    hour="0",
                    day_of_month="13",
                    month_of_year="*",
                    day_of_week="5",
                    timezone="UTC",
                )
            ),
            "both restricted",
        ),
        (beat(kwargs="{not json", interval=SimpleNamespace(every=1, period="hours")), "JSON"),
        (beat(), "no schedule"),
    ],
)
def test_celery_rows_that_do_not_map_are_skipped_with_a_reason(row, reason):
    p = importers.plan_celery_beat(row, CMAP, REG)
    assert p.fields is None and reason in p.skip


def test_a_mapped_name_that_is_not_registered_is_not_imported():
    p = importers.plan_celery_beat(
        beat(interval=SimpleNamespace(every=1, period="hours")),
        {"app.tasks.send_report": "os.system"},
        REG,
    )
    assert p.fields is None and "'os.system', which is not registered" in p.skip


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("D", {"kind": "cron", "cron": "30 9 * * *"}),
        ("W", {"kind": "cron", "cron": "30 9 * * 3"}),
        ("M", {"kind": "cron", "cron": "30 9 10 * *"}),
        ("BM", {"kind": "cron", "cron": "30 9 10 1-12/2 *"}),
        ("Q", {"kind": "cron", "cron": "30 9 10 3-12/3 *"}),
        ("Y", {"kind": "cron", "cron": "30 9 10 3 *"}),
        ("H", {"kind": "interval", "interval_seconds": 3600}),
        ("BW", {"kind": "interval", "interval_seconds": 14 * 86400}),
        ("O", {"kind": "once", "run_at": T.replace(microsecond=0)}),
    ],
)
def test_django_q_schedule_types(kind, expected):
    p = importers.plan_django_q(q(schedule_type=kind), CMAP, REG, "Europe/Paris")
    assert p.skip == ""
    assert {k: p.fields[k] for k in expected} == expected
    if expected["kind"] == "cron":
        assert p.fields["timezone"] == "Europe/Paris"


def test_django_q_minutes_cron_repeats_and_arguments():
    p = importers.plan_django_q(
        q(
            schedule_type="I",
            minutes=5,
            repeats=3,
            args="1, 'a'",
            kwargs="x=1, q_options={'a': 1}",
            hook="app.hooks.done",
        ),
        CMAP,
        REG,
        "UTC",
    )
    f = p.fields
    assert (f["interval_seconds"], f["max_runs"], f["start_at"]) == (
        300,
        3,
        T.replace(microsecond=0),
    )
    assert f["payload"] == {"x": 1, "args": [1, "a"]}
    assert any("q_options" in n for n in p.notes) and any("hook" in n for n in p.notes)
    p = importers.plan_django_q(q(schedule_type="C", cron="*/10 * * * 1-5"), CMAP, REG, "UTC")
    assert (p.fields["kind"], p.fields["cron"]) == ("cron", "*/10 * * * 1-5")


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (q(repeats=0), "nothing left"),
        (q(kwargs="x=__import__('os')"), "literals"),
        (q(func="builtins.eval"), "not a registered callback"),
        (q(args="{1, 2}"), "not JSON"),
    ],
)
def test_django_q_rows_that_do_not_map(row, reason):
    p = importers.plan_django_q(row, CMAP, REG, "UTC")
    assert p.fields is None and reason in p.skip


@pytest.mark.django_db(transaction=True)
def test_apply_creates_once_pauses_disabled_and_validates():
    reg = {"tests.noop"}
    cmap = {"app.tasks.send_report": "tests.noop"}
    plans = [
        importers.plan_celery_beat(
            beat(interval=SimpleNamespace(every=1, period="hours")), cmap, reg
        ),
        importers.plan_celery_beat(
            beat(pk=8, name="off", enabled=False, interval=SimpleNamespace(every=2, period="days")),
            cmap,
            reg,
        ),
        importers.plan_celery_beat(
            beat(
                pk=9,
                name="bad cron",
                crontab=SimpleNamespace(
                    minute="99",
                    hour="*",
                    day_of_month="*",
                    month_of_year="*",
                    day_of_week="*",
                    timezone="UTC",
                ),
            ),
            cmap,
            reg,
        ),
    ]
    dry = importers.apply(plans, dry_run=True)
    assert [r.action for r in dry] == ["would create", "would create", "invalid"]
    assert not Schedule.objects.exists()
    results = importers.apply(plans)
    assert [r.action for r in results] == ["created", "created", "invalid"]
    assert "cron" in results[2].detail
    off = Schedule.objects.get(name="off")
    assert off.status == "paused" and off.next_run_at is None
    # Created paused in one transaction: one event, never an active moment in between.
    [event] = ScheduleEvent.objects.filter(schedule_id=off.pk)
    assert event.action == "created" and event.changes["status"] == [None, "paused"]
    assert set(ScheduleEvent.objects.values_list("source", flat=True)) == {"import"}
    again = importers.apply(plans)
    assert [(r.action, r.detail) for r in again][:2] == [("exists", "already imported")] * 2
    assert Schedule.objects.count() == 2
    Schedule.objects.filter(name="off").update(metadata={})
    assert importers.apply(plans[1:2])[0].detail == "a different schedule has this name"


def test_accented_names_keep_their_letters():
    assert importers.schedule_name("Rapport été – résumé", "x") == "Rapport-ete-resume"
    assert importers.schedule_name("Überweisung prüfen", "x") == "Uberweisung-prufen"
    assert importers.schedule_name("日本語", "fallback-1") == "fallback-1"


def test_a_celery_beat_description_is_kept_in_metadata_and_said():
    hourly = SimpleNamespace(every=1, period="hours")
    plan = importers.plan_celery_beat(
        beat(interval=hourly, description="Sends the weekly report to ops"),
        {"app.tasks.send_report": "send-report"},
        REG,
    )
    assert plan.fields["metadata"]["description"] == "Sends the weekly report to ops"
    assert "description kept in metadata['description']" in plan.notes
    long = importers.plan_celery_beat(
        beat(interval=hourly, description="x" * 900), {"app.tasks.send_report": "send-report"}, REG
    )
    assert len(long.fields["metadata"]["description"]) == 500
    assert any("cut to 500 characters" in n for n in long.notes)


@pytest.mark.django_db
def test_a_dry_run_reports_exactly_what_the_run_does_when_two_rows_share_a_name():
    hourly = SimpleNamespace(every=1, period="hours")
    cmap = {"app.tasks.send_report": "tests.noop"}  # registered by the test app
    registered = {"tests.noop"}
    plans = [
        importers.plan_celery_beat(
            beat(pk=1, name="Rapport été", interval=hourly), cmap, registered
        ),
        importers.plan_celery_beat(
            beat(pk=2, name="Rapport-ete", interval=hourly), cmap, registered
        ),
    ]
    assert plans[0].name == plans[1].name == "Rapport-ete"
    dry = [(r.action, r.detail) for r in importers.apply(plans, dry_run=True)]
    real = [(r.action, r.detail) for r in importers.apply(plans)]
    assert [a for a, _ in real] == ["created", "invalid"]
    assert [a for a, _ in dry] == ["would create", "invalid"] and dry[1] == real[1]
    assert Schedule.objects.count() == 1


@pytest.mark.django_db
def test_a_callback_whose_schedule_is_declared_in_code_is_reported_and_not_imported():
    """Issue #31 item 6: an import created a second schedule for a callback that already
    has one declared in code (``register(..., every=...)``), so it ran on both."""
    from django_durable_schedules import register
    from django_durable_schedules.registry import registry

    register("tests.declared-report", every=3600)(lambda ctx: None)
    try:
        reg = {"tests.declared-report", "tests.noop"}
        cmap = {"app.tasks.send_report": "tests.declared-report", "app.tasks.other": "tests.noop"}
        hourly = SimpleNamespace(every=1, period="hours")
        plans = [
            importers.plan_celery_beat(beat(interval=hourly), cmap, reg),
            importers.plan_celery_beat(
                beat(pk=8, name="other", task="app.tasks.other", interval=hourly), cmap, reg
            ),
        ]
        for dry_run in (True, False):  # the dry run says what the run does
            first, second = importers.apply(plans, dry_run=dry_run)
            assert first.action == "skipped" and first.schedule is None
            assert "'tests.declared-report' has its schedule declared in code" in first.detail
            assert "celery-beat still runs it" in first.detail
            assert second.action == ("would create" if dry_run else "created")
        assert list(Schedule.objects.values_list("callback", flat=True)) == ["tests.noop"]
    finally:
        registry.remove("tests.declared-report")
