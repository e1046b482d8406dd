"""System checks added for issue #6: setting types, required apps, several SQLite workers."""

from io import StringIO

import pytest
from django.core import checks
from django.core.management import call_command
from django.db import connection
from django.test.utils import override_settings

from django_durable_schedules import checks as dds_checks
from django_durable_schedules import state

pytestmark = pytest.mark.django_db(transaction=True)
sqlite_only = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="the SQLite worker warning is SQLite-only"
)


def ids(messages):
    return {m.id for m in messages}


@pytest.mark.vendor_independent  # settings checks without databases=: no query
@pytest.mark.parametrize(
    "bad",
    [
        {"RENEW_EVERY_SECONDS": "10"},
        {"RENEW_EVERY_SECONDS": -1},
        {"SKEW_WARN_SECONDS": "5"},
        {"AUTODISCOVER": "yes"},
        {"SYNC_ON_MIGRATE": 1},
        {"API_OWNER_SCOPED": None},
        {"API_PERMISSION_CLASSES": "rest_framework.permissions.IsAdminUser"},
    ],
)
def test_a_setting_of_the_wrong_type_is_an_error_not_a_crash(bad):
    with override_settings(DURABLE_SCHEDULES=bad):
        found = ids(checks.run_checks())
    assert "durable_schedules.E006" in found


@pytest.mark.vendor_independent  # settings checks without databases=: no query
def test_good_settings_pass():
    good = {"RENEW_EVERY_SECONDS": 5, "AUTODISCOVER": False, "SKEW_WARN_SECONDS": 0}
    with override_settings(DURABLE_SCHEDULES=good):
        found = ids(checks.run_checks())
    assert not {i for i in found if i.startswith("durable_schedules.")}


@pytest.mark.vendor_independent  # settings checks without databases=: no query
def test_backoff_cap_below_base_warns():
    with override_settings(
        DURABLE_SCHEDULES={"BACKOFF_BASE_SECONDS": 120, "BACKOFF_CAP_SECONDS": 60}
    ):
        assert "durable_schedules.W003" in ids(checks.run_checks())


@pytest.mark.vendor_independent  # a settings check: no query
def test_missing_required_app_is_an_error(monkeypatch):
    from django.apps import apps

    real = apps.is_installed
    monkeypatch.setattr(
        apps, "is_installed", lambda name: name != "django.contrib.auth" and real(name)
    )
    messages = dds_checks.check_setting_types()
    assert [m.id for m in messages] == ["durable_schedules.E007"]
    assert "django.contrib.auth" in messages[0].msg


@sqlite_only
def test_several_live_workers_on_sqlite_warn_only_with_databases():
    state.heartbeat("w1")
    assert "durable_schedules.W002" not in ids(checks.run_checks(databases=["default"]))
    state.heartbeat("w2")
    assert "durable_schedules.W002" in ids(checks.run_checks(databases=["default"]))
    assert "durable_schedules.W002" not in ids(checks.run_checks())  # no database: no query
    state.heartbeat("w2", stopping=True)
    assert "durable_schedules.W002" not in ids(checks.run_checks(databases=["default"]))


@pytest.mark.skipif(connection.vendor == "sqlite", reason="not SQLite")
def test_several_workers_on_other_databases_are_fine():
    state.heartbeat("w1")
    state.heartbeat("w2")
    assert "durable_schedules.W002" not in ids(checks.run_checks(databases=["default"]))


@sqlite_only
def test_run_scheduler_warns_at_start_when_another_worker_is_alive_on_sqlite():
    err = StringIO()
    call_command("run_scheduler", "--once", verbosity=0, stdout=StringIO(), stderr=err)
    assert "SQLite" not in err.getvalue()
    state.heartbeat("elsewhere")
    call_command("run_scheduler", "--once", verbosity=0, stdout=StringIO(), stderr=err)
    assert "another worker is alive on this SQLite database (elsewhere)" in err.getvalue()


# --- found by a newcomer trying to break a fresh project (issue #6) -----------------------


