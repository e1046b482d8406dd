"""Statistics per schedule (issue #29, item 2): success rate, duration p50/p95/max and
lateness p50/p95 over the last 24 h and 7 d, from receipts, with a fixed number of queries;
on the API (``schedules/{id}/stats/``), the change page and ``schedules show``."""

from __future__ import annotations

import json
import statistics
import uuid
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.test.utils import override_settings
from django.urls import reverse
from hypothesis import given
from hypothesis import strategies as st
from rest_framework.test import APIClient

from django_durable_schedules.db.clock import db_now
from django_durable_schedules.stats import STATS_SAMPLE, schedule_stats
from django_durable_schedules.stats_math import percentile, success_rate, window_stats

from .factories import AttemptFactory, ReceiptFactory, ScheduleFactory

NOW = datetime(2027, 6, 8, 12, 0, tzinfo=UTC)
H = timedelta(hours=1)
S = timedelta(seconds=1)

finite = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False)


# -- the pure arithmetic ------------------------------------------------------------------


@given(st.lists(finite, min_size=1, max_size=60), st.floats(min_value=0, max_value=1))
def test_a_percentile_lies_between_the_smallest_and_the_largest(values, q):
    p = percentile(values, q)
    assert p is not None and min(values) <= p <= max(values)


@given(st.lists(finite, min_size=1, max_size=60), st.floats(0, 1), st.floats(0, 1))
def test_percentiles_grow_with_q_and_ignore_order(values, q1, q2):
    low, high = sorted((q1, q2))
    assert percentile(values, low) <= percentile(values, high)
    assert percentile(list(reversed(values)), q1) == percentile(values, q1)
    assert percentile(values, 0) == min(values) and percentile(values, 1) == max(values)


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=2, max_size=60))
def test_percentiles_are_percentile_cont(values):
    # statistics.quantiles' "inclusive" method is the same linear interpolation.
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    for q, cut in ((0.5, cuts[49]), (0.95, cuts[94])):
        assert percentile(values, q) == pytest.approx(cut, rel=1e-9, abs=1e-6)


def test_percentile_examples_and_errors():
    assert percentile([], 0.5) is None
    assert percentile([4.0], 0.95) == 4.0
    assert percentile([1, 2, 3, 4], 0.5) == 2.5
    assert percentile(range(1, 101), 0.95) == pytest.approx(95.05)
    with pytest.raises(ValueError):
        percentile([1.0], 1.5)
    for bad in (float("inf"), float("nan")):
        with pytest.raises(ValueError):
            percentile([1.0, bad, 2.0], 0.5)


@given(st.integers(0, 10**9), st.integers(0, 10**9))
def test_a_success_rate_is_a_fraction_or_none(a, b):
    succeeded, runs = sorted((a, b))
    rate = success_rate(succeeded, runs)
    assert (rate is None) == (runs == 0)
    assert rate is None or 0 <= rate <= 1
    with pytest.raises(ValueError):
        success_rate(runs + 1, runs)


@given(
    st.dictionaries(
        st.sampled_from(["succeeded", "enqueued", "failed", "skipped", "released", "missed"]),
        st.integers(0, 1000),
    ),
    st.lists(finite, max_size=30),
)
def test_a_window_counts_every_outcome_but_released_as_a_run(outcomes, durations):
    w = window_stats(86400, outcomes, None, durations, durations)
    assert w.runs == sum(n for s, n in outcomes.items() if s != "released")
    assert w.succeeded == outcomes.get("succeeded", 0) + outcomes.get("enqueued", 0)
    assert w.success_rate is None or 0 <= w.success_rate <= 1
    for value in (w.duration_p50, w.duration_p95, w.duration_max, w.lateness_p95):
        assert value is None or value >= 0  # a negative duration (clock estimates) reads 0
    if durations:
        assert w.duration_p50 <= w.duration_p95 <= w.duration_max


# -- on real rows -------------------------------------------------------------------------


