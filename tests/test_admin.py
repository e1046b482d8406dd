"""The admin, through Django's test client: lists, filters, actions, the change page,
deletes, read-only history and the health page. Every write goes through state/state."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from django_durable_schedules import state
from django_durable_schedules.admin.display import fmt_utc
from django_durable_schedules.models import (
    RunAttempt,
    RunReceipt,
    Schedule,
    ScheduleEvent,
    Status,
    WorkerHeartbeat,
)
from django_durable_schedules.registry import registry

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:durable_schedules_schedule_changelist"


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------


def make(name: str, **kw) -> Schedule:
    fields = {"callback": "tests.noop", "kind": "interval", "interval_seconds": 60}
    fields.update(kw)
    return Schedule.objects.create(name=name, **fields)


def add_history(schedule: Schedule, statuses: list[str], *, start: datetime | None = None):
    """Append attempts and receipts (oldest first) with the given outcomes."""
    start = start or datetime(2027, 6, 1, 10, 0, tzinfo=UTC)
    attempts, receipts = [], []
    for i, status in enumerate(statuses, 1):
        at = start + timedelta(minutes=i)
        attempt = RunAttempt(
            id=uuid.uuid4(),
            schedule=schedule,
            schedule_name=schedule.name,
            occurrence=i,
            attempt=1,
            scheduled_for=at,
            claimed_at=at,
            lease_token=uuid.uuid4(),
            lease_expires_at=at + timedelta(seconds=30),
            worker="w1",
            idempotency_key=f"{schedule.pk}:{i}",
        )
        attempts.append(attempt)
        failed = status == "failed"
        receipts.append(
            RunReceipt(
                attempt=attempt,
                schedule=schedule,
                occurrence=i,
                succeeded_occurrence=i if status == "succeeded" else None,
                status=status,
                finished_at=at + timedelta(seconds=1),
                error_type="RuntimeError" if failed else "",
                error_message="boom" if failed else "",
            )
        )
    RunAttempt.objects.bulk_create(attempts)
    RunReceipt.objects.bulk_create(receipts)
    return receipts


def open_attempt(schedule: Schedule, now: datetime | None = None) -> RunAttempt:
    now = now or timezone.now()
    return RunAttempt.objects.create(
        schedule=schedule,
        schedule_name=schedule.name,
        occurrence=99,
        attempt=1,
        scheduled_for=now,
        claimed_at=now,
        lease_token=uuid.uuid4(),
        lease_expires_at=now + timedelta(seconds=30),
        worker="w1",
        idempotency_key=f"{schedule.pk}:99",
    )


def hold_lease(schedule: Schedule) -> None:
    Schedule.objects.filter(pk=schedule.pk).update(
        lease_token=uuid.uuid4(), lease_expires_at=timezone.now() + timedelta(seconds=60)
    )


def messages_of(response) -> list[tuple[str, str]]:
    return [(m.level_tag, str(m)) for m in response.context["messages"]]


def run_action(client, action: str, *schedules: Schedule, **extra):
    data = {"action": action, "_selected_action": [str(s.pk) for s in schedules], "index": 0}
    data.update(extra)
    return client.post(reverse(CHANGELIST), data, follow=True)


def change_url(s: Schedule) -> str:
    return reverse("admin:durable_schedules_schedule_change", args=[s.pk])


def strips(html: str) -> list[str]:
    return re.findall(r'<span class="dds-strip[^"]*"[^>]*>(.*?)</span>(?=</td>|</div>)', html)


# ---------------------------------------------------------------------------------------
# the list
# ---------------------------------------------------------------------------------------


@pytest.mark.vendor_independent  # the list's HTML (cadence, zones, badges); its receipt SQL: the strip tests below
def test_changelist_shows_cadence_status_next_run_in_zone_and_utc(admin_client):
    make("every-five", interval_seconds=300)
    make("tokyo-nine", kind="cron", interval_seconds=None, cron="0 9 * * *", timezone="Asia/Tokyo")
    paused = make("paused-one")
    state.disable(paused.pk)

    response = admin_client.get(reverse(CHANGELIST))
    html = response.content.decode()
    assert response.status_code == 200
    assert "every 5 minutes" in html
    assert "cron &#x27;0 9 * * *&#x27; (Asia/Tokyo)" in html
    # 09:00 in Tokyo (no DST) is 00:00 UTC: both readings are shown.
    assert re.search(r"\d{4}-\d\d-\d\d 09:00:00 JST</span><span class=\"dds-utc\">", html)
    assert re.search(r"\d{4}-\d\d-\d\d 00:00:00 UTC", html)
    assert 'class="dds-badge dds-s-active"' in html
    assert 'class="dds-badge dds-s-paused"' in html
    assert "Health" in html and reverse("admin:durable_schedules_schedule_health") in html


def test_outcome_strip_shows_the_last_20_outcomes_oldest_first(admin_client):
    s = make("strip")
    statuses = ["succeeded"] * 4 + ["failed", "skipped", "missed"] + ["succeeded"] * 17 + ["failed"]
    add_history(s, statuses)  # 25 outcomes, the newest a failure
    make("no-history")

    html = admin_client.get(reverse(CHANGELIST)).content.decode()
    marks = re.findall(r'class="dds-mark dds-(o-[a-z_]+|empty)"', html)
    # Two rows of 20 slots each: 20 marks for "strip", 20 empty slots for "no-history".
    assert len(marks) == 40
    # Rows are ordered by name: "no-history" first.
    assert marks[:20] == ["empty"] * 20
    expected = [f"o-{st}" for st in statuses[-20:]]
    assert marks[20:] == expected
    # Each mark names its outcome in its title (not colour alone) and links to the receipt.
    assert re.search(r'title="#25 failed · 2027-06-01 10:25:01 UTC · RuntimeError: boom"', html)
    assert "/admin/durable_schedules/runreceipt/" in html
    assert 'aria-label="Last 20 outcomes, oldest first: ' in html
    # The last outcome column shows the newest receipt.
    assert re.search(r'<span class="dds-last">.*?dds-o-failed', html, re.S)
    # The legend names every colour.
    assert "lease expired" in html and "Outcomes:" in html


def _changelist_queries(client) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(reverse(CHANGELIST))
    assert response.status_code == 200
    return len(ctx.captured_queries)


def test_changelist_query_count_does_not_grow_with_rows(
    admin_client, django_assert_max_num_queries
):
    for i in range(5):
        add_history(make(f"a-{i:03}"), ["succeeded", "failed", "skipped"])
    admin_client.get(reverse(CHANGELIST))  # warm the session and content types
    five = _changelist_queries(admin_client)

    for i in range(5, 50):
        add_history(make(f"a-{i:03}"), ["succeeded", "failed", "skipped"])
    fifty = _changelist_queries(admin_client)
    print(f"changelist queries: {five} for 5 schedules, {fifty} for 50")
    assert fifty == five, (five, fifty)

    # Absolute bound: session, user, two counts, the page, its receipts (+ a savepoint pair
    # or two depending on the backend).
    with django_assert_max_num_queries(10):
        admin_client.get(reverse(CHANGELIST))


def test_changelist_of_10000_schedules_is_one_page_in_a_bounded_number_of_queries(
    admin_client, django_assert_max_num_queries
):
    now = timezone.now()
    Schedule.objects.bulk_create(
        [
            Schedule(
                name=f"bulk-{i:05}",
                callback="tests.noop",
                kind="interval",
                interval_seconds=60 + i,
                next_run_at=now + timedelta(seconds=i),
            )
            for i in range(10_000)
        ],
        batch_size=1000,
    )
    for s in Schedule.objects.order_by("name")[:100:7]:  # some history on the first page
        add_history(s, ["succeeded", "failed"] * 12)
    # The fleet verdict's banner costs the probe's queries (the database clock, live
    # workers, due schedules, and with too few workers an exists() of a waiting schedule);
    # the label filter's choices one more (a bounded sample of the first 200 by name).
    with django_assert_max_num_queries(10):
        response = admin_client.get(reverse(CHANGELIST))
    cl = response.context["cl"]
    assert cl.result_count == 10_000 and len(cl.result_list) == 100
    assert response.content.decode().count('class="dds-strip"') == 100


def test_filters_and_search(admin_client):
    make("healthy-one")
    failing = make("failing-one")
    Schedule.objects.filter(pk=failing.pk).update(failure_count=2)
    degraded = make("degraded-one")
    Schedule.objects.filter(pk=degraded.pk).update(
        status=Status.PAUSED, degraded_reason="callback 'x' is not registered"
    )
    running = make("running-one")
    hold_lease(running)
    make("cron-one", kind="cron", interval_seconds=None, cron="*/5 * * * *", callback="tests.echo")

    def names(query: str) -> set[str]:
        response = admin_client.get(reverse(CHANGELIST) + query)
        assert response.status_code == 200
        return {s.name for s in response.context["cl"].result_list}

    assert names("?failing=yes") == {"failing-one"}
    assert names("?degraded=yes") == {"degraded-one"}
    assert "degraded-one" not in names("?degraded=no")
    assert names("?running=yes") == {"running-one"}
    assert names("?status__exact=paused") == {"degraded-one"}
    assert names("?kind__exact=cron") == {"cron-one"}
    assert names("?q=failing") == {"failing-one"}
    assert names("?q=tests.echo") == {"cron-one"}


# ---------------------------------------------------------------------------------------
# actions
# ---------------------------------------------------------------------------------------


@pytest.mark.vendor_independent  # which service each action calls (a spy); the transitions: the action tests kept below
def test_every_action_calls_the_state_machine(admin_client, monkeypatch):
    s = make("spied")
    calls = []
    for name in ("enable", "disable", "cancel", "trigger"):
        real = getattr(state, name)

        def spy(pk, *a, _real=real, _name=name, **kw):
            calls.append((_name, pk, kw["source"], str(kw["actor"])))
            return _real(pk, *a, **kw)

        monkeypatch.setattr(state, name, spy)
    for action in ("disable", "enable", "trigger", "cancel"):
        run_action(admin_client, action, s, post="yes")  # cancel asks first (post=yes: confirmed)
    assert calls == [
        (name, s.pk, "admin", "admin") for name in ("disable", "enable", "trigger", "cancel")
    ]


def test_disable_then_enable_say_what_changed(admin_client):
    a, b = make("a-job"), make("b-job")
    response = run_action(admin_client, "disable", a, b)
    assert messages_of(response) == [
        ("success", "Disabled 2 schedules: a-job (active → paused); b-job (active → paused).")
    ]
    assert set(Schedule.objects.values_list("status", flat=True)) == {Status.PAUSED}
    # The audit trail names the admin user and the admin as the source.
    events = ScheduleEvent.objects.filter(action="disabled")
    assert sorted(events.values_list("schedule_name", "source", "actor_repr")) == [
        ("a-job", "admin", "admin"),
        ("b-job", "admin", "admin"),
    ]

    response = run_action(admin_client, "enable", a)
    [(level, text)] = messages_of(response)
    assert level == "success"
    assert text.startswith("Enabled 1 schedule: a-job (paused → active, next run 20")
    a.refresh_from_db()
    assert a.status == Status.ACTIVE and a.next_run_at is not None


def test_unchanged_and_refused_are_reported_separately(admin_client):
    active, paused, cancelled = make("active-1"), make("paused-1"), make("cancelled-1")
    state.disable(paused.pk)
    state.cancel(cancelled.pk)
    response = run_action(admin_client, "enable", active, paused, cancelled)
    assert messages_of(response) == [
        ("success", f"Enabled 1 schedule: paused-1 (paused → active, next run {_next(paused)})."),
        ("info", "Already active, unchanged: active-1."),
        (
            "error",
            "Enable refused for 1 schedule: cancelled-1 (a cancelled schedule cannot be enabled).",
        ),
    ]
    cancelled.refresh_from_db()
    assert cancelled.status == Status.CANCELLED


def _next(s: Schedule) -> str:
    s.refresh_from_db()
    return fmt_utc(s.next_run_at)


def test_cancel_action_asks_first_then_cancels_and_then_refuses(admin_client):
    s, done = make("to-cancel"), make("already-done")
    Schedule.objects.filter(pk=done.pk).update(status=Status.COMPLETED, next_run_at=None)
    page = run_action(admin_client, "cancel", s, done)
    html = page.content.decode()
    assert page.status_code == 200 and "Cancelling is final" in html
    assert "<strong>to-cancel</strong>" in html and "already-done (completed)" in html
    assert f'name="_selected_action" value="{s.pk}"' in html  # only what can be cancelled
    assert f'value="{done.pk}"' not in html
    assert "No, take me back" in html
    s.refresh_from_db()
    assert s.status == Status.ACTIVE  # asked, not done
    assert not ScheduleEvent.objects.filter(action="cancelled").exists()

    response = run_action(admin_client, "cancel", s, post="yes")
    assert messages_of(response) == [
        ("success", "Cancelled 1 schedule: to-cancel (active → cancelled).")
    ]
    response = run_action(admin_client, "cancel", s, post="yes")
    assert messages_of(response) == [
        (
            "error",
            "Cancel refused for 1 schedule: to-cancel (a cancelled schedule cannot be cancelled).",
        )
    ]
    html = run_action(admin_client, "cancel", s).content.decode()
    assert "Nothing to cancel" in html and "Yes, cancel" not in html


def test_the_change_page_cancel_asks_on_its_own_page_first(admin_client):
    s = make("cancel-me")
    html = admin_client.get(change_url(s)).content.decode()
    url = reverse("admin:durable_schedules_schedule_transition", args=[s.pk, "cancel"])
    assert f'href="{url}"' in html and ">Cancel…</a>" in html  # a link to the question
    page = admin_client.get(url)
    assert page.status_code == 200 and "Cancelling is final" in page.content.decode()
    assert f'href="{change_url(s)}" class="button cancel-link">No, take me back' in (
        page.content.decode()
    )
    assert admin_client.post(url).status_code == 200  # a POST without post=yes asks too
    s.refresh_from_db()
    assert s.status == Status.ACTIVE
    response = admin_client.post(url, {"post": "yes"}, follow=True)
    assert response.redirect_chain[-1][0] == change_url(s)
    assert messages_of(response) == [
        ("success", "Cancelled 1 schedule: cancel-me (active → cancelled).")
    ]
    s.refresh_from_db()
    assert s.status == Status.CANCELLED


@pytest.mark.vendor_independent  # an empty form's HTML
def test_the_add_page_has_no_empty_run_tables(admin_client):
    html = admin_client.get(reverse("admin:durable_schedules_schedule_add")).content.decode()
    assert "latest attempts" not in html and "latest receipts" not in html


def test_trigger_action_requests_a_run_now_and_refuses_a_running_schedule(admin_client):
    idle, running = make("idle"), make("busy")
    hold_lease(running)
    response = run_action(admin_client, "trigger", idle, running)
    assert messages_of(response) == [
        ("success", "Triggered 1 schedule: idle (runs on the next worker pass, outside its grid)."),
        (
            "error",
            "Trigger now refused for 1 schedule: busy (the schedule is running (it holds a lease)).",
        ),
    ]
    idle.refresh_from_db()
    assert idle.triggered_at is not None
    claims = state.claim_due(worker="w")
    assert [c.schedule_name for c in claims] == ["idle"]


@pytest.mark.vendor_independent  # Django's permission checks refuse before any state call
def test_actions_need_change_permission(client, django_user_model):
    viewer = django_user_model.objects.create_user("viewer", password="x", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_schedule"))
    client.force_login(viewer)
    s = make("protected")
    response = client.get(reverse(CHANGELIST))
    assert response.status_code == 200
    assert 'name="action"' not in response.content.decode()
    run_action(client, "cancel", s, post="yes")
    s.refresh_from_db()
    assert s.status == Status.ACTIVE
    cancel = reverse("admin:durable_schedules_schedule_transition", args=[s.pk, "cancel"])
    assert client.get(cancel).status_code == 403  # not even the question


# ---------------------------------------------------------------------------------------
# the change page
# ---------------------------------------------------------------------------------------


@pytest.mark.vendor_independent  # cron and zone arithmetic rendered
def test_change_page_shows_the_next_five_fire_times_in_zone_and_utc(admin_client):
    s = make("tokyo", kind="cron", interval_seconds=None, cron="0 9 * * *", timezone="Asia/Tokyo")
    response = admin_client.get(change_url(s))
    html = response.content.decode()
    assert response.status_code == 200
    table = re.search(r'<table class="dds-upcoming">.*?</table>', html, re.S).group(0)
    assert "<th>Asia/Tokyo</th><th>UTC</th>" in table
    rows = re.findall(r"<tr><td>(\d)</td><td>(.*?)</td><td>(.*?)</td></tr>", table)
    assert [r[0] for r in rows] == ["1", "2", "3", "4", "5"]
    expected = [t for t in s.upcoming(5)]
    for (_, local, utc), t in zip(rows, expected, strict=True):
        assert local == f"{t.astimezone(UTC) + timedelta(hours=9):%Y-%m-%d} 09:00:00 JST"
        assert utc == f"{t:%Y-%m-%d} 00:00:00 UTC"


@pytest.mark.vendor_independent  # the page's words for a paused row
def test_change_page_of_a_paused_schedule_says_nothing_runs(admin_client):
    s = make("paused-page")
    state.disable(s.pk)
    html = admin_client.get(change_url(s)).content.decode()
    assert "none runs unless it is enabled" in html
    assert "nothing planned while paused" in html


@pytest.mark.vendor_independent  # inline permissions and slicing of distinct instants
def test_change_page_inlines_are_read_only_and_limited(admin_client):
    s = make("history")
    add_history(s, ["succeeded"] * 22 + ["failed", "skipped", "missed"])
    open_attempt(s, datetime(2027, 6, 2, tzinfo=UTC))  # after the history above
    response = admin_client.get(change_url(s))
    html = response.content.decode()
    formsets = {f.formset.prefix: f for f in response.context["inline_admin_formsets"]}
    assert set(formsets) == {"receipts", "attempts", "events"}
    assert len(formsets["receipts"].formset.forms) == 20
    assert len(formsets["attempts"].formset.forms) == 20
    for inline in formsets.values():
        assert not inline.has_add_permission
        assert not inline.has_change_permission
        assert not inline.has_delete_permission
    # Newest first: the open attempt, then the missed/skipped/failed receipts.
    assert "open (no receipt yet)" in html
    receipts = formsets["receipts"].formset.get_queryset()
    assert [r.status for r in receipts][:3] == ["missed", "skipped", "failed"]
    # The full history is one click away, filtered by schedule.
    assert f"?schedule__exact={s.pk}" in html
    assert "26 attempts</a>" in html and "25 receipts</a>" in html
    # Filtering the history lists by schedule is allowed.
    url = reverse("admin:durable_schedules_runreceipt_changelist")
    listed = admin_client.get(f"{url}?schedule__exact={s.pk}")
    assert listed.status_code == 200 and listed.context["cl"].result_count == 25


@pytest.mark.vendor_independent  # the registry's names in a form
def test_callback_is_a_choice_of_registered_names(admin_client):
    response = admin_client.get(reverse("admin:durable_schedules_schedule_add"))
    field = response.context["adminform"].form.fields["callback"]
    values = [v for v, _ in field.choices if v]
    assert values == registry.names() and "tests.noop" in values
    assert "status" not in response.context["adminform"].form.fields


def _form_data(**overrides) -> dict:
    data = {
        "name": "made-in-admin",
        "callback": "tests.echo",
        "kind": "cron",
        "interval_seconds": "",
        "cron": "30 2 * * *",
        "timezone": "Europe/Paris",
        "run_at": "",
        "start_at": "",
        "end_at": "",
        "max_runs": "",
        "payload": "{}",
        "metadata": "{}",
        "owner": "",
        "misfire_policy": "coalesce",
        "overlap_policy": "skip",
        "max_attempts": "",
        "receipts-TOTAL_FORMS": "0",
        "receipts-INITIAL_FORMS": "0",
        "receipts-MIN_NUM_FORMS": "0",
        "receipts-MAX_NUM_FORMS": "0",
        "attempts-TOTAL_FORMS": "0",
        "attempts-INITIAL_FORMS": "0",
        "attempts-MIN_NUM_FORMS": "0",
        "attempts-MAX_NUM_FORMS": "0",
        "events-TOTAL_FORMS": "0",
        "events-INITIAL_FORMS": "0",
        "events-MIN_NUM_FORMS": "0",
        "events-MAX_NUM_FORMS": "0",
    }
    data.update(overrides)
    return data


@pytest.mark.vendor_independent  # which service the form calls (a spy); create's SQL: test_state
def test_add_goes_through_services_and_rejects_unregistered_callbacks(admin_client, monkeypatch):
    created = []
    real = state.create_schedule

    def spy(prepared=None, **kw):  # the form's prepared definition (state.prepare)
        name = prepared.fields["name"] if prepared else kw["name"]
        created.append((name, kw["source"], str(kw["actor"])))
        return real(prepared, **kw)

    monkeypatch.setattr(state, "create_schedule", spy)
    add = reverse("admin:durable_schedules_schedule_add")

    response = admin_client.post(add, _form_data(callback="os.system"))
    assert response.status_code == 200
    assert "callback" in response.context["adminform"].form.errors
    assert not Schedule.objects.exists()

    response = admin_client.post(add, _form_data(), follow=True)
    assert response.status_code == 200, response.context["adminform"].form.errors
    assert created == [("made-in-admin", "admin", "admin")]
    s = Schedule.objects.get(name="made-in-admin")
    assert s.kind == "cron" and s.timezone == "Europe/Paris" and s.next_run_at is not None


@pytest.mark.vendor_independent  # which service the form calls (a spy); update's SQL: test_state
def test_edit_goes_through_services_and_writes_only_what_changed(admin_client, monkeypatch):
    s = make("to-edit", interval_seconds=60)
    edits = []
    real = state.update_schedule

    def spy(pk, *, actor=None, source="code", **changes):
        given = dict(pk.fields) if isinstance(pk, state.Prepared) else changes  # prepared
        edits.append((given, source, str(actor)))
        return real(pk, actor=actor, source=source, **changes)

    monkeypatch.setattr(state, "update_schedule", spy)
    data = _form_data(
        name="to-edit",
        callback="tests.noop",
        kind="interval",
        interval_seconds="300",
        cron="",
        timezone="UTC",
    )
    # What the browser sends for fields with callable defaults (show_hidden_initial).
    data.update({"initial-timezone": "UTC", "initial-payload": "{}", "initial-metadata": "{}"})
    response = admin_client.post(change_url(s), data, follow=True)
    assert response.status_code == 200
    assert edits == [({"interval_seconds": 300}, "admin", "admin")]
    s.refresh_from_db()
    assert s.interval_seconds == 300 and s.status == Status.ACTIVE


def test_change_page_buttons_run_transitions(admin_client):
    s = make("buttons")
    html = admin_client.get(change_url(s)).content.decode()
    assert ">Disable</button>" in html and ">Trigger now</button>" in html
    assert ">Enable</button>" not in html

    url = reverse("admin:durable_schedules_schedule_transition", args=[s.pk, "disable"])
    response = admin_client.post(url, follow=True)
    assert messages_of(response) == [("success", "Disabled 1 schedule: buttons (active → paused).")]
    assert response.redirect_chain[-1][0] == change_url(s)
    assert ">Enable</button>" in response.content.decode()
    s.refresh_from_db()
    assert s.status == Status.PAUSED

    assert admin_client.get(url).status_code == 405
    bogus = reverse("admin:durable_schedules_schedule_transition", args=[s.pk, "explode"])
    assert admin_client.post(bogus).status_code == 404

    state.cancel(s.pk)
    enable = reverse("admin:durable_schedules_schedule_transition", args=[s.pk, "enable"])
    response = admin_client.post(enable, follow=True)
    assert messages_of(response) == [
        (
            "error",
            "Enable refused for 1 schedule: buttons (a cancelled schedule cannot be enabled).",
        )
    ]


def test_change_page_button_of_a_deleted_schedule_redirects_with_a_warning(admin_client):
    s = make("deleted-meanwhile")
    url = reverse("admin:durable_schedules_schedule_transition", args=[s.pk, "disable"])
    state.delete_schedule(s.pk)
    response = admin_client.post(url, follow=True)
    assert response.redirect_chain[-1][0] == reverse("admin:index")
    assert messages_of(response) == [
        ("warning", f"schedule with ID “{s.pk}” doesn’t exist. Perhaps it was deleted?")
    ]


@pytest.mark.vendor_independent  # a row's HTML with an unregistered callback
def test_page_of_a_schedule_whose_callback_is_gone_still_renders(admin_client):
    s = make("orphan")
    Schedule.objects.filter(pk=s.pk).update(callback="removed.callback")
    assert admin_client.get(reverse(CHANGELIST)).status_code == 200
    html = admin_client.get(change_url(s)).content.decode()
    assert "removed.callback (not registered)" in html


# ---------------------------------------------------------------------------------------
# deleting
# ---------------------------------------------------------------------------------------


def test_delete_goes_through_the_state_machine(admin_client):
    s = make("deletable")
    add_history(s, ["succeeded"])
    url = reverse("admin:durable_schedules_schedule_delete", args=[s.pk])
    assert admin_client.get(url).status_code == 200
    response = admin_client.post(url, {"post": "yes"}, follow=True)
    assert [lvl for lvl, _ in messages_of(response)] == ["success"]
    assert not Schedule.objects.filter(pk=s.pk).exists()
    assert RunReceipt.objects.filter(schedule_id=s.pk).count() == 1  # the trail stays
    assert LogEntry.objects.filter(action_flag=DELETION, object_id=str(s.pk)).exists()


@pytest.mark.parametrize("blocker", ["lease", "open attempt"])
def test_refused_delete_is_an_error_message_not_a_500(admin_client, blocker):
    s = make("kept")
    if blocker == "lease":
        hold_lease(s)
        reason = "the schedule is running (it holds a lease)"
    else:
        open_attempt(s)
        reason = "the schedule has an open attempt without a receipt"
    url = reverse("admin:durable_schedules_schedule_delete", args=[s.pk])
    response = admin_client.post(url, {"post": "yes"}, follow=True)
    assert response.status_code == 200
    assert messages_of(response) == [("error", f"The schedule “kept” was not deleted: {reason}.")]
    assert response.redirect_chain[-1][0] == change_url(s)
    assert Schedule.objects.filter(pk=s.pk).exists()
    assert "deleted successfully" not in response.content.decode()
    assert not LogEntry.objects.filter(action_flag=DELETION).exists()
    assert not ScheduleEvent.objects.filter(action="deleted").exists()


def test_bulk_delete_reports_deleted_and_refused(admin_client):
    gone, kept = make("gone"), make("stays")
    hold_lease(kept)
    # The confirmation page first.
    response = run_action(admin_client, "delete_selected", gone, kept)
    assert response.status_code == 200 and "Are you sure" in response.content.decode()
    data = {
        "action": "delete_selected",
        "_selected_action": [str(gone.pk), str(kept.pk)],
        "post": "yes",
    }
    response = admin_client.post(reverse(CHANGELIST), data, follow=True)
    assert messages_of(response) == [
        ("success", "Deleted 1 schedule: gone."),
        ("error", "Not deleted, 1 schedule: stays (the schedule is running (it holds a lease))."),
    ]
    assert list(Schedule.objects.values_list("name", flat=True)) == ["stays"]
    assert list(
        LogEntry.objects.filter(action_flag=DELETION).values_list("object_repr", flat=True)
    ) == ["gone"]
    assert "Successfully deleted" not in response.content.decode()


# ---------------------------------------------------------------------------------------
# read-only history
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("model_name", ["runattempt", "runreceipt", "workerheartbeat"])
@pytest.mark.vendor_independent  # Django's 403s before any write
def test_history_admins_are_read_only_even_for_superusers(admin_client, model_name):
    s = make("ro")
    [receipt] = add_history(s, ["failed"])
    WorkerHeartbeat.objects.create(
        worker_id="w1", started_at=timezone.now(), last_seen_at=timezone.now()
    )
    obj_pk = {
        "runattempt": receipt.attempt_id,
        "runreceipt": receipt.pk,
        "workerheartbeat": "w1",
    }[model_name]
    base = f"admin:durable_schedules_{model_name}"

    listing = admin_client.get(reverse(f"{base}_changelist"))
    assert listing.status_code == 200
    assert 'name="_selected_action"' not in listing.content.decode()  # no actions at all
    assert admin_client.get(reverse(f"{base}_add")).status_code == 403
    assert admin_client.post(reverse(f"{base}_add"), {}).status_code == 403
    change = reverse(f"{base}_change", args=[obj_pk])
    view = admin_client.get(change)
    assert view.status_code == 200  # viewing is fine
    assert 'name="_save"' not in view.content.decode()  # no save button
    assert admin_client.post(change, {"worker": "forged"}).status_code == 403
    delete = reverse(f"{base}_delete", args=[obj_pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert RunReceipt.objects.count() == 1 and WorkerHeartbeat.objects.count() == 1


def test_receipt_and_attempt_lists_render_without_a_query_per_row(
    admin_client, django_assert_max_num_queries
):
    for i in range(30):
        add_history(make(f"r-{i:02}"), ["succeeded", "failed"])
    for name in ("runreceipt", "runattempt"):
        with django_assert_max_num_queries(10):
            response = admin_client.get(reverse(f"admin:durable_schedules_{name}_changelist"))
        assert response.status_code == 200


# ---------------------------------------------------------------------------------------
# health
# ---------------------------------------------------------------------------------------


def test_health_page_shows_snapshot_workers_failing_and_degraded(admin_client):
    make("fine")
    failing = make("flaky")
    add_history(failing, ["succeeded", "failed", "failed"])
    Schedule.objects.filter(pk=failing.pk).update(failure_count=2)
    degraded = make("lost-callback")
    Schedule.objects.filter(pk=degraded.pk).update(
        status=Status.PAUSED, degraded_reason="callback 'gone' is not registered"
    )
    now = state.db_now()
    WorkerHeartbeat.objects.create(
        worker_id="host-a:123",
        hostname="host-a",
        pid=123,
        started_at=now - timedelta(minutes=5),
        last_seen_at=now - timedelta(seconds=3),
        runs_finished=42,
        clock_skew_seconds=0.25,
    )
    WorkerHeartbeat.objects.create(
        worker_id="host-b:9",
        hostname="host-b",
        pid=9,
        started_at=now - timedelta(minutes=5),
        last_seen_at=now,
        clock_skew_seconds=-12.5,
    )
    WorkerHeartbeat.objects.create(
        worker_id="stopped:1", started_at=now, last_seen_at=now, stopped_at=now
    )

    response = admin_client.get(reverse("admin:durable_schedules_schedule_health"))
    html = response.content.decode()
    assert response.status_code == 200
    assert "Unhealthy" in html
    assert "1 schedule degraded" in html
    assert "worker host-b:9 clock is -12.5s off the database clock" in html
    # Counts, with links into the filtered list.
    assert re.search(r'href="[^"]*\?failing=yes"><span class="dds-num">1</span>', html)
    assert re.search(r'href="[^"]*\?degraded=yes"><span class="dds-num">1</span>', html)
    assert re.search(r'<span class="dds-num">2</span><span class="dds-label">live workers', html)
    # Live workers with their last heartbeat and skew; a stopped one is not live.
    assert "host-a:123" in html and "host-b:9" in html and "stopped:1" not in html
    assert re.search(r'dds-bad"[^>]*>-12.500 s', html)
    assert "0.250 s" in html
    # Failing and degraded schedules link to their change pages.
    assert f'href="{change_url(failing)}">flaky</a>' in html
    assert f'href="{change_url(degraded)}">lost-callback</a>' in html
    assert "RuntimeError: boom" in html
    assert "callback &#x27;gone&#x27; is not registered" in html


def test_health_page_when_healthy(admin_client):
    make("fine")
    now = state.db_now()
    WorkerHeartbeat.objects.create(worker_id="w", started_at=now, last_seen_at=now)
    html = admin_client.get(reverse("admin:durable_schedules_schedule_health")).content.decode()
    assert "Healthy" in html and "Unhealthy" not in html
    assert "No active or paused schedule has consecutive failures." in html
    assert "No schedule is degraded." in html


@pytest.mark.vendor_independent  # Django's login and permission redirects
def test_health_page_is_staff_only(client, django_user_model):
    url = reverse("admin:durable_schedules_schedule_health")
    response = client.get(url)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]

    user = django_user_model.objects.create_user("plain", password="x")
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]

    staff = django_user_model.objects.create_user("staff", password="x", is_staff=True)
    client.force_login(staff)
    assert client.get(url).status_code == 403  # staff, but may not view schedules
    staff.user_permissions.add(Permission.objects.get(codename="view_schedule"))
    assert client.get(url).status_code == 200


@pytest.mark.vendor_independent  # links in the pages' HTML
def test_health_page_is_linked_from_the_app_index_and_lists(admin_client):
    health = reverse("admin:durable_schedules_schedule_health")
    app_index = admin_client.get(reverse("admin:app_list", args=["durable_schedules"]))
    assert health in app_index.content.decode()
    heartbeats = admin_client.get(reverse("admin:durable_schedules_workerheartbeat_changelist"))
    assert health in heartbeats.content.decode()
    s = make("linked")
    assert health in admin_client.get(change_url(s)).content.decode()


@pytest.mark.parametrize("model", ["runattempt", "runreceipt"])
@pytest.mark.vendor_independent  # the list's HTML links
def test_each_history_row_links_to_its_own_page_and_the_schedule_is_its_own_column(
    admin_client, model
):
    """The first column links the row (attempt or receipt); the schedule link stands in a
    column of its own, never inside the row link (a browser drops a link inside a link)."""
    s = make("linked")
    [receipt] = add_history(s, ["succeeded"])
    html = admin_client.get(reverse(f"admin:durable_schedules_{model}_changelist")).content
    html = html.decode()
    row_pk = receipt.attempt_id if model == "runattempt" else receipt.pk
    row_url = reverse(f"admin:durable_schedules_{model}_change", args=[row_pk])
    assert re.search(rf'<th class="field-run"><a href="{re.escape(row_url)}">#1\.1</a></th>', html)
    assert re.search(
        rf'<td class="field-schedule_link"><a href="{re.escape(change_url(s))}">linked</a></td>',
        html,
    )
    assert not re.search(r"<a [^>]*>(?:(?!</a>).)*<a ", html, re.S)  # no link inside a link


def test_the_audit_trail_is_on_the_change_page_and_in_its_own_filterable_list(admin_client):
    s = make("audited", interval_seconds=60)
    state.update_schedule(s.pk, interval_seconds=120, source="api")
    state.disable(s.pk, source="command")
    html = admin_client.get(change_url(s)).content.decode()
    assert "Audit trail: latest control actions" in html
    assert "interval_seconds: 60 → 120" in html and "status: active → paused" in html
    assert "3 events</a>" in html  # created (from code), edited, disabled: linked to the list

    events = reverse("admin:durable_schedules_scheduleevent_changelist")
    html = admin_client.get(events, {"schedule__exact": s.pk}).content.decode()
    assert html.count('class="field-action"') == 3
    html = admin_client.get(events, {"action__exact": "disabled"}).content.decode()
    assert html.count('class="field-action"') == 1 and "command" in html
    event = ScheduleEvent.objects.get(action="disabled")
    page = admin_client.get(
        reverse("admin:durable_schedules_scheduleevent_change", args=[event.pk])
    )
    assert page.status_code == 200
    add = reverse("admin:durable_schedules_scheduleevent_add")
    assert admin_client.get(add).status_code == 403  # append-only, for superusers too


@pytest.mark.vendor_independent  # cron in words: pure text
def test_cron_in_words_in_the_list_the_form_and_as_you_type(admin_client):
    s = make("weekdays", kind="cron", interval_seconds=None, cron="0 9 * * 1-5")
    html = admin_client.get(reverse(CHANGELIST)).content.decode()
    assert '<span class="dds-cron-words">At 09:00, Monday through Friday</span>' in html
    html = admin_client.get(change_url(s)).content.decode()
    assert 'id="id_cron_words" aria-live="polite">At 09:00, Monday through Friday</p>' in html
    describe = reverse("admin:durable_schedules_schedule_describe_cron")
    assert f'data-words-url="{describe}"' in html
    answer = admin_client.get(describe, {"cron": "*/15 * * * *", "timezone": "Europe/Paris"})
    assert answer.json() == {"words": "Every 15 minutes", "error": ""}
    answer = admin_client.get(describe, {"cron": "61 * * * *"}).json()
    assert answer["words"] == "" and "minute" in answer["error"]
    assert admin_client.get(describe, {"cron": "@daily"}).json()["words"] == "At 00:00"


def test_a_second_trigger_before_the_run_says_one_run_happens(admin_client):
    s = make("twice")
    url = reverse("admin:durable_schedules_schedule_transition", args=[s.pk, "trigger"])
    first = admin_client.post(url, follow=True)
    assert messages_of(first)[0][1].startswith("Triggered 1 schedule: twice")
    second = admin_client.post(url, follow=True)
    [(level, text)] = messages_of(second)
    assert level == "info" and text.startswith(
        "Already triggered and not run yet, so one run happens at the next worker pass: twice"
    )
    assert ScheduleEvent.objects.filter(action="triggered").count() == 1
    assert [c.schedule_name for c in state.claim_due(worker="w")] == ["twice"]
    assert state.claim_due(worker="w") == []  # one run, not two


@pytest.mark.vendor_independent  # the message's zone text; enable's SQL: test_disable_then_enable_say_what_changed
def test_enable_says_the_next_run_in_the_schedule_zone_and_in_utc(admin_client):
    s = make(
        "tokyo-job", kind="cron", interval_seconds=None, cron="0 9 * * *", timezone="Asia/Tokyo"
    )
    state.disable(s.pk)
    [(level, text)] = messages_of(run_action(admin_client, "enable", s))
    assert re.search(
        r"next run \d{4}-\d\d-\d\d 09:00:00 JST \(\d{4}-\d\d-\d\d 00:00:00 UTC\)", text
    )


@pytest.mark.parametrize("model", ["runattempt", "runreceipt", "scheduleevent"])
def test_history_instants_are_in_the_schedule_zone_with_utc_beside(admin_client, model):
    s = make("tokyo-history", timezone="Asia/Tokyo")
    [receipt] = add_history(s, ["succeeded"], start=datetime(2027, 6, 1, 0, 0, tzinfo=UTC))
    state.disable(s.pk)
    html = admin_client.get(reverse(f"admin:durable_schedules_{model}_changelist")).content
    html = html.decode()
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d JST</span><span class=\"dds-utc\">", html)
    row = {"runattempt": receipt.attempt_id, "runreceipt": receipt.pk}.get(model)
    if row is None:
        row = ScheduleEvent.objects.get(schedule_id=s.pk, action="disabled").pk
    page = reverse(f"admin:durable_schedules_{model}_change", args=[row])
    detail = admin_client.get(page).content.decode()
    assert "JST" in detail and " UTC" in detail
    # A deleted schedule's history still renders, in UTC.
    state.delete_schedule(s.pk)
    response = admin_client.get(page)
    assert response.status_code == 200 and "JST" not in response.content.decode()


@pytest.mark.vendor_independent  # which form fields are read-only
def test_a_schedule_declared_in_code_shows_its_definition_read_only(admin_client):
    from django_durable_schedules.registry import register, registry

    register("tests.declared_hourly", lambda ctx: None, every=3600)
    try:
        [row] = [r for r in state.sync_declared() if r.name == "tests.declared_hourly"]
        response = admin_client.get(change_url(row))
        html = response.content.decode()
        form = response.context["adminform"].form
        assert "interval_seconds" not in form.fields and "kind" not in form.fields
        assert "max_attempts" in form.fields  # policies stay editable
        assert any("is declared in code" in text for _, text in messages_of(response))
        assert 'id="id_interval_seconds"' not in html
    finally:
        registry.remove("tests.declared_hourly")


def test_a_chain_declared_in_code_shows_its_links_read_only(admin_client):
    from django_durable_schedules.registry import register, registry

    register("tests.declared_up", lambda ctx: None, every=3600)
    register("tests.declared_after", lambda ctx: None, after=["tests.declared_up"])
    try:
        state.sync_declared()
        row = Schedule.objects.get(name="tests.declared_after")
        response = admin_client.get(change_url(row))
        form = response.context["adminform"].form
        assert "upstream" not in form.fields and "kind" not in form.fields
        assert "wait_seconds" in form.fields  # not declared: a policy, editable
        assert 'id="id_upstream"' not in response.content.decode()
        data = {k: v for k, v in _form_data().items() if k.endswith("FORMS")}
        for name in form.fields:
            value = form[name].value()
            if value is not None and value is not False:
                data[name] = value
        data.update({"wait_seconds": 120, "_save": "Save"})
        response = admin_client.post(change_url(row), data)
        assert response.status_code == 302, response.context["adminform"].form.errors
        row.refresh_from_db()
        assert row.wait_seconds == 120
        assert [u.name for u in row.upstream.all()] == ["tests.declared_up"]
    finally:
        registry.remove("tests.declared_up")
        registry.remove("tests.declared_after")


def test_outcome_marks_name_their_time_in_the_schedule_zone_and_utc(admin_client):
    s = make("tokyo-strip", timezone="Asia/Tokyo")
    add_history(s, ["failed"], start=datetime(2027, 6, 1, 0, 0, tzinfo=UTC))
    html = admin_client.get(reverse(CHANGELIST)).content.decode()
    assert (
        'title="#1 failed · 2027-06-01 09:01:01 JST (2027-06-01 00:01:01 UTC) · RuntimeError: boom"'
        in html
    )
