"""The admin timeline (issue #29, item 1): its pure geometry, its query string, and the
page through Django's test client (status codes, messages for bad values, a bounded number
of queries, bars that link to their receipts). The browser test is in
tests/test_timeline_browser.py."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from django.utils import timezone

from django_durable_schedules.admin import timeline_density as dens
from django_durable_schedules.admin import timeline_geometry as geo
from django_durable_schedules.admin.timeline import BARS_PER_ROW, ROWS_PER_PAGE
from django_durable_schedules.admin.timeline_params import read_params
from django_durable_schedules.db.timeline import bucket_counts, row_counts, timeline_runs
from django_durable_schedules.models import (
    BlackoutWindow,
    ConcurrencyGroup,
    ExclusionCalendar,
    ExclusionDate,
    RunAttempt,
    RunReceipt,
    Schedule,
)

TIMELINE = "admin:durable_schedules_schedule_timeline"
T = datetime(2027, 6, 1, 0, 0, tzinfo=UTC)


# ---------------------------------------------------------------------------------------
# geometry (pure)
# ---------------------------------------------------------------------------------------


def axis(hours: float = 24, width: float = 240, now_at: float | None = None) -> geo.Axis:
    end = T + timedelta(hours=hours)
    now = T + timedelta(hours=now_at if now_at is not None else hours)
    return geo.Axis(T, end, now, width)


def run(start_min: float | None, end_min: float, **kw) -> geo.RunInput:
    started = T + timedelta(minutes=start_min) if start_min is not None else None
    fields = {
        "pk": uuid.uuid4(),
        "status": "succeeded",
        "started_at": started,
        "claimed_at": started,
        "finished_at": T + timedelta(minutes=end_min),
    }
    fields.update(kw)
    return geo.RunInput(**fields)


def test_a_bar_is_as_long_as_the_run_and_starts_at_its_start():
    a = axis(hours=24, width=240)  # 10 px an hour
    bar = geo.bar_of(a, run(60, 180))
    assert (bar.x, bar.width) == (10.0, 20.0)
    assert bar.duration == "2 h 00 min"
    assert bar.title == "succeeded · started 2027-06-01 01:00:00 UTC · 2 h 00 min · scheduled"


def test_a_short_run_keeps_a_visible_width_inside_the_plot():
    a = axis(hours=24, width=240)
    assert geo.bar_of(a, run(60, 60.01)).width == geo.MIN_BAR_PX
    at_the_edge = geo.bar_of(a, run(24 * 60 - 0.01, 24 * 60))
    assert at_the_edge.x + at_the_edge.width == 240.0  # grows leftwards, stays in the plot


def test_a_run_before_the_axis_is_clipped_and_one_never_started_uses_its_claim():
    a = axis()
    clipped = geo.bar_of(a, run(-120, 60))
    assert (clipped.x, clipped.width) == (0.0, 10.0)
    claimed = geo.bar_of(a, run(None, 90, claimed_at=T + timedelta(minutes=60)))
    assert (claimed.x, claimed.width) == (10.0, 5.0)
    assert claimed.duration == "not run"
    # Clocks a little apart: a start after the finish is no negative bar.
    assert geo.bar_of(a, run(61, 60)).width == geo.MIN_BAR_PX


def test_origins_are_told_apart():
    assert geo.origin_mark("scheduled", 1) == ""
    assert geo.origin_mark("scheduled", 2) == "retry"
    assert geo.origin_mark("triggered", 3) == "retry"
    for origin in ("backfill", "triggered", "rerun", "buffered", "deferred"):
        assert geo.origin_mark(origin, 1) == origin
    assert geo.origin_words("rerun", 1, forced=True) == "rerun (forced)"
    assert geo.origin_words("scheduled", 2) == "retry (attempt 2), scheduled"


def test_bars_are_oldest_first():
    a = axis()
    late, early = run(300, 301), run(100, 101)
    assert [b.pk for b in geo.bars(a, [late, early])] == [early.pk, late.pk]


def test_a_bar_hidden_under_newer_ones_is_left_to_the_strip():
    a = axis(hours=24, width=240)  # 10 px an hour: a minute is a sixth of a pixel
    # Sixty one-second runs a minute apart: each newer bar (3 px at least) covers all but
    # a sixth of a pixel of the one before it, so only one bar in six shows a pixel.
    herd = [run(m, m + 1 / 60) for m in range(600, 660)]
    drawn = geo.bars(a, herd)
    assert [b.pk for b in drawn] == [r.pk for r in herd[5::6]]
    lefts = [b.x for b in drawn]
    assert all(later - earlier >= geo.VISIBLE_PX for earlier, later in zip(lefts, lefts[1:]))
    # Runs far apart, and one half covered by a newer one: all drawn.
    apart = [run(60, 120), run(110, 300), run(600, 601)]
    assert len(geo.bars(a, apart)) == 3


def test_a_run_in_flight_is_a_bar_from_its_claim_to_now():
    a = axis(hours=24, width=240, now_at=12)  # 10 px an hour, now at 120 px
    claim = T + timedelta(hours=11, minutes=30)
    bar = geo.running_bar(a, geo.RunningInput("a1", claim, worker="host-1:42"))
    assert (bar.x, bar.width, bar.status, bar.mark) == (115.0, 5.0, "running", "")
    assert bar.title == (
        "running since 2027-06-01 11:30:00 UTC · 30 min 00 s so far · scheduled · on host-1:42"
    )
    assert (bar.started, bar.duration) == ("2027-06-01 11:30:00 UTC", "30 min 00 s so far")
    # Claimed before the axis: clipped at its left edge; a second ago: still visible.
    early = geo.running_bar(a, geo.RunningInput("a2", T - timedelta(hours=3)))
    assert (early.x, early.width) == (0.0, 120.0)
    just = geo.running_bar(a, geo.RunningInput("a3", T + timedelta(hours=12, seconds=-1)))
    assert just.width == geo.MIN_BAR_PX and just.x + just.width <= 240
    # A retry says so; a lease no worker renewed says since when.
    retry = geo.running_bar(
        a,
        geo.RunningInput("a4", claim, attempt=2, lease_expires_at=claim + timedelta(minutes=5)),
    )
    assert retry.mark == "retry" and "retry (attempt 2), scheduled" in retry.title
    assert retry.title.endswith("lease expired 2027-06-01 11:35:00 UTC, not renewed")
    # A range that ended before the claim, or starts after now, has no bar of it.
    past = geo.Axis(T - timedelta(days=2), T - timedelta(days=1), T + timedelta(hours=12), 240)
    assert geo.running_bar(past, geo.RunningInput("a5", claim)) is None
    ahead = geo.Axis(T + timedelta(days=1), T + timedelta(days=2), T + timedelta(hours=12), 240)
    assert geo.running_bar(ahead, geo.RunningInput("a6", claim)) is None


def test_durations_in_words():
    assert geo.fmt_duration(0.25) == "0.25 s"
    assert geo.fmt_duration(42) == "42 s"
    assert geo.fmt_duration(184) == "3 min 04 s"
    assert geo.fmt_duration(7500) == "2 h 05 min"
    assert geo.fmt_duration(-1) == "0.00 s"


def test_slot_marks_keep_the_axis_and_strike_the_slots_not_run():
    a = axis(hours=24, now_at=12)
    marks = geo.slot_marks(
        a,
        [
            (T + timedelta(hours=30), ""),  # past the end: left out
            (T + timedelta(hours=18), "blackout window deploys"),
            (T + timedelta(hours=13), ""),
        ],
    )
    assert [(m.x, m.struck) for m in marks] == [(130.0, False), (180.0, True)]
    assert marks[1].title.endswith("not run, blackout window deploys")
    assert (marks[1].left, marks[1].right) == (176.0, 184.0)


def test_density_is_relative_to_the_busiest_bucket():
    a = axis(hours=4, width=40)  # 4 buckets of an hour, 10 px each
    seconds = dens.bucket_seconds(a, 4)
    assert seconds == 3600
    columns = dens.density(a, [(4, 1), (0, 0), (2, 0), (1, 1)], seconds, band_height=20)
    assert [(c.x, c.width, c.height, c.runs) for c in columns] == [
        (0.0, 10.0, 20.0, 4),
        (20.0, 10.0, 10.0, 2),
        (30.0, 10.0, 5.0, 1),
    ]
    assert (columns[0].failure_height, columns[0].failure_y) == (5.0, 15.0)
    assert columns[2].failure_height == 5.0  # all of it failed
    assert columns[0].title.endswith(": 4 runs, 1 failed")


def test_axis_labels_are_round_and_at_most_a_dozen():
    labels = geo.axis_labels(axis(hours=24, width=240))
    assert [lab.text for lab in labels[:3]] == ["Jun 01", "03:00", "06:00"]
    assert len(labels) <= geo.MAX_LABELS
    week = geo.axis_labels(geo.Axis(T, T + timedelta(days=7), T, 700))
    assert [lab.text for lab in week][:2] == ["Jun 01", "Jun 02"]


def test_the_axis_refuses_what_it_cannot_draw():
    with pytest.raises(ValueError):
        geo.Axis(T, T, T, 100)
    with pytest.raises(ValueError):
        geo.Axis(T.replace(tzinfo=None), T + timedelta(hours=1), T, 100)
    with pytest.raises(ValueError):
        dens.bucket_seconds(axis(), 0)


# ---------------------------------------------------------------------------------------
# the query string (pure)
# ---------------------------------------------------------------------------------------


def test_params_default_named_and_chosen_ranges():
    now = T + timedelta(days=3)
    params, errors = read_params({}, now)
    assert errors == [] and params.range == "24h"
    assert (params.start, params.end) == (now - timedelta(hours=24), now + timedelta(hours=4))
    params, errors = read_params({"range": "7d"}, now)
    assert params.start == now - timedelta(days=7) and not errors
    params, errors = read_params({"start": "2027-06-01", "end": "2027-06-02T06:00+02:00"}, now)
    assert not errors and params.range == ""
    assert (params.start, params.end) == (T, T + timedelta(hours=28))


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ({"range": "1y"}, "Unknown range"),
        ({"start": "yesterday", "end": "2027-06-02"}, "is not an ISO 8601"),
        ({"start": "2027-06-01"}, "needs both start and end"),
        ({"start": "2027-06-02", "end": "2027-06-01"}, "at least a minute"),
        ({"start": "2027-01-01", "end": "2027-12-01"}, "at most 92 days"),
        ({"status": "sleepy"}, "Unknown status"),
        ({"schedule": "42"}, "not a schedule's id"),
        ({"label": [":x"]}, "Label filter ignored"),
        ({"p": "-3"}, "Unknown page"),
        ({"callback": "x" * 300}, "callback filter is not valid"),
    ],
)
def test_a_bad_value_is_a_message_and_is_ignored(query, words):
    params, errors = read_params(query, T, statuses=("active",))
    assert len(errors) == 1 and words in errors[0]
    assert params.range == "24h" or "status" in query or "schedule" in query or "p" in query


# ---------------------------------------------------------------------------------------
# the page (database)
# ---------------------------------------------------------------------------------------


def make(name: str, **kw) -> Schedule:
    now = timezone.now().replace(microsecond=0)
    fields = {
        "callback": "tests.noop",
        "kind": "interval",
        "interval_seconds": 3600,
        "timezone": "UTC",
        "start_at": now - timedelta(days=1),
    }
    fields.update(kw)
    return Schedule.objects.create(name=name, **fields)


def history(schedule: Schedule, outcomes: list[tuple[str, str, int]], *, every=timedelta(hours=1)):
    """Receipts ending an hour apart up to now: ``(status, origin, attempt)`` each, oldest
    first, each run 30 s long."""
    now = timezone.now()
    attempts, receipts = [], []
    for i, (status, origin, number) in enumerate(outcomes, 1):
        at = now - every * (len(outcomes) - i + 1)
        attempt = RunAttempt(
            id=uuid.uuid4(),
            schedule=schedule,
            schedule_name=schedule.name,
            occurrence=i,
            attempt=number,
            scheduled_for=at,
            claimed_at=at,
            lease_token=uuid.uuid4(),
            lease_expires_at=at + timedelta(minutes=5),
            worker="test",
            idempotency_key=f"{schedule.pk}:{i}:{number}",
            origin=origin,
        )
        attempts.append(attempt)
        receipts.append(
            RunReceipt(
                attempt=attempt,
                schedule=schedule,
                occurrence=i,
                succeeded_occurrence=i if status == "succeeded" else None,
                status=status,
                started_at=at + timedelta(seconds=1),
                finished_at=at + timedelta(seconds=31),
            )
        )
    RunAttempt.objects.bulk_create(attempts)
    RunReceipt.objects.bulk_create(receipts)
    return receipts


@pytest.mark.vendor_independent  # the page's SVG and links; its reads: the bounded-reads tests below
@pytest.mark.django_db
def test_the_page_draws_bars_that_link_to_their_receipts(admin_client):
    s = make("nightly.report")
    receipts = history(
        s,
        [("succeeded", "scheduled", 1), ("failed", "scheduled", 1), ("succeeded", "scheduled", 2),
         ("succeeded", "backfill", 1), ("skipped", "triggered", 1)],
    )  # fmt: skip
    response = admin_client.get(reverse(TIMELINE))
    assert response.status_code == 200
    html = response.content.decode()
    for receipt in receipts:
        url = reverse("admin:durable_schedules_runreceipt_change", args=[receipt.pk])
        assert f'<a href="{url}" class="dds-tl-link" data-receipt="{receipt.pk}">' in html
    assert 'class="dds-tl-bar dds-tl-s-failed"' in html
    assert "dds-tl-m-retry" in html and "dds-tl-m-triggered" in html
    assert 'fill="url(#dds-tl-hatch)" x=' in html  # the backfill's hatch
    assert re.search(r"<title>failed · started [^<]+ · 30\.0*\d* s|<title>failed · started", html)
    assert '5 runs, <span class="dds-tl-failed-count">1 failed</span>' in html
    # Its next slots (hourly): ticks ahead of now; the text table of the runs is a link away.
    assert html.count('<g class="dds-tl-tick">') >= 3
    assert '<a href="?table=1#dds-tl-runs" class="dds-tl-table-link">' in html
    assert "<td>nightly.report</td>" not in html
    assert 'role="img"' in html and 'aria-label="nightly.report: 5 runs in the range' in html


@pytest.mark.vendor_independent  # the page's HTML table
@pytest.mark.django_db
def test_the_runs_as_a_text_table_on_request(admin_client):
    s = make("nightly.report")
    receipts = history(s, [("succeeded", "scheduled", 1), ("failed", "scheduled", 1)])
    html = admin_client.get(f"{reverse(TIMELINE)}?range=7d&table=1").text
    assert '<section class="dds-tl-table" id="dds-tl-runs"' in html
    for receipt in receipts:
        url = reverse("admin:durable_schedules_runreceipt_change", args=[receipt.pk])
        assert f'<tr><td>nightly.report</td><td><a href="{url}">{receipt.status}</a></td>' in html
    # The link back keeps the other parameters and drops the table.
    assert '<a href="?range=7d" class="dds-tl-table-link">hide the table</a>' in html
    # The range links and the pages keep the filters, not the table: a request each.
    assert "table=1" not in html.split('class="dds-tl-ranges"')[1].split("</div>")[0]


@pytest.mark.django_db
def test_a_busy_rows_strip_is_one_path_per_outcome_and_its_counts_are_in_the_table(
    admin_client, monkeypatch
):
    from django_durable_schedules.admin import timeline as view

    monkeypatch.setattr(view, "BARS_PER_ROW", 3)
    s = make("busy.row")
    statuses = [("succeeded", "scheduled", 1)] * 6 + [("failed", "scheduled", 1)] * 2
    history(s, statuses)
    html = admin_client.get(reverse(TIMELINE)).text
    row = html.split('data-schedule="busy.row"')[1].split("</tr>")[0]
    assert row.count("<path ") == 2 and '<rect class="dds-tl-heat"' not in row
    strip = re.search(r'<path class="dds-tl-heat" d="([^"]+)"><title>([^<]+)</title>', row)
    assert strip and strip.group(1).startswith("M") and "8 runs in" in strip.group(2)
    failed = re.search(r'<path class="dds-tl-heat-failed" d="[^"]+"><title>([^<]+)</title>', row)
    assert failed and failed.group(1).startswith("failed: 2 runs in")
    assert 'viewBox="0 0 720 22" preserveAspectRatio="none"' in row
    table = admin_client.get(f"{reverse(TIMELINE)}?table=1").text
    buckets = re.search(
        r'<tr class="dds-tl-buckets"><td>busy.row</td><td colspan="4">([^<]+)<', table
    )
    assert buckets and "runs per " in buckets.group(1)
    cells = [c.rsplit(": ", 1)[1] for c in buckets.group(1).split(" min: ", 1)[1].split("; ")]
    counted = [re.fullmatch(r"(\d+)(?: \((\d+) failed\))?", c).groups() for c in cells]
    assert sum(int(n) for n, _ in counted) == 8
    assert sum(int(f or 0) for _, f in counted) == 2


def claim(schedules: list[Schedule]) -> list[RunAttempt]:
    """Claim each of ``schedules`` as a worker does (a trigger, then ``claim_due``): an
    attempt holding the schedule's lease, no receipt yet."""
    from django_durable_schedules import state

    for schedule in schedules:
        state.trigger(schedule.pk)
    claims = state.claim_due(worker="host-1:4242")
    assert {c.schedule_id for c in claims} == {s.pk for s in schedules}
    return list(RunAttempt.objects.filter(schedule__in=schedules))