def receipt(schedule, status, finished, took=None, late=0.0, origin="scheduled"):
    """A receipt finished at ``finished`` after ``took`` seconds (None: never ran), its
    attempt claimed ``late`` seconds after its slot."""
    claimed = finished - timedelta(seconds=(took or 0) + 1)
    attempt = AttemptFactory(
        schedule=schedule,
        scheduled_for=claimed - timedelta(seconds=late),
        claimed_at=claimed,
        lease_expires_at=claimed + timedelta(minutes=5),
        origin=origin,
    )
    return ReceiptFactory(
        attempt=attempt,
        status=status,
        finished_at=finished,
        started_at=None if took is None else finished - timedelta(seconds=took),
    )


db = pytest.mark.django_db


@db
def test_windows_count_rates_durations_and_lateness(django_assert_max_num_queries):
    s = ScheduleFactory()
    other = ScheduleFactory()
    receipt(s, "succeeded", NOW - H, took=2, late=1)
    receipt(s, "succeeded", NOW - 2 * H, took=4, late=3)
    receipt(s, "failed", NOW - 3 * H, took=10, late=5)
    receipt(s, "missed", NOW - 4 * H)  # a run, no duration, no lateness
    receipt(s, "released", NOW - 5 * H)  # no run
    receipt(s, "succeeded", NOW - 48 * H, took=100, late=50)  # the 7 d window only
    receipt(s, "succeeded", NOW - 49 * H, took=1, late=3600, origin="backfill")
    receipt(s, "succeeded", NOW - 8 * 24 * H, took=999)  # older than both windows
    receipt(s, "succeeded", NOW + H, took=999)  # after now: in neither
    receipt(other, "failed", NOW - H, took=50, late=50)  # another schedule's

    with django_assert_max_num_queries(2):
        stats = schedule_stats(s.pk, now=NOW)
    day, week = stats.windows["last_24h"], stats.windows["last_7d"]
    assert (day.runs, day.succeeded, day.success_rate) == (4, 2, 0.5)
    assert day.outcomes == {"failed": 1, "missed": 1, "released": 1, "succeeded": 2}
    assert (day.duration_p50, day.duration_max) == (4.0, 10.0)
    assert day.duration_p95 == pytest.approx(9.4)
    assert (day.lateness_p50, day.lateness_counted) == (3.0, 3)
    assert (week.runs, week.succeeded, week.duration_max) == (6, 4, 100.0)
    assert week.durations_counted == 5
    assert week.lateness_counted == 4  # the backfill's slot is in the past on purpose
    assert week.lateness_p95 == pytest.approx(43.25)  # of 1, 3, 5, 50
    assert stats.as_of == NOW and stats.sample_limit == STATS_SAMPLE


@db
def test_no_receipts_and_an_unknown_schedule_have_no_figures():
    for pk in (ScheduleFactory().pk, uuid.uuid4()):
        day = schedule_stats(pk, now=NOW).windows["last_24h"]
        assert (day.runs, day.success_rate, day.duration_p50, day.lateness_p95) == (
            0,
            None,
            None,
            None,
        )


@db
def test_percentiles_read_the_latest_receipts_only_and_the_queries_stay_fixed(
    django_assert_num_queries,
):
    s = ScheduleFactory()
    for i in range(30):  # durations 30, 29, ..., 1 s, newest first: 1 s is the newest
        receipt(s, "succeeded", NOW - (i + 1) * timedelta(minutes=1), took=i + 1)
    with django_assert_num_queries(2):
        few = schedule_stats(s.pk, now=NOW, sample=5)
    day = few.windows["last_24h"]
    assert day.durations_counted == 5 and day.duration_p50 == 3.0  # of 1..5
    assert (day.runs, day.duration_max) == (30, 30.0)  # counts and max stay exact
    for i in range(30, 300):
        receipt(s, "failed", NOW - (i + 1) * timedelta(minutes=1), took=1)
    with django_assert_num_queries(2):
        many = schedule_stats(s.pk, now=NOW)
    assert many.windows["last_24h"].runs == 300
    with django_assert_num_queries(3):  # the database clock, then the same two
        schedule_stats(s.pk)


# -- the surfaces ---------------------------------------------------------------------------


