"""Concurrency groups defined by name (issue #28, item 1): ``state.save_group`` and
``state.delete_group``, and ``manage.py schedules groups list|add|delete`` with the group
line of ``schedules show``: the rows written, the output, and the errors, with nothing
written. On SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import uuid
from datetime import timedelta
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from django_durable_schedules import state
from django_durable_schedules.models import ConcurrencyGroup, Schedule

pytestmark = pytest.mark.django_db

S = timedelta(seconds=1)


def cli(*args: str) -> str:
    out = StringIO()
    call_command("schedules", *args, stdout=out)
    return out.getvalue()


def schedule(name: str, group: ConcurrencyGroup | None = None, **fields) -> Schedule:
    return state.create_schedule(
        name=name,
        callback="tests.noop",
        kind="interval",
        interval_seconds=60,
        concurrency_group=group,
        **fields,
    )


# -- state ---------------------------------------------------------------------------------


def test_save_group_creates_then_updates_by_name_with_the_rate_normalised():
    group = state.save_group("partner-api", max_running=3, rate=" 10 / m ", description="API")
    assert (group.max_running, group.rate, group.description) == (3, "10/m", "API")
    again = state.save_group("partner-api", rate="2/s")
    assert again.pk == group.pk and ConcurrencyGroup.objects.count() == 1
    again.refresh_from_db()
    assert (again.max_running, again.rate, again.description) == (None, "2/s", "")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"rate": "10/d"}, "rate"),
        ({"rate": "0/s"}, "rate"),
        ({"max_running": 0}, "max_running"),
        ({}, "__all__"),  # neither limit
        ({"max_running": 1, "description": "x" * 501}, "description"),
    ],
)
def test_a_bad_group_is_a_field_error_and_nothing_is_written(kwargs, field):
    with pytest.raises(ValidationError) as info:
        state.save_group("reports", **kwargs)
    assert field in info.value.message_dict
    assert not ConcurrencyGroup.objects.exists()


def test_a_malformed_name_is_a_name_error():
    with pytest.raises(ValidationError) as info:
        state.save_group("No Spaces", max_running=1)
    assert "name" in info.value.message_dict


def test_an_edit_clears_the_skip_marks_so_the_new_limits_apply_at_once():
    group = state.save_group("g", max_running=1)
    later = state.db_now() + 60 * S
    ConcurrencyGroup.objects.filter(pk=group.pk).update(full_until=later, rate_until=later)
    state.save_group("g", max_running=5)
    group.refresh_from_db()
    assert (group.full_until, group.rate_until, group.max_running) == (None, None, 5)


@pytest.mark.django_db(transaction=True)
def test_a_raised_cap_lets_held_rows_start_at_the_next_claim():
    group = state.save_group("g", max_running=1)
    now = state.db_now()
    for i in range(3):
        schedule(f"s{i}", group, start_at=now - 600 * S)
    Schedule.objects.update(next_run_at=now - 60 * S)
    assert len(state.claim_due(worker="w", limit=10)) == 1
    assert state.claim_due(worker="w", limit=10) == []  # full
    state.save_group("g", max_running=3)
    assert len(state.claim_due(worker="w", limit=10)) == 2


@pytest.mark.django_db(transaction=True)
def test_a_lowered_cap_stops_no_run_and_starts_none_until_under_it():
    group = state.save_group("g", max_running=3)
    now = state.db_now()
    for i in range(5):
        schedule(f"s{i}", group, start_at=now - 600 * S)
    Schedule.objects.update(next_run_at=now - 60 * S)
    first = state.claim_due(worker="w", limit=10)
    assert len(first) == 3
    state.save_group("g", max_running=1)
    assert Schedule.objects.filter(lease_token__isnull=False).count() == 3  # none stopped
    state.complete([state.Outcome(first[0], "succeeded")])
    assert state.claim_due(worker="w", limit=10) == []  # 2 running, cap 1
    state.complete([state.Outcome(c, "succeeded") for c in first[1:]])
    assert len(state.claim_due(worker="w", limit=10)) == 1


def test_delete_group_refuses_while_schedules_name_it_and_names_them():
    group = state.save_group("g", max_running=2)
    for i in range(7):
        schedule(f"user-{i}", group)
    with pytest.raises(ValidationError) as info:
        state.delete_group("g")
    text = " ".join(info.value.messages)
    assert "7 schedule(s): user-0, user-1, user-2, user-3, user-4 and 2 more." in text
    assert info.value.code == "protected"
    assert ConcurrencyGroup.objects.filter(name="g").exists()
    Schedule.objects.update(concurrency_group=None)
    state.delete_group("g")
    assert not ConcurrencyGroup.objects.exists()
    with pytest.raises(ValidationError, match="No concurrency group named 'g'"):
        state.delete_group("g")


def test_with_usage_counts_live_leases_and_due_unleased_rows():
    group = state.save_group("g", max_running=5)
    now = state.db_now()
    for i in range(4):
        schedule(f"s{i}", group)
    schedule("other")  # no group: counted nowhere
    rows = list(Schedule.objects.filter(concurrency_group=group).order_by("name"))
    token = uuid.uuid4()
    Schedule.objects.filter(pk=rows[0].pk).update(
        lease_token=token, lease_expires_at=now + 60 * S, next_run_at=now - S
    )
    Schedule.objects.filter(pk=rows[1].pk).update(  # an expired lease: not running
        lease_token=uuid.uuid4(), lease_expires_at=now - S, next_run_at=now - S
    )
    Schedule.objects.filter(pk=rows[2].pk).update(next_run_at=now - S)  # due, waiting
    Schedule.objects.filter(pk=rows[3].pk).update(next_run_at=now + 3600 * S)  # not due
    state.save_group("empty", rate="1/s")
    found = {
        g.name: (g.running, g.waiting) for g in state.with_usage(ConcurrencyGroup.objects, now)
    }
    assert found == {"g": (1, 1), "empty": (0, 0)}


# -- the command ---------------------------------------------------------------------------


def test_cli_add_list_change_and_delete():
    assert cli("groups", "list").splitlines()[1] == "(no concurrency groups)"
    out = cli("groups", "add", "partner-api", "--max-running", "3", "--rate", "10/m")
    assert out == "partner-api: added, max 3 at once, 10/m\n"
    out = cli("groups", "add", "partner-api", "--rate", "2/s", "--description", "slow API")
    assert out == "partner-api: changed, no cap, 2/s\n"
    group = ConcurrencyGroup.objects.get(name="partner-api")
    assert (group.max_running, group.rate, group.description) == (None, "2/s", "slow API")
    schedule("uses-it", group)
    Schedule.objects.filter(name="uses-it").update(next_run_at=state.db_now() - S)
    header, line = cli("groups", "list").splitlines()
    assert header.split() == ["NAME", "LIMITS", "RUNNING", "WAITING", "USED"]
    assert line.split() == ["partner-api", "no", "cap,", "2/s", "0", "1", "1"]
    with pytest.raises(CommandError, match=r"still named by 1 schedule\(s\): uses-it"):
        cli("groups", "delete", "partner-api")
    Schedule.objects.update(concurrency_group=None)
    assert cli("groups", "delete", "partner-api") == "partner-api: deleted\n"
    with pytest.raises(CommandError, match="No concurrency group named 'partner-api'"):
        cli("groups", "delete", "partner-api")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "10/d"], "rate: A count per second"),
        ([], "Give max_running, a rate, or both"),
        (["--max-running", "0"], "is not a whole number >= 1"),
        (["--max-running", "x"], "is not a whole number >= 1"),
    ],
)
def test_cli_bad_input_names_the_field_and_writes_nothing(args, message):
    with pytest.raises(CommandError, match=message):
        cli("groups", "add", "reports", *args)
    assert not ConcurrencyGroup.objects.exists()


def test_show_prints_the_group_line_only_for_a_schedule_with_a_group():
    group = state.save_group("reports", max_running=2, rate="100/h")
    schedule("grouped", group)
    schedule("free")
    assert "  concurrency group: reports (max 2 at once, 100/h)" in cli("show", "grouped")
    assert "concurrency group" not in cli("show", "free")


def test_an_edit_keeps_the_rate_history_the_claims_wrote():
    group = state.save_group("g", rate="2/m")
    ConcurrencyGroup.objects.filter(pk=group.pk).update(starts=[1.5, 2.5])
    state.save_group("g", rate="3/m", description="edited")
    group.refresh_from_db()
    assert (group.starts, group.rate, group.description) == ([1.5, 2.5], "3/m", "edited")
