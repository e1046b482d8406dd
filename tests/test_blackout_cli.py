"""``manage.py schedules blackouts list|add|delete|link|unlink`` and the blackout line of
``schedules show`` (issue #27 item 2): the output, the rows written and the events left
(source ``command``, the same as the admin's and the API's edits), and the errors, word
for word, with nothing written. Also the state edit of a schedule's windows alone
(``update_schedule``, ``change_windows``): an ``edited`` event naming the change."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from django_durable_schedules import state
from django_durable_schedules.limits import BLACKOUT_MAX_SECONDS
from django_durable_schedules.models import BlackoutWindow, EventAction, Schedule, ScheduleEvent

pytestmark = pytest.mark.django_db


def cli(*args: str) -> str:
    out = StringIO()
    call_command("schedules", *args, stdout=out)
    return out.getvalue()


def schedule(name: str = "s", **fields) -> Schedule:
    return state.create_schedule(
        name=name, callback="tests.noop", kind="interval", interval_seconds=60, **fields
    )


def windows_of(name: str) -> list[str]:
    return [w.name for w in Schedule.objects.get(name=name).blackout_windows.order_by("name")]


def events(action: str = EventAction.EDITED) -> list[ScheduleEvent]:
    """The events of ``action`` (in no order: several may share an instant)."""
    return list(ScheduleEvent.objects.filter(action=action))


def changes(action: str = EventAction.EDITED) -> list[dict]:
    return [e.changes for e in events(action)]


FREEZE = ("--start", "2027-12-20T00:00:00Z", "--end", "2028-01-02T00:00:00Z")
NIGHTLY = ("--rrule", "FREQ=DAILY;BYHOUR=2", "--duration", "3600", "--timezone", "Europe/Paris")


def test_add_a_range_and_a_rule_then_list_them_with_their_schedules():
    out = cli("blackouts", "add", "freeze", *FREEZE, "--description", "year end")
    assert out == "freeze: added, 2027-12-20T00:00:00Z .. 2028-01-02T00:00:00Z (UTC)\n"
    out = cli("blackouts", "add", "nightly", *NIGHTLY, "--start", "2027-01-01T00:00:00Z")
    assert out == (
        "nightly: added, FREQ=DAILY;BYHOUR=2, 3600 s each, from 2027-01-01T00:00:00Z "
        "(Europe/Paris)\n"
    )
    freeze = BlackoutWindow.objects.get(name="freeze")
    assert (freeze.start_at, freeze.end_at) == (
        datetime(2027, 12, 20, tzinfo=UTC),
        datetime(2028, 1, 2, tzinfo=UTC),
    )
    assert (freeze.rrule, freeze.duration_seconds, freeze.description) == ("", None, "year end")
    nightly = BlackoutWindow.objects.get(name="nightly")
    assert (nightly.rrule, nightly.duration_seconds, nightly.timezone) == (
        "FREQ=DAILY;BYHOUR=2",
        3600,
        "Europe/Paris",
    )
    schedule("b-job", blackout_windows=["nightly"])
    schedule("a-job", blackout_windows=["nightly", "freeze"])
    lines = cli("blackouts", "list").splitlines()
    assert lines[0].split() == ["NAME", "WHEN", "ZONE", "USED", "SCHEDULES"]
    assert lines[1].split() == [
        "freeze", "2027-12-20T00:00:00Z", "..", "2028-01-02T00:00:00Z", "UTC", "1", "a-job",
    ]  # fmt: skip
    assert lines[2].split() == [
        "nightly", "FREQ=DAILY;BYHOUR=2,", "3600", "s", "each,", "from",
        "2027-01-01T00:00:00Z", "Europe/Paris", "2", "a-job,", "b-job",
    ]  # fmt: skip
    assert len(lines) == 3


def test_a_window_no_schedule_names_lists_a_dash():
    cli("blackouts", "add", "freeze", *FREEZE)
    assert cli("blackouts", "list").splitlines()[1].endswith("   0  -")


def test_a_time_without_an_offset_is_read_in_the_timezone():
    cli(
        "blackouts", "add", "tokyo-lunch", "--timezone", "asia/tokyo",
        "--start", "2027-07-01T12:00:00", "--end", "2027-07-01T13:00:00",
    )  # fmt: skip
    w = BlackoutWindow.objects.get(name="tokyo-lunch")
    assert w.timezone == "Asia/Tokyo"  # spelled as IANA spells it
    assert (w.start_at, w.end_at) == (
        datetime(2027, 7, 1, 3, tzinfo=UTC),
        datetime(2027, 7, 1, 4, tzinfo=UTC),
    )
    cli("blackouts", "add", "utc", "--start", "2027-07-01T12:00", "--end", "2027-07-01T13:00")
    assert BlackoutWindow.objects.get(name="utc").start_at == datetime(2027, 7, 1, 12, tzinfo=UTC)
    # An offset given wins over the zone.
    cli("blackouts", "add", "given", "--timezone", "Asia/Tokyo",
        "--start", "2027-07-01T12:00:00+02:00", "--end", "2027-07-01T13:00:00Z")  # fmt: skip
    assert BlackoutWindow.objects.get(name="given").start_at == datetime(2027, 7, 1, 10, tzinfo=UTC)


def test_link_and_unlink_are_schedule_edits_with_their_event():
    cli("blackouts", "add", "freeze", *FREEZE)
    cli("blackouts", "add", "nightly", *NIGHTLY)
    row = schedule(blackout_policy="defer")
    next_run = row.next_run_at
    assert cli("blackouts", "link", "s", "nightly", "freeze") == (
        "s: blackout windows: freeze, nightly (policy defer)\n"
    )
    assert windows_of("s") == ["freeze", "nightly"]
    [edited] = events()
    assert edited.source == "command" and edited.schedule_name == "s"
    assert edited.changes == {"blackout_windows": [[], ["freeze", "nightly"]]}
    assert Schedule.objects.get(name="s").next_run_at == next_run  # no re-plan, no run
    # Linking one already named changes nothing and records nothing.
    assert cli("blackouts", "link", "s", "freeze") == (
        "s: unchanged; blackout windows: freeze, nightly\n"
    )
    assert len(events()) == 1
    assert cli("blackouts", "unlink", "s", "nightly") == (
        "s: blackout windows: freeze (policy defer)\n"
    )
    assert windows_of("s") == ["freeze"]
    assert {"blackout_windows": [["freeze", "nightly"], ["freeze"]]} in changes()
    assert len(events()) == 2
    assert cli("blackouts", "unlink", "s", "nightly") == "s: unchanged; blackout windows: freeze\n"
    assert cli("blackouts", "unlink", "s", "freeze") == "s: blackout windows: none (policy defer)\n"
    assert windows_of("s") == [] and len(events()) == 3
    assert {"blackout_windows": [["freeze"], []]} in changes()
    assert {e.source for e in events()} == {"command"}


def test_delete_tells_the_schedules_that_named_it():
    cli("blackouts", "add", "freeze", *FREEZE)
    cli("blackouts", "add", "lonely", *FREEZE)
    schedule("b", blackout_windows=["freeze"])
    schedule("a", blackout_windows=["freeze"])
    assert cli("blackouts", "delete", "freeze") == (
        "freeze: deleted; the schedules that named it go on without it from the next claim: a, b\n"
    )
    assert not BlackoutWindow.objects.filter(name="freeze").exists()
    assert windows_of("a") == windows_of("b") == []
    deleted = events(EventAction.BLACKOUTS)
    assert sorted(e.schedule_name for e in deleted) == ["a", "b"]
    assert {(e.source, e.changes["window"], e.changes["deleted"]) for e in deleted} == {
        ("command", "freeze", True)
    }
    assert cli("blackouts", "delete", "lonely") == "lonely: deleted (no schedule named it)\n"


def test_show_lists_the_windows_and_the_policy():
    cli("blackouts", "add", "freeze", *FREEZE)
    cli("blackouts", "add", "nightly", *NIGHTLY)
    schedule("plain")
    schedule("guarded", blackout_windows=["nightly", "freeze"], blackout_policy="defer")
    Schedule.objects.filter(name="guarded").update(blackout_count=7, blackout_deferred=3)
    plain = cli("show", "plain").splitlines()
    [policies] = [line for line in plain if line.startswith("  policies: ")]
    assert "overlap=skip, blackout=skip" in policies
    assert "  blackout windows: none" in plain
    guarded = cli("show", "guarded").splitlines()
    [policies] = [line for line in guarded if line.startswith("  policies: ")]
    assert "overlap=skip, blackout=defer" in policies
    assert (
        "  blackout windows: freeze, nightly (policy defer); 7 slots blacked out so far, "
        "3 deferred to the next run"
    ) in guarded


ADD_ERRORS = [
    (
        ("w", "--rrule", "FREQ=DAILY;BYHOUR=25", "--duration", "60"),
        "w: rrule: BYHOUR: '25' is out of range 0 to 23",
    ),
    (
        ("w", "--rrule", "FREQ=FORTNIGHTLY", "--duration", "60"),
        None,  # the rule's own message, under rrule
    ),
    (
        ("w", "--start", "2027-12-20T00:00:00Z", "--end", "2027-12-19T00:00:00Z"),
        "w: end_at: It must be after start_at.",
    ),
    (
        ("w", "--start", "2027-12-20T00:00:00Z", "--end", "2027-12-20T00:00:00Z"),
        "w: end_at: It must be after start_at.",
    ),
    (
        ("w", "--start", "2027-12-20T00:00:00Z"),
        "w: end_at: A range needs end_at (or give an rrule).",
    ),
    (
        ("w", *FREEZE, "--timezone", "Mars/Base"),
        "w: timezone: unknown IANA time zone 'Mars/Base'",
    ),
    (
        ("w", "--rrule", "FREQ=DAILY"),
        f"w: duration_seconds: A recurring window lasts 1 to {BLACKOUT_MAX_SECONDS} seconds.",
    ),
    (
        ("w", *FREEZE, "--duration", "60"),
        "w: duration_seconds: A range has no duration (it ends at end_at).",
    ),
    (
        ("w", "--start", "tomorrow", "--end", "2027-12-20T00:00:00Z"),
        "Error: argument --start: 'tomorrow' is not an ISO 8601 datetime "
        "(2027-12-20T00:00:00Z, or 2027-12-20T00:00:00 read in --timezone)",
    ),
    (("bad name", *FREEZE), None),  # the name's own message, under name
]


@pytest.mark.parametrize("args, message", ADD_ERRORS)
def test_add_refuses_a_bad_window_and_writes_nothing(args, message):
    with pytest.raises(CommandError) as err:
        cli("blackouts", "add", *args)
    if message is None:
        field = "rrule" if "--rrule" in args else "name"
        assert str(err.value).startswith(f"{args[0]}: {field}: ")
    else:
        assert str(err.value) == message
    assert not BlackoutWindow.objects.exists()


def test_add_refuses_a_name_taken():
    cli("blackouts", "add", "freeze", *FREEZE)
    with pytest.raises(CommandError) as err:
        cli("blackouts", "add", "freeze", *FREEZE)
    assert str(err.value) == "freeze: name: Blackout window with this Name already exists."
    assert BlackoutWindow.objects.count() == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (("delete", "nope"), "no blackout window named 'nope'"),
        (("link", "nope", "freeze"), "no schedule named 'nope'"),
        (("unlink", "nope", "freeze"), "no schedule named 'nope'"),
        (
            ("link", "s", "freeze", "nope", "also-nope"),
            "no blackout window named 'also-nope', 'nope'",
        ),
        (("unlink", "s", "nope"), "no blackout window named 'nope'"),
    ],
)
def test_unknown_names_are_command_errors_and_change_nothing(args, message):
    cli("blackouts", "add", "freeze", *FREEZE)
    schedule()
    with pytest.raises(CommandError) as err:
        cli("blackouts", *args)
    assert str(err.value) == message
    assert windows_of("s") == [] and events() == []
    assert BlackoutWindow.objects.filter(name="freeze").exists()


def test_an_edit_of_the_windows_alone_records_an_edited_event():
    """Whatever the surface (the admin's form and the API's serializer call
    ``update_schedule`` with ``blackout_windows``): a change of the list alone is an
    ``edited`` event naming it, and the row is not re-planned; its ``updated_at`` moves
    (an edit is an edit, and it wakes idle workers on PostgreSQL)."""
    state.save_window(BlackoutWindow(name="nightly", rrule="FREQ=DAILY", duration_seconds=60))
    row = schedule()
    before = Schedule.objects.get(pk=row.pk)
    state.update_schedule(row.pk, blackout_windows=["nightly"], source="api")
    [edited] = events()
    assert edited.source == "api"
    assert edited.changes == {"blackout_windows": [[], ["nightly"]]}
    after = Schedule.objects.get(pk=row.pk)
    assert after.next_run_at == before.next_run_at
    assert after.updated_at > before.updated_at
    state.update_schedule(row.pk, blackout_windows=["nightly"], source="api")
    assert Schedule.objects.get(pk=row.pk).updated_at == after.updated_at
    assert len(events()) == 1  # unchanged: no event
    state.update_schedule(row.pk, blackout_windows=[], source="admin")
    assert {"blackout_windows": [["nightly"], []]} in changes()
    assert {e.source for e in events()} == {"api", "admin"}


def test_change_windows_refuses_an_unknown_name_either_way():
    row = schedule()
    for kw in ({"add": ["nope"]}, {"remove": ["nope"]}):
        with pytest.raises(ValidationError) as err:
            state.change_windows(row.pk, **kw)
        assert err.value.message_dict == {"blackout_windows": ["No blackout window named 'nope'."]}
    with pytest.raises(Schedule.DoesNotExist):
        state.change_windows(uuid.UUID(int=0), add=[])
