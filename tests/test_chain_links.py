"""Chaining's links as the faces write them (issue #30 item 1): ``upstream`` (names) and
``wait_seconds`` on the API, the admin's form and the state functions, each refusal a field
message, the ``created``/``edited`` events naming the upstreams, ``downstream`` on the
answers, ``schedules show``; an API-made three-step chain run by ``claim_due``/``complete``."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.test.utils import override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from django_durable_schedules import state
from django_durable_schedules.models import Schedule, ScheduleEvent, ScheduleLink
from django_durable_schedules.registry import register, registry
from django_durable_schedules.state import Outcome

from .factories import T0
from .test_admin import _form_data

pytestmark = pytest.mark.django_db

S = timedelta(seconds=1)
H = timedelta(hours=1)
LIST = "/api/schedules/"
NEEDS = "a schedule of kind 'after' needs at least one upstream schedule"
ONLY_AFTER = "only a schedule of kind 'after' runs after others"


@pytest.fixture
def api(django_user_model):
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("staff", is_staff=True))
    return client


def detail(name: str) -> str:
    return f"{LIST}{Schedule.objects.get(name=name).pk}/"


def hourly(api, name: str, **fields):
    body = {
        "name": name,
        "callback": "tests.noop",
        "kind": "interval",
        "interval_seconds": 3600,
        "start_at": T0.isoformat(),
        **fields,
    }
    response = api.post(LIST, body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def after(api, name: str, upstream, status: int = 201, **fields):
    body = {"name": name, "callback": "tests.noop", "kind": "after", "upstream": upstream}
    response = api.post(LIST, {**body, **fields}, format="json")
    assert response.status_code == status, response.content
    return response.json()


def patch(api, name: str, status: int = 200, **fields):
    response = api.patch(detail(name), fields, format="json")
    assert response.status_code == status, response.content
    return response.json()


def links() -> set[tuple[str, str]]:
    return {
        (link.downstream.name, link.upstream.name)
        for link in ScheduleLink.objects.select_related("downstream", "upstream")
    }


# -- the API -------------------------------------------------------------------------------


def test_an_api_made_three_step_chain_runs_each_step_after_the_one_before(api):
    hourly(api, "import")
    answer = after(api, "aggregate", ["import"], wait_seconds=600)
    assert answer["upstream"] == ["import"] and answer["wait_seconds"] == 600
    after(api, "mail", ["aggregate"])
    assert links() == {("aggregate", "import"), ("mail", "aggregate")}
    seen = []
    for step in range(3):
        claims = state.claim_due(worker="w", now=T0 + 2 * step * S)
        state.complete([Outcome(c, "succeeded") for c in claims], now=T0 + (2 * step + 1) * S)
        seen += [(c.schedule_name, c.scheduled_for) for c in claims]
    assert seen == [("import", T0), ("aggregate", T0), ("mail", T0)]


def test_the_answers_list_the_edges_from_both_ends(api):
    hourly(api, "a")
    hourly(api, "b")
    after(api, "c", ["b", "a"])
    after(api, "d", ["c"])
    c = api.get(detail("c")).json()
    assert c["upstream"] == ["a", "b"] and c["downstream"] == ["d"]
    assert api.get(detail("a")).json()["downstream"] == ["c"]
    rows = {r["name"]: r for r in api.get(LIST).json()["results"]}
    assert rows["c"]["upstream"] == ["a", "b"] and rows["c"]["downstream"] == ["d"]
    assert rows["a"]["upstream"] == [] and rows["d"]["downstream"] == []


def test_each_refusal_is_a_field_message(api):
    hourly(api, "a")
    hourly(api, "two-hourly", interval_seconds=7200)
    api.post(LIST, {"name": "m", "callback": "tests.noop", "kind": "manual"}, format="json")
    assert after(api, "x", [], 400) == {"upstream": [NEEDS]}
    assert after(api, "x", ["nope"], 400) == {"upstream": ["Object with name=nope does not exist."]}
    assert after(api, "x", ["m"], 400)["upstream"][0].startswith("'m' is a manual schedule")
    grids = after(api, "x", ["a", "two-hourly"], 400)["upstream"]
    assert grids == [
        "the upstream schedules are on different grids (their nominal instants differ): "
        "'a', 'two-hourly'"
    ]
    body = {"name": "y", "callback": "tests.noop", "kind": "interval", "interval_seconds": 60}
    answer = api.post(LIST, {**body, "upstream": ["a"]}, format="json")
    assert answer.status_code == 400 and answer.json() == {"upstream": [ONLY_AFTER]}
    assert after(api, "x", ["a"], 400, wait_seconds=0) == {"wait_seconds": ["At least 1 second."]}
    too_long = after(api, "x", ["a"], 400, wait_seconds=31 * 86400 + 1)
    assert too_long == {"wait_seconds": ["At most 2678400 seconds (31 days)."]}
    after(api, "b", ["a"])
    assert patch(api, "b", 400, upstream=["b"]) == {
        "upstream": ["a schedule cannot run after itself"]
    }
    assert patch(api, "b", 400, upstream=[]) == {"upstream": [NEEDS]}
    assert not Schedule.objects.filter(name="x").exists() and links() == {("b", "a")}


def test_a_cycle_through_two_edits_is_refused(api):
    hourly(api, "a")
    after(api, "b", ["a"])
    after(api, "c", ["b"])
    patch(api, "b", upstream=["a", "c"], status=400)
    answer = patch(api, "b", 400, upstream=["c"])
    assert answer == {"upstream": ["a cycle: 'c' already runs after 'b'"]}
    assert links() == {("b", "a"), ("c", "b")}


def test_an_upstream_whose_grid_would_part_from_its_siblings_is_refused(api):
    hourly(api, "a")
    hourly(api, "e")
    after(api, "b", ["a"])
    after(api, "c", ["b", "e"])
    answer = patch(api, "a", 400, interval_seconds=60)
    assert answer == {
        "interval_seconds": [
            "'c' runs after this schedule: the upstream schedules are on different grids "
            "(their nominal instants differ): 'b', 'e'"
        ]
    }
    assert patch(api, "a", 400, kind="manual", interval_seconds=None, start_at=None)["kind"]
    # alone on its grid, a downstream follows its upstream to the new one
    patch(api, "c", upstream=["b"])
    assert patch(api, "a", interval_seconds=60)["interval_seconds"] == 60


def test_a_kind_changed_away_from_after_must_drop_its_upstreams(api):
    hourly(api, "a")
    after(api, "b", ["a"])
    answer = patch(api, "b", 400, kind="interval", interval_seconds=60)
    assert answer == {"upstream": [ONLY_AFTER + ": remove its upstream schedules"]}
    patch(api, "b", kind="interval", interval_seconds=60, upstream=[])
    assert links() == set()


def test_the_events_record_the_upstreams_by_sorted_name(api):
    hourly(api, "a")
    hourly(api, "z")
    after(api, "b", ["z", "a"])
    created = ScheduleEvent.objects.get(schedule__name="b", action="created")
    assert created.changes["upstream"] == [None, ["a", "z"]]
    patch(api, "b", upstream=["a"], wait_seconds=60)
    edited = ScheduleEvent.objects.get(schedule__name="b", action="edited")
    assert edited.changes["upstream"] == [["a", "z"], ["a"]]
    assert edited.changes["wait_seconds"] == [3600, 60]
    patch(api, "b", upstream=["a"])  # unchanged: no event
    assert ScheduleEvent.objects.filter(schedule__name="b", action="edited").count() == 1


@pytest.mark.vendor_independent  # the OpenAPI document
def test_the_schema_describes_the_chain_fields():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    fields = schema["components"]["schemas"]["Schedule"]["properties"]
    assert fields["upstream"]["type"] == "array"
    assert fields["downstream"]["readOnly"] is True
    assert fields["wait_seconds"]["maximum"] == 31 * 86400


# -- owner-scoped users ---------------------------------------------------------------------

CALLBACK = "tests.scoped_chain"


@pytest.fixture
def scoped(django_user_model):
    register(CALLBACK, lambda ctx: None, owner_scoped=True, owner_min_interval=60)
    users = {n: django_user_model.objects.create_user(n) for n in ("alice", "bob")}
    for who, user in users.items():
        state.create_schedule(
            name=f"{who}-hourly",
            callback=CALLBACK,
            kind="interval",
            interval_seconds=3600,
            start_at=T0,
            owner=user,
        )
    clients = {}
    for who, user in users.items():
        clients[who] = APIClient()
        clients[who].force_authenticate(user)
    with override_settings(DURABLE_SCHEDULES={"API_OWNER_SCOPED": True}):
        yield clients
    registry.remove(CALLBACK)


def test_an_owner_scoped_user_names_and_sees_only_their_own_schedules(scoped):
    alice = scoped["alice"]
    body = {"name": "alice-after", "callback": CALLBACK, "kind": "after"}
    other = alice.post(LIST, {**body, "upstream": ["bob-hourly"]}, format="json")
    unknown = alice.post(LIST, {**body, "upstream": ["no-such"]}, format="json")
    assert other.status_code == unknown.status_code == 400
    assert other.json()["upstream"] == ["Object with name=bob-hourly does not exist."]
    made = alice.post(LIST, {**body, "upstream": ["alice-hourly"]}, format="json")
    assert made.status_code == 201 and made.json()["upstream"] == ["alice-hourly"]
    # a full-access user links bob's schedule after alice's: alice never sees it named
    state.create_schedule(
        name="bob-after", callback=CALLBACK, kind="after", upstream=["alice-hourly"]
    )
    assert alice.get(detail("alice-hourly")).json()["downstream"] == ["alice-after"]
    state.update_schedule(
        Schedule.objects.get(name="alice-after").pk, upstream=["alice-hourly", "bob-hourly"]
    )
    assert alice.get(detail("alice-after")).json()["upstream"] == ["alice-hourly"]
    listed = {r["name"]: r for r in alice.get(LIST).json()["results"]}
    assert listed["alice-after"]["upstream"] == ["alice-hourly"]
    # writing the list keeps what she cannot see
    alice.patch(detail("alice-after"), {"upstream": ["alice-hourly"]}, format="json")
    assert ("alice-after", "bob-hourly") in links()
    # nor do her schedule's events name it
    events = alice.get(detail("alice-after") + "events/").json()
    edited = next(e for e in events if e["action"] == "edited")
    assert edited["changes"]["upstream"] == [["alice-hourly"], ["alice-hourly"]]


# -- the state functions ----------------------------------------------------------------------


def test_code_gives_upstreams_by_row_and_a_duplicate_runs_after_the_same():
    a = state.create_schedule(
        name="a", callback="tests.noop", kind="interval", interval_seconds=60, start_at=T0
    )
    b = state.create_schedule(name="b", callback="tests.noop", kind="after", upstream=[a])
    copy = state.duplicate_schedule(b.pk, "b-copy")
    assert [u.name for u in copy.upstream.all()] == ["a"]
    with pytest.raises(ValidationError) as refused:
        state.create_schedule(name="c", callback="tests.noop", kind="after")
    assert refused.value.message_dict == {"upstream": [NEEDS]}


# -- the admin --------------------------------------------------------------------------------

ADD = "admin:durable_schedules_schedule_add"
CHANGE = "admin:durable_schedules_schedule_change"


def test_the_admin_adds_an_after_schedule_and_shows_its_links(admin_client):
    a = state.create_schedule(
        name="a", callback="tests.noop", kind="interval", interval_seconds=60, start_at=T0
    )
    data = _form_data(name="b", kind="after", cron="", timezone="", upstream=[str(a.pk)])
    response = admin_client.post(reverse(ADD), {**data, "wait_seconds": "120"})
    assert response.status_code == 302, response.context["adminform"].form.errors
    b = Schedule.objects.get(name="b")
    assert b.wait_seconds == 120 and [u.name for u in b.upstream.all()] == ["a"]
    page = admin_client.get(reverse(CHANGE, args=[b.pk])).content.decode()
    assert 'Runs after: <a href="' + reverse(CHANGE, args=[a.pk]) + '">a</a>' in page
    assert 'data-kind-hides="' in page and "wait_seconds" in page
    upstream_page = admin_client.get(reverse(CHANGE, args=[a.pk])).content.decode()
    assert 'Before: <a href="' + reverse(CHANGE, args=[b.pk]) + '">b</a>' in upstream_page
    # the change form starts from its links: an unrelated edit keeps them
    edit = _form_data(name="b", kind="after", cron="", timezone="", upstream=[str(a.pk)])
    response = admin_client.post(reverse(CHANGE, args=[b.pk]), {**edit, "wait_seconds": "60"})
    assert response.status_code == 302
    assert links() == {("b", "a")}


def test_the_admin_form_shows_a_refused_link_on_its_field(admin_client):
    data = _form_data(name="b", kind="after", cron="", timezone="")
    response = admin_client.post(reverse(ADD), data)
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["upstream"] == [NEEDS]
    assert not Schedule.objects.filter(name="b").exists()


def test_an_interval_schedule_posted_without_wait_seconds_keeps_its_default(admin_client):
    response = admin_client.post(reverse(ADD), _form_data(name="plain"))
    assert response.status_code == 302
    assert Schedule.objects.get(name="plain").wait_seconds == 3600


# -- the command --------------------------------------------------------------------------------


def test_show_prints_the_links_and_wait_seconds():
    state.create_schedule(
        name="a", callback="tests.noop", kind="interval", interval_seconds=60, start_at=T0
    )
    state.create_schedule(
        name="b", callback="tests.noop", kind="after", upstream=["a"], wait_seconds=90
    )
    out = StringIO()
    call_command("schedules", "show", "b", stdout=out)
    assert "  runs after: a (wait_seconds=90:" in out.getvalue()
    out = StringIO()
    call_command("schedules", "show", "a", stdout=out)
    assert "  before: b" in out.getvalue() and "runs after" not in out.getvalue()


def test_a_schedule_others_run_after_is_not_deleted_until_unlinked(api):
    hourly(api, "a")
    after(api, "b", ["a"])
    refused = api.delete(detail("a"))
    assert refused.status_code == 409
    assert refused.json() == {"detail": "b runs after it: remove it from their upstream first"}
    assert Schedule.objects.filter(name="a").exists()
    assert api.delete(detail("b")).status_code == 204  # a downstream goes with its links
    assert api.delete(detail("a")).status_code == 204


def test_a_restored_version_restores_its_upstreams():
    for name in ("a", "e"):
        state.create_schedule(
            name=name, callback="tests.noop", kind="interval", interval_seconds=60, start_at=T0
        )
    b = state.create_schedule(name="b", callback="tests.noop", kind="after", upstream=["a"])
    state.update_schedule(b.pk, upstream=["e"])
    first = state.definition_versions(b)[-1]
    state.restore_definition(b.pk, first.event_id)
    assert [u.name for u in b.upstream.all()] == ["a"]


def test_a_declaration_that_would_part_a_downstreams_grids_is_not_synced(caplog):
    from django_durable_schedules import register

    register("t.chained", lambda ctx: None, cron="0 * * * *", timezone="UTC")
    try:
        state.sync_declared()
        state.create_schedule(
            name="e", callback="tests.noop", kind="cron", cron="0 * * * *", timezone="UTC"
        )
        state.create_schedule(
            name="c", callback="tests.noop", kind="after", upstream=["t.chained", "e"]
        )
        register("t.chained", lambda ctx: None, cron="30 * * * *", timezone="UTC")
        state.sync_declared()
        assert Schedule.objects.get(name="t.chained").cron == "0 * * * *"
        assert "the schedule declared in code for 't.chained' was not synced" in caplog.text
        state.update_schedule(Schedule.objects.get(name="c").pk, upstream=["t.chained"])
        state.sync_declared()  # alone on its grid now: c follows it
        assert Schedule.objects.get(name="t.chained").cron == "30 * * * *"
    finally:
        registry.remove("t.chained")