@pytest.mark.vendor_independent  # the page's SVG
@pytest.mark.django_db
def test_a_run_in_flight_is_a_running_bar_to_now_linking_to_its_attempt(admin_client, monkeypatch):
    from django_durable_schedules.admin import timeline as view

    busy = make("busy", start_at=timezone.now() + timedelta(hours=1))
    idle = make("idle", start_at=timezone.now() + timedelta(hours=1))
    (attempt,) = claim([busy])
    # The host's clock two hours behind: the page's "now" is the database's.
    host = timezone.now() - timedelta(hours=2)
    monkeypatch.setattr(view, "dj_timezone", type("Host", (), {"now": staticmethod(lambda: host)}))
    response = admin_client.get(reverse(TIMELINE))
    html = response.text
    url = reverse("admin:durable_schedules_runattempt_change", args=[attempt.pk])
    link = f'<a href="{url}" class="dds-tl-link dds-tl-running-link" data-attempt="{attempt.pk}">'
    assert html.count(link) == 1 and html.count("dds-tl-running-link") == 1  # not idle's
    since = geo.fmt_instant(attempt.claimed_at)
    assert re.search(
        rf"<title>running since {since} · [\d.]+ s so far · triggered · on host-1:4242", html
    )
    assert '<rect class="dds-tl-bar dds-tl-running" x="' in html
    # Its words: under the name, in the row's label, in the table (linked) and the legend.
    note = rf'class="dds-note dds-tl-running-note">running since ([\d-]+ )?{attempt.claimed_at:%H:%M:%S} UTC<'
    assert re.search(note, html)
    assert f"busy: 0 runs in the range; running since {since}" in html
    table = admin_client.get(f"{reverse(TIMELINE)}?table=1").text
    assert f'<tr><td>busy</td><td><a href="{url}">running</a></td><td>{since}</td>' in table
    assert "running (no receipt yet" in html
    axis = response.context["axis"]
    assert abs(axis.now - timezone.now()) < timedelta(minutes=1)
    assert axis.start == axis.now - timedelta(hours=24)
    # The bar ends at now: its right edge is the "now" line's.
    bar = next(r["running"] for r in response.context["rows"] if r["running"])
    assert abs(float(bar["x"]) + float(bar["width"]) - float(response.context["now_x"])) < 0.5
    assert idle.name in html and html.count("dds-tl-running-note") == 1


