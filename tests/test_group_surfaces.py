"""Concurrency groups where people see them (issue #28, item 1): the group admin (its list
with the live leases and whether it is at its limit, in a bounded number of queries; its
form's checks; the run state never written back; the "cannot delete" page of a group that
schedules name), the schedule list's "waiting for group NAME (2 of 2 running)", and health
(groups at their limit listed, a group whose rate cannot be read a problem)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from django_durable_schedules import health, state
from django_durable_schedules.models import ConcurrencyGroup, Schedule, WorkerHeartbeat
from django_durable_schedules.state import db_now

from .factories import due_schedules

S = timedelta(seconds=1)

pytestmark = pytest.mark.django_db(transaction=True)


def due_rows(count, *, group=None, prefix="g", ago=60):
    """``count`` active hourly schedules due ``ago`` seconds ago by the database clock,
    a second apart (a defined claim order)."""
    due_schedules(
        count, prefix=prefix, due=db_now("default"), offset=-ago, spacing=1, concurrency_group=group
    )


def full_group(name="reports", cap=2, due=5):
    """A group of ``cap`` places with ``due`` due schedules, ``cap`` of them claimed now."""
    group = ConcurrencyGroup.objects.create(name=name, max_running=cap)
    due_rows(due, group=group, prefix=name)
    claims = state.claim_due(worker="w", limit=due)
    assert len(claims) == cap
    return group, claims


# -- the group admin ----------------------------------------------------------------------


def test_the_group_list_shows_running_now_schedules_and_at_limit(
    admin_client, django_assert_max_num_queries
):
    full_group("reports")
    ConcurrencyGroup.objects.create(name="idle", max_running=3, rate="10/m")
    for i in range(20):  # more groups: the page's query count does not grow with them
        ConcurrencyGroup.objects.create(name=f"more-{i:02d}", max_running=1)
    url = reverse("admin:durable_schedules_concurrencygroup_changelist")
    with django_assert_max_num_queries(8):
        page = admin_client.get(url)
    assert page.status_code == 200
    rows = {r.name: r for r in page.context["cl"].result_list}
    assert (rows["reports"]._running, rows["reports"]._schedules) == (2, 5)
    assert rows["reports"]._at_limit is True
    assert (rows["idle"]._running, rows["idle"]._schedules, rows["idle"]._at_limit) == (0, 0, False)
    html = page.content.decode().lower()
    assert "running now" in html and "at its limit" in html and "10/m" in html


def test_the_group_form_checks_the_rate_and_asks_for_a_limit(admin_client):
    url = reverse("admin:durable_schedules_concurrencygroup_add")
    bad = admin_client.post(url, {"name": "mailer", "rate": "ten a minute"})
    assert bad.status_code == 200
    assert "A count per second, minute or hour" in bad.content.decode()
    none = admin_client.post(url, {"name": "mailer", "rate": ""})
    assert none.status_code == 200
    assert "Give max_running, a rate, or both." in none.content.decode()
    made = admin_client.post(url, {"name": "mailer", "rate": " 10 / m "})
    assert made.status_code == 302
    assert ConcurrencyGroup.objects.get(name="mailer").rate == "10/m"


def test_saving_a_group_keeps_its_starts_and_ends_its_hold(admin_client):
    group, _ = full_group("reports")
    group.refresh_from_db()
    url = reverse("admin:durable_schedules_concurrencygroup_change", args=[group.pk])
    page = admin_client.get(url)
    assert "full_until" not in page.context["adminform"].form.fields  # shown read-only
    # A claim writes the run state after the page was read; the save keeps the claim's
    # starts, and ends the hold so the next claim reads the new cap at once.
    later = group.full_until + 30 * S
    ConcurrencyGroup.objects.filter(pk=group.pk).update(full_until=later, starts=[1.0])
    saved = admin_client.post(url, {"name": "reports", "max_running": "3", "rate": ""})
    assert saved.status_code == 302
    group.refresh_from_db()
    assert (group.max_running, group.full_until, group.starts) == (3, None, [1.0])


def test_deleting_a_group_that_schedules_name_shows_the_protected_page(admin_client):
    group, _ = full_group("reports")
    url = reverse("admin:durable_schedules_concurrencygroup_delete", args=[group.pk])
    page = admin_client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "would require deleting the following protected related objects" in html
    assert "reports-000" in html
    refused = admin_client.post(url, {"post": "yes"})
    assert refused.status_code == 200  # the same page again; nothing deleted
    assert ConcurrencyGroup.objects.filter(pk=group.pk).exists()
    # Once no schedule names it, it is deleted.
    Schedule.objects.update(concurrency_group=None)
    assert admin_client.post(url, {"post": "yes"}).status_code == 302
    assert not ConcurrencyGroup.objects.filter(pk=group.pk).exists()


# -- the schedule admin -------------------------------------------------------------------


def test_the_schedule_list_says_which_group_holds_a_due_schedule(
    admin_client, django_assert_max_num_queries
):
    full_group("reports", cap=2, due=5)
    due_rows(3, prefix="free")
    url = reverse("admin:durable_schedules_schedule_changelist")
    with django_assert_max_num_queries(11):
        page = admin_client.get(url)
    html = page.content.decode()
    assert html.count("waiting for group reports (2 of 2 running)") == 3
    rows = page.context["cl"].result_list
    running = [s.dds_group_wait for s in rows if s.lease_token is not None]
    held = [s.dds_group_wait for s in rows if s.name.startswith("reports") and not s.lease_token]
    free = [s.dds_group_wait for s in rows if s.name.startswith("free")]
    assert running == ["", ""] and free == ["", "", ""]  # running, or due in no group
    assert held == ["waiting for group reports (2 of 2 running)"] * 3
    # A rate that holds it says so.
    ConcurrencyGroup.objects.create(name="mailer", rate="1/h")
    mailer = ConcurrencyGroup.objects.get(name="mailer")
    due_rows(2, group=mailer, prefix="mail")
    state.claim_due(worker="w", limit=10)
    page = admin_client.get(url)
    assert "waiting for group mailer (rate 1/h)" in page.content.decode()


def test_the_change_page_shows_the_wait_and_offers_the_group_as_a_select(admin_client):
    group, _ = full_group("reports", cap=1, due=2)
    waiting = Schedule.objects.get(concurrency_group=group, lease_token__isnull=True)
    url = reverse("admin:durable_schedules_schedule_change", args=[waiting.pk])
    page = admin_client.get(url)
    html = page.content.decode()
    assert "waiting for group reports (1 of 1 running)" in html
    assert '<select name="concurrency_group"' in html
    # The form saves the group: the select's value is the group's key.
    other = ConcurrencyGroup.objects.create(name="other", max_running=5)
    form = page.context["adminform"].form
    data = {}
    for name, field in form.fields.items():
        value = form.initial.get(name, field.initial)
        if value is None:
            continue
        if isinstance(value, list | tuple):
            data[name] = [getattr(v, "pk", v) for v in value]
        else:
            data[name] = getattr(value, "pk", value)
    data["concurrency_group"] = str(other.pk)
    for prefix in ("receipts", "attempts", "events"):
        for key in ("TOTAL_FORMS", "INITIAL_FORMS", "MIN_NUM_FORMS", "MAX_NUM_FORMS"):
            data.setdefault(f"{prefix}-{key}", "0")
    for formset in page.context["inline_admin_formsets"]:
        p = formset.formset.prefix
        data[f"{p}-TOTAL_FORMS"] = "0"
        data[f"{p}-INITIAL_FORMS"] = "0"
    saved = admin_client.post(url, data)
    assert saved.status_code == 302, saved.context["adminform"].form.errors
    waiting.refresh_from_db()
    assert waiting.concurrency_group_id == other.pk


# -- health -------------------------------------------------------------------------------


def beat():
    now = db_now("default")
    WorkerHeartbeat.objects.create(
        worker_id="w1", hostname="h", pid=1, started_at=now, last_seen_at=now
    )


def test_health_lists_groups_at_their_limit_as_information(
    admin_client, django_assert_max_num_queries
):
    full_group("reports", cap=2, due=5)
    ConcurrencyGroup.objects.create(name="idle", max_running=2)
    beat()
    now = db_now("default")
    from django_durable_schedules.group_health import groups_at_limit

    with django_assert_max_num_queries(1):
        rows = groups_at_limit(now)
    assert [(r["name"], r["running"], r["max_running"], r["waiting"]) for r in rows] == [
        ("reports", 2, 2, 3)
    ]
    h = health.snapshot(now=now)
    assert [g["name"] for g in h.groups_at_limit] == ["reports"]
    assert not any("reports" in p for p in h.problems)  # a full group is normal operation
    assert h.as_dict()["groups_at_limit"][0]["waiting"] == 3
    page = admin_client.get(reverse("admin:durable_schedules_schedule_health")).content.decode()
    assert "Concurrency groups at their limit (1)" in page
    assert admin_client.get("/api/health/").json()["groups_at_limit"][0]["name"] == "reports"


def test_a_group_out_of_its_rate_is_at_its_limit():
    group = ConcurrencyGroup.objects.create(name="mailer", rate="1/h")
    due_rows(3, group=group, prefix="mail")
    assert len(state.claim_due(worker="w", limit=10)) == 1
    now = db_now("default")
    (row,) = health.snapshot(now=now).groups_at_limit
    assert (row["name"], row["running"], row["rate"], row["waiting"]) == ("mailer", 1, "1/h", 2)
    assert row["rate_until"] > now
    assert health.snapshot(now=now).as_dict()["groups_at_limit"][0]["rate_until"].endswith("Z")


def test_a_group_whose_rate_cannot_be_read_is_a_problem(admin_client):
    group = ConcurrencyGroup.objects.create(name="broken", rate="5/s")
    ConcurrencyGroup.objects.filter(pk=group.pk).update(rate="five a second")
    ConcurrencyGroup.objects.create(name="spaced", rate="5/s")
    ConcurrencyGroup.objects.filter(name="spaced").update(rate=" 5 / s")  # odd, but readable
    beat()
    h = health.snapshot()
    assert h.unreadable_groups == ["broken"]
    assert not h.healthy
    assert any("concurrency group broken cannot be read" in p for p in h.problems)
    page = admin_client.get(reverse("admin:durable_schedules_schedule_health"))
    assert "Concurrency groups that cannot run" in page.content.decode()
    api = admin_client.get("/api/health/")
    assert api.json()["unreadable_groups"] == ["broken"]
