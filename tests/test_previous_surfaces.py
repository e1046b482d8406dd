"""The last success (``ctx.previous``) where an operator looks (issue #30, gap 3): the API's
schedule answers (a read-only ``previous`` object, null before the first success), the
admin's change page ("last success") and ``manage.py schedules show``; read from the row,
so no surface makes a query more for it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_durable_schedules import state
from django_durable_schedules.api.run_serializers import LIST_RESULT_MAX_BYTES
from django_durable_schedules.models import Schedule
from django_durable_schedules.projection import result_preview
from django_durable_schedules.worker.execution.runner import execute

from .factories import T0

pytestmark = pytest.mark.django_db(transaction=True)

M = timedelta(minutes=1)


def make(name: str = "prev", **kw) -> Schedule:
    kw.setdefault("callback", "tests.previous")
    s = Schedule(
        name=name,
        kind="interval",
        interval_seconds=60,
        timezone="Europe/Paris",
        created_at=T0,
        **kw,
    )
    s.full_clean()
    s.save()
    return s


def succeed_once(now: datetime) -> None:
    claims = state.claim_due(worker="w", now=now, lease_seconds=60)
    state.complete([execute(c) for c in claims], now=now + timedelta(seconds=7))


def note(row: Schedule, result) -> None:
    """A previous run written on the row as a completion writes it (behind save())."""
    Schedule.objects.filter(pk=row.pk).update(
        previous_occurrence=4,
        previous_scheduled_for=datetime(2026, 7, 1, 7, 0, tzinfo=UTC),
        previous_finished_at=datetime(2026, 7, 1, 7, 0, 9, tzinfo=UTC),
        previous_result=result,
    )


@pytest.mark.vendor_independent  # serialisation of the row's previous columns; the completion's SQL: test_previous_run
def test_the_api_gives_null_then_the_last_success(admin_client):
    row = make()
    url = f"/api/schedules/{row.pk}/"
    assert admin_client.get(url).json()["previous"] is None
    succeed_once(T0 + M)
    body = admin_client.get(url).json()
    attempt = row.attempts.get()
    assert body["previous"] == {
        "occurrence": attempt.occurrence,
        "scheduled_for": attempt.scheduled_for.isoformat().replace("+00:00", "Z"),
        "finished_at": attempt.receipt.finished_at.isoformat().replace("+00:00", "Z"),
        "result": attempt.receipt.result,
        "result_omitted": False,
    }
    assert body["previous"]["result"] == {"total": 1, "after": None, "since": None}
    listed = admin_client.get("/api/schedules/").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert rows[0]["previous"] == body["previous"]


@pytest.mark.vendor_independent  # a read-only serializer field
def test_previous_is_read_only_in_the_api(admin_client):
    row = make()
    note(row, {"n": 1})
    answer = admin_client.patch(
        f"/api/schedules/{row.pk}/",
        {"previous": None, "interval_seconds": 120},
        content_type="application/json",
    )
    assert answer.status_code in (200, 400), answer.content
    row.refresh_from_db()
    assert row.previous_occurrence == 4  # never written through the API


def test_a_bad_value_written_behind_save_shows_null_not_a_500(admin_client):
    row = make()
    note(row, {"n": 1})
    Schedule.objects.filter(pk=row.pk).update(previous_scheduled_for=None)
    answer = admin_client.get(f"/api/schedules/{row.pk}/")
    assert answer.status_code == 200 and answer.json()["previous"] is None


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_no_surface_makes_a_query_more_for_it(admin_client, django_assert_max_num_queries):
    row = make()
    other = make("other")
    note(other, {"rows": list(range(50))})
    detail = f"/api/schedules/{row.pk}/"
    change = reverse("admin:durable_schedules_schedule_change", args=[row.pk])
    for warm in (detail, "/api/schedules/", change):  # the per-process caches, filled
        admin_client.get(warm)
    before = {u: _queries(admin_client, u) for u in (detail, "/api/schedules/", change)}
    note(row, {"rows": list(range(50))})
    after = {u: _queries(admin_client, u) for u in (detail, "/api/schedules/", change)}
    assert after == before
    with django_assert_max_num_queries(before[detail]):
        admin_client.get(detail)


@pytest.mark.vendor_independent  # the change page's HTML
def test_the_admin_change_page_shows_it_cut(admin_client):
    row = make()
    change = reverse("admin:durable_schedules_schedule_change", args=[row.pk])
    page = admin_client.get(change).content.decode()
    assert "Last success (ctx.previous)" in page and "none yet: no run has succeeded" in page
    note(row, {"text": "x" * 5000, "tag": "<b>"})
    page = admin_client.get(change).content.decode()
    assert "occurrence #4" in page
    assert "2026-07-01 09:00:00 CEST" in page and "2026-07-01 07:00:00 UTC" in page
    assert "2026-07-01 09:00:09 CEST" in page
    assert "&lt;b&gt;" in page and "<b>" not in page.split("dds-previous")[1]  # escaped
    assert "x" * 600 not in page and "…" in page and 'title="cut to 500 characters"' in page


@pytest.mark.vendor_independent  # the command's text
def test_schedules_show_prints_it():
    row = make()
    out = StringIO()
    call_command("schedules", "show", "prev", stdout=out)
    assert "  last success (ctx.previous): none yet" in out.getvalue()
    note(row, {"text": "y" * 2000})
    out = StringIO()
    call_command("schedules", "show", "prev", stdout=out)
    text = out.getvalue()
    assert (
        "  last success (ctx.previous): #4 for the slot 2026-07-01 09:00:00 CEST · "
        "2026-07-01T07:00:00Z, finished 2026-07-01T07:00:09Z"
    ) in text, text
    [line] = [ln for ln in text.splitlines() if ln.startswith("    result")]
    assert line.startswith('    result (cut): {"text": "yyy') and len(line) < 520


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=40),
        lambda kids: st.lists(kids, max_size=5) | st.dictionaries(st.text(max_size=8), kids),
        max_leaves=30,
    ),
    limit=st.integers(1, 300),
)
@pytest.mark.vendor_independent  # a pure preview rule searched by Hypothesis
def test_the_preview_is_the_json_or_a_prefix_of_it(value, limit):
    """Property: the preview is the whole compact JSON when it fits, else a cut of at most
    ``limit`` characters ending in "…", a prefix of it; the flag says which."""
    text, cut = result_preview(value, limit)
    full = json.dumps(value, sort_keys=True, ensure_ascii=False)
    assert len(text) <= max(limit, len(full) if not cut else limit)
    if cut:
        assert text.endswith("…") and len(full) > limit
        assert full.startswith(text[:-1]) or "\ufffd" in text  # repaired characters aside
    else:
        assert text == full or "\ufffd" in text


@pytest.mark.vendor_independent  # the OpenAPI document
def test_the_openapi_schema_documents_previous():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator(patterns=None).get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    prop = components["Schedule"]["properties"]["previous"]
    assert prop["readOnly"] is True and prop.get("nullable") is True, prop
    [ref] = [v["$ref"] for v in prop.get("allOf", [prop]) if "$ref" in v]
    fields = components[ref.rsplit("/", 1)[1]]["properties"]
    assert set(fields) == {"occurrence", "scheduled_for", "finished_at", "result", "result_omitted"}
    assert "256 bytes" in fields["result"]["description"]
    assert "256 bytes" in fields["result_omitted"]["description"]
    assert "previous" not in components.get("PatchedSchedule", {}).get("required", [])


def test_a_list_leaves_a_large_result_out_and_the_detail_has_it(
    admin_client, django_assert_max_num_queries
):
    """A page of schedules carries each row's ``previous`` with its result only when its
    compact JSON is at most 256 bytes (else null, ``result_omitted`` true): 100 rows of
    8 KB results were ~800 KB. The schedule's own answer has the result whole; the list
    costs the same queries."""
    small, edge, large, nothing = make("small"), make("edge"), make("large"), make("nothing")
    note(small, {"rows": 120})
    note(edge, "e" * (LIST_RESULT_MAX_BYTES - 2))  # with its quotes: exactly the bound
    note(large, {"text": "x" * 7000})
    note(nothing, None)
    before = _queries(admin_client, "/api/schedules/")
    for _ in range(20):
        note(make(f"big-{_:02}"), {"text": "z" * 7000})
    with django_assert_max_num_queries(before):
        answer = admin_client.get("/api/schedules/?page_size=100")
    assert answer.status_code == 200
    rows = {r["name"]: r["previous"] for r in answer.json()["results"]}
    assert rows["small"]["result"] == {"rows": 120} and rows["small"]["result_omitted"] is False
    assert rows["edge"]["result"] == "e" * (LIST_RESULT_MAX_BYTES - 2)
    assert rows["edge"]["result_omitted"] is False
    assert rows["large"]["result"] is None and rows["large"]["result_omitted"] is True
    assert rows["nothing"]["result"] is None and rows["nothing"]["result_omitted"] is False
    assert rows["large"]["occurrence"] == 4
    assert rows["large"]["finished_at"] == "2026-07-01T07:00:09Z"
    assert len(answer.content) < 24 * 2000  # 24 rows, none carrying its 7 KB result
    detail = admin_client.get(f"/api/schedules/{large.pk}/").json()["previous"]
    assert detail["result"] == {"text": "x" * 7000} and detail["result_omitted"] is False
    assert {k: v for k, v in detail.items() if k not in ("result", "result_omitted")} == {
        k: v for k, v in rows["large"].items() if k not in ("result", "result_omitted")
    }