@pytest.mark.vendor_independent  # the page's SVG
@pytest.mark.django_db
def test_a_range_that_ended_before_the_claim_draws_no_running_bar(admin_client):
    busy = make("busy", start_at=timezone.now() + timedelta(hours=1))
    claim([busy])
    html = admin_client.get(f"{reverse(TIMELINE)}?start=2027-01-01&end=2027-01-02").text
    if timezone.now() < datetime(2027, 1, 2, tzinfo=UTC):  # the range is ahead: still none
        assert "dds-tl-running-link" not in html
    past = admin_client.get(f"{reverse(TIMELINE)}?start=2020-01-01&end=2020-01-02").text
    assert "dds-tl-running-link" not in past and 'data-schedule="busy"' in past


@pytest.mark.vendor_independent  # slot arithmetic drawn in SVG
@pytest.mark.django_db
def test_excluded_and_blacked_out_slots_are_struck_through(admin_client):
    now = timezone.now()
    s = make("daily.export", interval_seconds=600)
    window = BlackoutWindow.objects.create(
        name="deploys", start_at=now + timedelta(minutes=30), end_at=now + timedelta(minutes=65)
    )
    s.blackout_windows.add(window)
    calendar = ExclusionCalendar.objects.create(name="holidays")
    # Two days on: never the day of the window, whatever the time of day (from 23:30 UTC
    # "tomorrow" held the window's slots, struck as excluded, not blacked out).
    ExclusionDate.objects.create(calendar=calendar, date=(now + timedelta(days=2)).date())
    s.exclusion_calendars.add(calendar)
    html = admin_client.get(reverse(TIMELINE)).content.decode()
    assert "not run, blackout window deploys" in html
    assert '<g class="dds-tl-tick dds-tl-struck">' in html


