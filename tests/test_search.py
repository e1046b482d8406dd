"""Schedule search (issue #29, item 5): the admin's search box finds a case-insensitive
fragment of a schedule's name or callback ("nightly" found nothing when search was a
case-sensitive prefix of the name); on PostgreSQL the fragment is served by migration
0026's trigram indexes, not a read of the whole table."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from django_durable_schedules.models import Schedule

from .factories import due_schedules

pytestmark = pytest.mark.django_db(transaction=True)
CHANGELIST = "admin:durable_schedules_schedule_changelist"


def make_rows():
    due_schedules(
        [
            {"name": "reports.Nightly-export"},
            {"name": "billing-NIGHTLY"},
            {"name": "hourly-sync", "callback": "tests.echo"},
            {"name": "ab-cleanup"},
            {"name": "xab"},
        ]
    )


def found(term):
    return sorted(Schedule.objects.search(term).values_list("name", flat=True))


def test_a_fragment_of_the_name_or_callback_is_found_whatever_its_case():
    make_rows()
    assert found("nightly") == ["billing-NIGHTLY", "reports.Nightly-export"]
    assert found("  NiGhTlY ") == ["billing-NIGHTLY", "reports.Nightly-export"]
    assert found("ECHO") == ["hourly-sync"]  # the callback tests.echo
    assert found("tests.noop") == ["ab-cleanup", "billing-NIGHTLY", "reports.Nightly-export", "xab"]
    assert found("AB") == ["ab-cleanup"]  # two characters: the start of a name only
    assert found("") == found("   ") == sorted(Schedule.objects.values_list("name", flat=True))
    assert found("no-such") == []
    # ^: the start of the name, as typed (an index range on every database)
    assert found("^billing") == ["billing-NIGHTLY"] and found("^Billing") == []


def test_the_admin_search_box_uses_it(admin_client):
    make_rows()
    response = admin_client.get(reverse(CHANGELIST) + "?q=nightly")
    assert response.status_code == 200
    names = sorted(s.name for s in response.context["cl"].result_list)
    assert names == ["billing-NIGHTLY", "reports.Nightly-export"]


def test_a_name_search_takes_as_many_queries_for_two_matches_as_for_forty(admin_client):
    make_rows()
    url = reverse(CHANGELIST) + "?q=nightly"

    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert admin_client.get(url).status_code == 200
        return len(ctx.captured_queries)

    two = queries()
    due_schedules([{"name": f"nightly-{i:02d}"} for i in range(38)])
    forty = queries()
    assert forty == two, (two, forty)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="trigram indexes: PostgreSQL")
def test_on_postgresql_a_fragment_is_an_index_search():
    make_rows()
    sql, params = Schedule.objects.search("nightly").order_by().query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'dds_sched_%%_trgm'")
        assert sorted(r[0] for r in cursor.fetchall()) == [
            "dds_sched_callback_trgm",
            "dds_sched_name_trgm",
        ]
        cursor.execute("SET enable_seqscan = off")  # a 5-row table: ask whether it can
        try:
            cursor.execute("EXPLAIN " + sql, params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("SET enable_seqscan = on")
    assert "dds_sched_name_trgm" in plan and "dds_sched_callback_trgm" in plan, plan