@pytest.mark.vendor_independent  # settings checks without databases=: no query
@pytest.mark.parametrize(
    "bad",
    [
        {"CONCURRENCY": 0.5},
        {"BATCH_SIZE": 0.5},
        {"LEASE_SECONDS": 0.5},
        {"LEASE_SECONDS": float("nan")},
        {"LEASE_SECONDS": float("inf")},
        {"POLL_MAX_SECONDS": float("nan")},
        {"MAX_ATTEMPTS": 2.5},
        {"CLAIM_AHEAD_SECONDS": -0.1},
        {"CLAIM_AHEAD_SECONDS": float("nan")},
        {"CLAIM_AHEAD_SECONDS": "0.05"},
        {"CLAIM_AHEAD_SECONDS": 61},
    ],
)
def test_counts_must_be_whole_and_every_number_finite(bad):
    with override_settings(DURABLE_SCHEDULES=bad):
        found = ids(checks.run_checks())
    assert "durable_schedules.E004" in found


@pytest.mark.vendor_independent  # settings checks without databases=: no query
@pytest.mark.parametrize("good", [0, 0.05, 60])
def test_claiming_ahead_may_be_off_or_up_to_a_minute(good):
    with override_settings(DURABLE_SCHEDULES={"CLAIM_AHEAD_SECONDS": good}):
        assert "durable_schedules.E004" not in ids(checks.run_checks())


@pytest.mark.parametrize("bad", [[("LEASE_SECONDS", 30)], "30"])
def test_a_durable_schedules_setting_that_is_not_a_dict_is_e002_not_a_crash(bad):
    with override_settings(DURABLE_SCHEDULES=bad):
        found = ids(checks.run_checks(databases=["default"]))
    assert "durable_schedules.E002" in found


def test_use_tz_false_is_e001_not_a_crash_of_the_database_checks():
    with override_settings(USE_TZ=False):
        found = ids(checks.run_checks(databases=["default"]))
    assert "durable_schedules.E001" in found


@pytest.fixture
def bad_declaration():
    from django_durable_schedules import register
    from django_durable_schedules.registry import registry

    register("t.bad_cron", lambda ctx: None, cron="61 * * * *")
    yield "t.bad_cron"
    registry.remove("t.bad_cron")


@pytest.mark.vendor_independent  # a non-database system check
def test_an_invalid_schedule_declared_in_code_is_e008_naming_it(bad_declaration):
    messages = [m for m in checks.run_checks() if m.id == "durable_schedules.E008"]
    assert len(messages) == 1
    assert "'t.bad_cron'" in messages[0].msg and "61" in messages[0].msg


def test_syncing_an_invalid_declaration_names_it(bad_declaration):
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match="t.bad_cron"):
        state.sync_declared()


@pytest.fixture
def declared_in_missing_group():
    from django_durable_schedules import register
    from django_durable_schedules.registry import registry

    register("t.grouped_nowhere", lambda ctx: None, every=60, concurrency_group="nowhere")
    yield "t.grouped_nowhere"
    registry.remove("t.grouped_nowhere")


def test_a_declared_group_that_does_not_exist_is_w005_with_databases(declared_in_missing_group):
    """Whether a group exists is known from the database only: ``check --database``
    reports it (a warning, not an error: ``migrate`` and the test runner run the database
    checks before anyone could create the group)."""
    assert "durable_schedules.W005" not in ids(checks.run_checks())  # no database: no query
    [found] = [
        m for m in checks.run_checks(databases=["default"]) if m.id == "durable_schedules.W005"
    ]
    assert "'t.grouped_nowhere'" in found.msg and "'nowhere'" in found.msg
    assert "schedules groups add" in found.hint
    state.save_group("nowhere", max_running=2)
    assert "durable_schedules.W005" not in ids(checks.run_checks(databases=["default"]))


def test_a_worker_starts_with_a_declared_group_that_does_not_exist(
    declared_in_missing_group, caplog
):
    """The worker's start syncs the declarations: the unknown group is logged, the worker
    runs (here its ``--once`` pass) instead of dying on it."""
    with caplog.at_level("ERROR", logger="django_durable_schedules"):
        call_command("run_scheduler", "--once", verbosity=0, stdout=StringIO(), stderr=StringIO())
    assert any("'nowhere', which does not exist" in r.getMessage() for r in caplog.records)


@pytest.mark.vendor_independent  # non-database system checks
def test_every_check_reports_on_its_own():
    """E005 (renewal not shorter than the lease) is reported even when another setting is
    wrong at the same time (it used to wait for every other error to be fixed)."""
    bad = {"LEASE_SECONDS": 30, "RENEW_EVERY_SECONDS": 60, "BATCH_SIZE": 0}
    with override_settings(DURABLE_SCHEDULES=bad):
        found = {m.id for m in checks.run_checks()}
    assert {"durable_schedules.E004", "durable_schedules.E005"} <= found