@pytest.mark.vendor_independent  # links in the pages' HTML
@pytest.mark.django_db
def test_links_from_the_list_and_the_change_page(admin_client):
    s = make("linked")
    timeline = reverse(TIMELINE)
    changelist = admin_client.get(reverse("admin:durable_schedules_schedule_changelist"))
    assert f'<a href="{timeline}" class="dds-timeline-link">Timeline</a>' in changelist.text
    change = admin_client.get(reverse("admin:durable_schedules_schedule_change", args=[s.pk]))
    assert f'href="{timeline}?schedule={s.pk}" class="dds-timeline-link"' in change.text
    make("other")
    alone = admin_client.get(f"{timeline}?schedule={s.pk}").text
    assert 'data-schedule="linked"' in alone and 'data-schedule="other"' not in alone


@pytest.mark.django_db
@pytest.mark.parametrize(
    "query",
    ["range=1y", "start=nope&end=2027-01-01", "start=2027-06-02&end=2027-06-01",
     "label=%3Ax", "status=sleepy", "schedule=42", "p=abc", "owner=" + "x" * 300,
     "start=2027-06-01T00:00:00%2B99:00&end=2027-06-02"],
)  # fmt: skip
@pytest.mark.vendor_independent  # query-string validation message
def test_a_bad_parameter_is_a_message_never_an_error_page(admin_client, query):
    make("any")
    response = admin_client.get(f"{reverse(TIMELINE)}?{query}")
    assert response.status_code == 200
    errors = [m for m in response.context["messages"] if m.level_tag == "error"]
    assert len(errors) == 1
    assert 'data-schedule="any"' in response.text  # the page is still drawn