def recent_history(schedule):
    now = db_now()
    receipt(schedule, "succeeded", now - 10 * S, took=2, late=1)
    receipt(schedule, "failed", now - 20 * S, took=6, late=3)
    receipt(schedule, "succeeded", now - 3 * 24 * H, took=20, late=7)


def stats_url(pk):
    return reverse("durable_schedules_api:schedule-stats", args=[pk])


@db
def test_api_answers_both_windows_and_404s(django_user_model, django_assert_max_num_queries):
    s = ScheduleFactory()
    recent_history(s)
    api = APIClient()
    api.force_authenticate(django_user_model.objects.create_user("staff", is_staff=True))
    with django_assert_max_num_queries(6):
        response = api.get(stats_url(s.pk))
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"as_of", "sample_limit", "last_24h", "last_7d"}
    day, week = body["last_24h"], body["last_7d"]
    assert day["window_seconds"] == 86400 and week["window_seconds"] == 7 * 86400
    assert (day["runs"], day["succeeded"], day["success_rate"]) == (2, 1, 0.5)
    assert day["duration_max"] == pytest.approx(6.0)
    assert day["lateness_p50"] == pytest.approx(2.0)
    assert day["outcomes"] == {"failed": 1, "succeeded": 1}
    assert (week["runs"], week["duration_max"]) == (3, pytest.approx(20.0))
    assert api.get(stats_url(uuid.uuid4())).status_code == 404
    assert api.get(stats_url("not-an-id")).status_code == 404


@db
def test_api_stats_follow_the_schedules_permissions(django_user_model):
    alice = django_user_model.objects.create_user("alice")
    bob = django_user_model.objects.create_user("bob")
    mine = ScheduleFactory(owner=alice)
    theirs = ScheduleFactory(owner=bob)
    api = APIClient()
    api.force_authenticate(alice)
    assert api.get(stats_url(mine.pk)).status_code == 403  # staff only by default
    with override_settings(DURABLE_SCHEDULES={"API_OWNER_SCOPED": True}):
        assert api.get(stats_url(mine.pk)).status_code == 200
        assert api.get(stats_url(theirs.pk)).status_code == 404
    assert APIClient().get(stats_url(mine.pk)).status_code in (401, 403)


@db
def test_the_schema_documents_the_stats_endpoint():
    out = StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", "--format=openapi-json", stdout=out)
    schema = json.loads(out.getvalue())
    (path,) = [p for p in schema["paths"] if p.endswith("/stats/")]
    ok = schema["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]
    name = ok["schema"]["$ref"].rsplit("/", 1)[1]
    fields = schema["components"]["schemas"][name]["properties"]
    assert {"as_of", "sample_limit", "last_24h", "last_7d"} <= set(fields)
    assert "404" in schema["paths"][path]["get"]["responses"]


@db
def test_schedules_show_prints_the_statistics():
    s = ScheduleFactory(name="nightly")
    recent_history(s)
    out = StringIO()
    call_command("schedules", "show", "nightly", stdout=out)
    lines = out.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("statistics"))
    assert f"latest {STATS_SAMPLE} receipts" in lines[start]
    table = lines[start + 1 : start + 9]
    assert table[0].split() == ["last", "24", "h", "last", "7", "d"]
    assert table[1].split() == ["runs", "2", "3"]
    assert table[2].split() == ["success", "rate", "50.0", "%", "66.7", "%"]
    assert table[5].split() == ["duration", "max", "6.000", "s", "20.0", "s"]
    assert table[6].split()[:2] == ["lateness", "p50"]


@db
def test_the_change_page_shows_the_statistics(admin_client):
    s = ScheduleFactory()
    recent_history(s)
    url = reverse("admin:durable_schedules_schedule_change", args=[s.pk])
    html = admin_client.get(url).content.decode()
    assert "Last 24 h" in html and "Last 7 d" in html
    assert '<tr data-dds-stat="success rate"><th scope="row">Success rate</th>' in html
    assert "<td>50.0 %</td><td>66.7 %</td>" in html
    assert '<tr data-dds-stat="duration max"><th scope="row">Duration max</th>' in html
    assert "<td>6.000 s</td><td>20.0 s</td>" in html
    assert f"latest {STATS_SAMPLE} receipts" in html