@pytest.mark.django_db
def test_filters_status_callback_owner_group_and_label(admin_client):
    owner = User.objects.create_user("ann")
    group = ConcurrencyGroup.objects.create(name="reports", max_running=1)
    make("a.match", metadata={"team": "data"}, owner=owner, concurrency_group=group)
    make("b.other", metadata={"team": "web"}, callback="tests.echo")
    url = reverse(TIMELINE)

    def shown(query: str) -> set[str]:
        return set(re.findall(r'data-schedule="([^"]+)"', admin_client.get(f"{url}?{query}").text))

    assert shown("") == {"a.match", "b.other"}
    assert shown("label=team:data") == {"a.match"}
    assert shown("callback=tests.echo") == {"b.other"}
    assert shown("owner=ann") == {"a.match"}
    assert shown("group=reports") == {"a.match"}
    assert shown("status=paused") == set()
    assert shown("status=active&label=team:web") == {"b.other"}


@pytest.mark.vendor_independent  # Django's permission check
@pytest.mark.django_db
def test_view_permission_is_required(client):
    user = User.objects.create_user("staff", password="pw", is_staff=True)
    client.force_login(user)
    assert client.get(reverse(TIMELINE)).status_code == 403
    user.user_permissions.add(Permission.objects.get(codename="view_schedule"))
    assert client.get(reverse(TIMELINE)).status_code == 200


@pytest.mark.django_db
def test_a_fixed_number_of_queries_whatever_the_rows_and_runs(
    admin_client, django_assert_max_num_queries
):
    window = BlackoutWindow.objects.create(
        name="w", start_at=timezone.now() + timedelta(hours=1),
        end_at=timezone.now() + timedelta(hours=2),
    )  # fmt: skip
    calendar = ExclusionCalendar.objects.create(name="c")
    ExclusionDate.objects.create(calendar=calendar, date=timezone.now().date())
    for i in range(ROWS_PER_PAGE + 5):
        s = make(f"s-{i:03d}", interval_seconds=300)
        s.blackout_windows.add(window)
        s.exclusion_calendars.add(calendar)
        if i < 3:  # a busy one: more runs than a row draws
            history(
                s, [("succeeded", "scheduled", 1)] * (BARS_PER_ROW + 20), every=timedelta(minutes=5)
            )
        else:
            history(s, [("failed", "scheduled", 1), ("succeeded", "rerun", 1)])
    # Runs in flight on some rows: read by the schedules' query, no query of their own.
    # (Their occurrence counters past the seeded history's numbers.)
    busy = list(Schedule.objects.order_by("name")[3:8])
    Schedule.objects.filter(pk__in=[b.pk for b in busy]).update(occurrence=100)
    claim(busy)
    with django_assert_max_num_queries(10):
        response = admin_client.get(f"{reverse(TIMELINE)}?range=7d")
    html = response.text
    assert html.count('class="dds-tl-row"') == ROWS_PER_PAGE
    # A busy row's runs, 5 minutes apart on a 7-day axis (14 minutes a pixel), hide one
    # another: only the bars of which a pixel shows are drawn, the rest counted as more.
    busy_bars, rest = divmod(html.count('class="dds-tl-link"') - (ROWS_PER_PAGE - 3) * 2, 3)
    assert rest == 0 and 0 < busy_bars < BARS_PER_ROW
    assert html.count('class="dds-tl-link dds-tl-running-link"') == 5
    assert f'<span class="dds-tl-more">{BARS_PER_ROW + 20 - busy_bars} more</span>' in html
    assert 'rel="next"' in html
    second = admin_client.get(
        response.context["next_url"] and f"{reverse(TIMELINE)}{response.context['next_url']}"
    )
    assert second.text.count('class="dds-tl-row"') == 5 and 'rel="prev"' in second.text


@pytest.mark.django_db
def test_the_reads_bound_the_bars_and_count_every_run():
    s, t = make("busy"), make("quiet")
    history(s, [("succeeded", "scheduled", 1)] * 30 + [("failed", "scheduled", 1)] * 5,
            every=timedelta(minutes=10))  # fmt: skip
    history(t, [("succeeded", "scheduled", 1)])
    now = timezone.now()
    start, end = now - timedelta(days=1), now
    runs = timeline_runs([s.pk, t.pk], start, end, per_row=10)
    busy = [r for r in runs if r.schedule_id == s.pk]
    assert len(busy) == 10 and sum(r.status == "failed" for r in busy) == 5  # the newest
    assert {r.origin for r in runs} == {"scheduled"} and all(r.claimed_at for r in runs)
    counts = bucket_counts([s.pk, t.pk], start, end, 3600)
    assert sum(n for (pk, _), (n, _) in counts.items() if pk == s.pk) == 35
    assert sum(f for (pk, _), (_, f) in counts.items() if pk == s.pk) == 5
    assert sum(n for (pk, _), (n, _) in counts.items() if pk == t.pk) == 1
    # The bucket of each run is the hour of the range it finished in.
    last = max(b for (pk, b) in counts if pk == s.pk)
    assert last == 23
    assert timeline_runs([], start, end, 10) == [] and bucket_counts([], start, end, 60) == {}


@pytest.mark.django_db
def test_the_runs_per_bucket_come_back_in_the_rows_order_and_past_the_last_bucket_in_it():
    s, t, idle = make("busy"), make("quiet"), make("idle")
    history(s, [("succeeded", "scheduled", 1)] * 9 + [("failed", "scheduled", 1)] * 3,
            every=timedelta(minutes=10))  # fmt: skip
    history(t, [("lease_expired", "scheduled", 1)])
    now = timezone.now()
    start, end = now - timedelta(hours=3), now + timedelta(minutes=1)
    rows = row_counts([idle.pk, t.pk, s.pk], start, end, 3600, 2)  # 3 h in 2 buckets
    assert [len(r) for r in rows] == [2, 2, 2] and rows[0] == [(0, 0), (0, 0)]
    assert sum(n for n, _ in rows[1]) == 1 and sum(f for _, f in rows[1]) == 1
    # The last hour's runs (and the half hour past the buckets) count in the last bucket.
    assert sum(n for n, _ in rows[2]) == 12 and rows[2][1][1] == 3
    assert rows[2][0] == (0, 0)  # nothing finished in the first hour
    assert row_counts([], start, end, 60, 4) == []
    with pytest.raises(ValueError):
        row_counts([s.pk], start, end, 60, 0)


@pytest.mark.django_db
def test_several_labels_stay_apart_in_the_form(admin_client):
    make("both", metadata={"team": "data", "tier": "1"})
    make("one", metadata={"team": "data"})
    html = admin_client.get(f"{reverse(TIMELINE)}?label=team:data&label=tier:1").text
    assert re.findall(r'data-schedule="([^"]+)"', html) == ["both"]
    assert '<input type="text" name="label" value="team:data"' in html
    assert '<input type="text" name="label" value="tier:1"' in html
