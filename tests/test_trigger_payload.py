"""Run now with overrides (issue #27, item 3): ``state.trigger(payload=, note=,
ignore_blackout=)``, the claim's effective payload, ``register(payload_schema=...)``, the
API's trigger body, the CLI's ``--payload`` and the admin's "Run now…" page."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.core.management import CommandError, call_command
from django.test.utils import override_settings
from django.urls import reverse
from hypothesis import given, note
from hypothesis import strategies as st
from rest_framework.test import APIClient

from django_durable_schedules import register, state
from django_durable_schedules.exceptions import StateConflict
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule, ScheduleEvent
from django_durable_schedules.payloads import PAYLOAD_MAX_BYTES, payload_errors
from django_durable_schedules.registry import registry
from django_durable_schedules.worker.execution.runner import execute

from .factories import T0
from .test_totality_properties import JSON_VALUES, POISON_PROFILE, wipe
from .test_totality_worker_paths import write

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)


def make(name="s", **kw):
    kw.setdefault("callback", "tests.echo")
    kw.setdefault("kind", "interval")
    if kw["kind"] == "interval":
        kw.setdefault("interval_seconds", 3600)
    kw.setdefault("timezone", "UTC")
    kw.setdefault("created_at", T0)
    s = Schedule(name=name, **kw)
    s.full_clean()
    s.save()
    return s


def run_at(now):
    claims = state.claim_due(worker="w", now=now)
    state.complete([execute(c) for c in claims], now=now)
    return claims


def triggered_events(s):
    return list(ScheduleEvent.objects.filter(schedule_id=s.pk, action="triggered").order_by("at"))


# -- the state package ------------------------------------------------------------------


def test_the_override_is_merged_for_one_run_and_recorded_on_its_attempt():
    s = make(payload={"region": "eu", "limit": 5})
    run_at(T0)
    state.trigger(s.pk, now=T0 + 10 * S, payload={"limit": 1, "dry_run": True})
    s.refresh_from_db()
    assert s.trigger_payload == {"limit": 1, "dry_run": True}
    [claim] = run_at(T0 + 11 * S)
    effective = {"region": "eu", "limit": 1, "dry_run": True}
    assert claim.payload == effective and claim.origin == "triggered"
    attempt = RunAttempt.objects.get(pk=claim.attempt_id)
    assert attempt.payload == effective
    assert RunReceipt.objects.get(attempt=attempt).result == {
        "payload": effective,
        "occurrence": 2,
        "attempt": 1,
    }
    s.refresh_from_db()
    assert s.triggered_at is None  # no trigger pending; the override is the occurrence's
    assert s.payload == {"region": "eu", "limit": 5}  # the schedule's own is unchanged
    # The next slot of the grid runs the schedule's payload, and records none.
    [claim] = run_at(T0 + 3600 * S)
    assert claim.payload == {"region": "eu", "limit": 5}
    assert RunAttempt.objects.get(pk=claim.attempt_id).payload is None
    s.refresh_from_db()
    assert s.trigger_payload is None


def test_a_retry_of_a_triggered_occurrence_runs_with_its_override():
    """An override such as ``{"dry_run": true}`` holds for every attempt of the occurrence
    it started: a retry after a failure never does the real work by mistake."""
    s = make(callback="tests.first_attempt_fails", payload={"dry_run": False}, max_attempts=3)
    run_at(T0)  # occurrence 1, attempt 1 fails: a retry pending, then attempt 2 succeeds
    run_at(T0 + 600 * S)
    state.trigger(s.pk, now=T0 + 1000 * S, payload={"dry_run": True})
    [first] = run_at(T0 + 1001 * S)  # occurrence 2, attempt 1: fails
    assert first.payload == {"dry_run": True} and first.attempt == 1
    s.refresh_from_db()
    assert s.retry_scheduled_for is not None
    [retry] = run_at(T0 + 1100 * S)  # its retry: the same occurrence, the same override
    assert (retry.occurrence, retry.attempt) == (first.occurrence, 2)
    assert retry.payload == {"dry_run": True}
    assert RunAttempt.objects.get(pk=retry.attempt_id).payload == {"dry_run": True}
    assert RunReceipt.objects.get(attempt_id=retry.attempt_id).status == "succeeded"
    [grid] = run_at(T0 + 3600 * S)  # the grid's next occurrence: the schedule's payload
    assert grid.payload == {"dry_run": False} and grid.attempt == 1


def test_the_attempt_records_a_payload_only_when_it_differs():
    s = make(payload={"limit": 5})
    state.trigger(s.pk, now=T0, payload={"limit": 5})  # the same value: no difference
    [claim] = run_at(T0 + S)
    assert claim.payload == {"limit": 5}
    assert RunAttempt.objects.get(pk=claim.attempt_id).payload is None
    state.trigger(s.pk, now=T0 + 10 * S)  # no override at all
    [claim] = run_at(T0 + 11 * S)
    assert RunAttempt.objects.get(pk=claim.attempt_id).payload is None
    blank = make("blank")  # no payload: the override alone
    state.trigger(blank.pk, now=T0 + 20 * S, payload={"a": 1})
    [claim] = [c for c in run_at(T0 + 21 * S) if c.schedule_id == blank.pk]
    assert claim.payload == {"a": 1} == RunAttempt.objects.get(pk=claim.attempt_id).payload


def test_the_triggered_event_names_who_the_note_and_the_override(django_user_model):
    s = make(payload={"limit": 5})
    user = django_user_model.objects.create_user("ops")
    state.trigger(
        s.pk,
        now=T0,
        payload={"limit": 1},
        note="re-run for the audit",
        ignore_blackout=True,
        actor=user,
        source="api",
    )
    [event] = triggered_events(s)
    assert event.actor_id == user.pk and event.actor_repr == "ops" and event.source == "api"
    assert event.changes == {
        "note": "re-run for the audit",
        "payload": {"limit": 1},
        "ignore_blackout": True,
    }
    s.refresh_from_db()
    assert s.trigger_ignores_blackout is True
    run_at(T0 + S)
    s.refresh_from_db()
    # The blackout flag went with the trigger; the override stays the occurrence's.
    assert s.trigger_ignores_blackout is False and s.trigger_payload == {"limit": 1}
    plain = make("plain")
    state.trigger(plain.pk, now=T0)
    assert triggered_events(plain)[0].changes == {}


def test_a_second_trigger_while_one_is_pending():
    s = make()
    state.trigger(s.pk, now=T0, payload={"a": 1}, note="first")
    # The same override: a no-op (one run, one event), whatever the note.
    state.trigger(s.pk, now=T0 + S, payload={"a": 1}, note="again")
    assert len(triggered_events(s)) == 1
    with pytest.raises(StateConflict, match="a trigger is already pending"):
        state.trigger(s.pk, now=T0 + S, payload={"a": 2})
    with pytest.raises(StateConflict, match="a trigger is already pending"):
        state.trigger(s.pk, now=T0 + S)  # none is another override too
    with pytest.raises(StateConflict, match="a trigger is already pending"):
        state.trigger(s.pk, now=T0 + S, payload={"a": 1}, ignore_blackout=True)
    s.refresh_from_db()
    assert s.trigger_payload == {"a": 1} and s.triggered_at == T0
    [claim] = run_at(T0 + 2 * S)
    assert claim.payload == {"a": 1}
    # Claimed: a new trigger with another override is a new run.
    state.trigger(s.pk, now=T0 + 10 * S, payload={"a": 2})
    assert run_at(T0 + 11 * S)[0].payload == {"a": 2}

    plain = make("plain")
    state.trigger(plain.pk, now=T0)
    state.trigger(plain.pk, now=T0 + S)  # none after none: a no-op, as before
    state.trigger(plain.pk, now=T0 + S, payload={})  # an empty override is none
    assert len(triggered_events(plain)) == 1


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ([1, 2], "must be a JSON object"),
        ("x", "must be a JSON object"),
        ({"n": float("nan")}, "The override contains a non-finite number."),
        ({"s": "a\x00b"}, "The override contains a NUL character."),
        ({"big": "x" * PAYLOAD_MAX_BYTES}, "as JSON; at most"),
    ],
)
def test_an_override_the_payload_rules_refuse_is_a_validation_error(payload, message):
    s = make(payload={"keep": 1})
    with pytest.raises(ValidationError) as info:
        state.trigger(s.pk, now=T0, payload=payload)
    assert message in " ".join(info.value.message_dict["payload"])
    s.refresh_from_db()
    assert s.triggered_at is None and s.trigger_payload is None and not triggered_events(s)


def test_the_merged_payload_is_bounded_and_must_be_an_object():
    half = "x" * (PAYLOAD_MAX_BYTES // 2 + 10)
    s = make(payload={"a": half})
    with pytest.raises(ValidationError) as info:
        state.trigger(s.pk, now=T0, payload={"b": half})
    assert info.value.message_dict["payload"][0].startswith("The merged payload is ")
    listed = make("listed", payload=[1, 2])
    with pytest.raises(ValidationError, match="cannot be merged"):
        state.trigger(listed.pk, now=T0, payload={"a": 1})
    state.trigger(listed.pk, now=T0)  # without an override it runs as it is
    with pytest.raises(ValidationError) as info:
        state.trigger(make("noted").pk, now=T0, note="n" * 501, ignore_blackout="yes")
    assert set(info.value.message_dict) == {"note", "ignore_blackout"}


def test_the_callbacks_payload_schema_validates_the_merged_payload():
    s = make(callback="tests.report", payload={"region": "eu", "limit": 5})
    with pytest.raises(ValidationError) as info:
        state.trigger(s.pk, now=T0, payload={"limit": 0, "dry_run": "no"})
    assert info.value.message_dict["payload"] == [
        "$.dry_run: 'no' is not of type 'boolean'",
        "$.limit: 0 is less than the minimum of 1",
    ]
    state.trigger(s.pk, now=T0, payload={"limit": 2, "extra": [1]})  # staff: any key
    assert run_at(T0 + S)[0].payload == {"region": "eu", "limit": 2, "extra": [1]}


def test_owner_scoped_callers_override_only_the_declared_keys():
    s = make(callback="tests.report", payload={"region": "eu"})
    with pytest.raises(ValidationError, match="declares: extra, other"):
        state.trigger(
            s.pk, now=T0, payload={"other": 1, "extra": 2, "limit": 3}, declared_only=True
        )
    state.trigger(s.pk, now=T0, payload={"limit": 3}, declared_only=True)
    no_schema = make("no-schema", callback="tests.noop")
    with pytest.raises(ValidationError, match="declares: a"):
        state.trigger(no_schema.pk, now=T0, payload={"a": 1}, declared_only=True)
    state.trigger(no_schema.pk, now=T0, declared_only=True)  # no override: allowed


def test_a_pending_override_follows_triggered_at():
    """Disable keeps the pending trigger and its override (and enable too); cancel drops
    both; an edit behind save() that drops pending work drops it too."""
    s = make(payload={"a": 0})
    run_at(T0)
    state.trigger(s.pk, now=T0 + 10 * S, payload={"a": 1}, ignore_blackout=True)
    state.disable(s.pk)
    state.enable(s.pk, now=T0 + 11 * S)
    s.refresh_from_db()
    assert s.triggered_at == T0 + 10 * S
    assert (s.trigger_payload, s.trigger_ignores_blackout) == ({"a": 1}, True)
    assert run_at(T0 + 12 * S)[0].payload == {"a": 1}

    gone = make("cancelled")
    state.trigger(gone.pk, now=T0, payload={"a": 1}, ignore_blackout=True)
    state.cancel(gone.pk)
    gone.refresh_from_db()
    assert (gone.triggered_at, gone.trigger_payload, gone.trigger_ignores_blackout) == (
        None,
        None,
        False,
    )

    edited = make("edited")
    state.trigger(edited.pk, now=T0, payload={"a": 1})
    Schedule.objects.filter(pk=edited.pk).update(interval_seconds=7200)  # behind save()
    run_at(T0 + S)
    edited.refresh_from_db()
    assert edited.triggered_at is None and edited.trigger_payload is None

    broken = make("broken", kind="cron", interval_seconds=None, cron="*/5 * * * *")
    state.trigger(broken.pk, now=T0, payload={"a": 1})
    Schedule.objects.filter(pk=broken.pk).update(timezone="Mars/Olympus")  # unevaluable
    run_at(T0 + S)
    broken.refresh_from_db()
    assert broken.degraded_reason and broken.trigger_payload is None


@POISON_PROFILE  # what each database keeps of the JSON written behind save()
@given(override=st.one_of(JSON_VALUES, st.just({"big": "x" * PAYLOAD_MAX_BYTES})))
def test_an_override_written_behind_save_never_stops_the_claim(override):
    """Whatever ``trigger_payload`` holds (written behind ``save()``), the claim takes the
    trigger and the rest of the batch: a JSON object within the payload rules is merged,
    anything else is ignored (the schedule's payload runs) and a ``triggered`` event of
    the worker says why."""
    wipe()
    s = make("poisoned", payload={"keep": 1})
    innocent = make("innocent")
    state.trigger(s.pk, now=T0)
    if not write(Schedule, s.pk, "trigger_payload", override):
        return
    stored = Schedule.objects.get(pk=s.pk).trigger_payload
    note(f"stored: {stored!r}")
    claims = {c.schedule_id: c for c in run_at(T0 + S)}
    assert set(claims) == {s.pk, innocent.pk}
    merged_ok = isinstance(stored, dict) and not payload_errors({"keep": 1, **stored}, None)
    ignored = ScheduleEvent.objects.filter(
        schedule_id=s.pk, source="worker", action="triggered"
    ).first()
    if stored is None or merged_ok:
        assert claims[s.pk].payload == {"keep": 1, **(stored or {})}
        assert ignored is None
    else:
        assert claims[s.pk].payload == {"keep": 1}
        assert ignored is not None and ignored.changes["override_ignored"]
    s.refresh_from_db()
    assert s.triggered_at is None
    # A merged override stays the occurrence's (for its retries); an ignored one is gone.
    assert s.trigger_payload == (stored if merged_ok else None)


def test_an_override_that_is_a_json_string_is_ignored_by_the_claim():
    s = make(payload={"keep": 1})
    state.trigger(s.pk, now=T0)
    Schedule.objects.filter(pk=s.pk).update(trigger_payload="text")  # a JSON string
    [claim] = run_at(T0 + S)
    assert claim.payload == {"keep": 1}
    [event] = ScheduleEvent.objects.filter(schedule_id=s.pk, source="worker")
    assert event.changes == {
        "override_ignored": "the pending trigger's payload override is not a JSON object"
    }


# -- register(payload_schema=...) --------------------------------------------------------


@pytest.mark.vendor_independent  # registry argument checks
def test_a_bad_payload_schema_is_refused_at_register_time():
    with pytest.raises(ImproperlyConfigured, match=r"t\.schema.*at properties/n/type"):
        register("t.schema", lambda ctx: None, payload_schema={"properties": {"n": {"type": 5}}})
    with pytest.raises(TypeError, match="must be a JSON Schema"):
        register("t.schema", lambda ctx: None, payload_schema=["not", "a", "schema"])
    assert "t.schema" not in registry


@pytest.mark.vendor_independent  # a pure JSON Schema rule
def test_a_schema_that_cannot_be_applied_is_a_problem_not_an_error():
    from django_durable_schedules.payload_schemas import check_schema, schema_problems

    schema = check_schema("t.ref", {"$ref": "https://schemas.invalid/payload.json"})
    [problem] = schema_problems(schema, {"a": 1})
    assert problem.startswith("$: the callback's payload schema cannot be applied")


# -- the API ----------------------------------------------------------------------------


def trigger_url(s):
    return reverse("durable_schedules_api:schedule-trigger", args=[s.pk])


@pytest.fixture
def api(django_user_model):
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("staff", is_staff=True))
    return client


def test_api_trigger_with_a_body_and_the_attempt_shows_its_payload(api):
    s = make(callback="tests.report", payload={"region": "eu"})
    response = api.post(trigger_url(s), {"payload": {"limit": 2}, "note": "by hand"}, format="json")
    assert response.status_code == 200, response.content
    s.refresh_from_db()
    assert s.trigger_payload == {"limit": 2}
    assert triggered_events(s)[0].changes == {"note": "by hand", "payload": {"limit": 2}}
    assert api.post(trigger_url(s), {"payload": {"limit": 2}}, format="json").status_code == 200
    conflict = api.post(trigger_url(s), {"payload": {"limit": 3}}, format="json")
    assert conflict.status_code == 409
    assert conflict.json()["detail"].startswith("a trigger is already pending")
    run_at(T0 + S)
    attempts = api.get(reverse("durable_schedules_api:attempt-list")).json()["results"]
    assert attempts[0]["payload"] == {"region": "eu", "limit": 2}
    assert api.post(trigger_url(s)).status_code == 200  # no body: a plain trigger


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"payload": [1]}, "payload", "Must be a JSON object"),
        ({"payload": {"limit": "x"}}, "payload", "$.limit: 'x' is not of type 'integer'"),
        ({"note": "n" * 501}, "note", "Ensure this field has no more than 500 characters."),
        ({"ignore_blackout": "perhaps"}, "ignore_blackout", "Must be a valid boolean."),
    ],
)
def test_api_trigger_refuses_a_bad_body_with_field_messages(api, body, field, message):
    s = make(callback="tests.report")
    response = api.post(trigger_url(s), body, format="json")
    assert response.status_code == 400, response.content
    assert message in " ".join(response.json()[field])
    s.refresh_from_db()
    assert s.triggered_at is None


def test_api_owner_scoped_users_override_only_declared_keys(django_user_model):
    alice = django_user_model.objects.create_user("alice")
    client = APIClient()
    client.force_authenticate(alice)
    s = make(callback="tests.report", owner=alice, interval_seconds=3600)
    with override_settings(DURABLE_SCHEDULES={"API_OWNER_SCOPED": True}):
        refused = client.post(trigger_url(s), {"payload": {"secret": 1}}, format="json")
        assert refused.status_code == 400
        assert "declares: secret" in refused.json()["payload"][0]
        ok = client.post(trigger_url(s), {"payload": {"region": "us"}}, format="json")
        assert ok.status_code == 200, ok.content


# -- the CLI ----------------------------------------------------------------------------


def test_cli_trigger_with_a_payload_and_a_note():
    s = make(payload={"a": 0})
    out = StringIO()
    call_command("schedules", "trigger", "s", "--payload", '{"a": 1}', "--note", "cli", stdout=out)
    assert "triggered" in out.getvalue()
    s.refresh_from_db()
    assert s.trigger_payload == {"a": 1}
    assert triggered_events(s)[0].changes == {"note": "cli", "payload": {"a": 1}}
    with pytest.raises(CommandError, match="--payload is not JSON"):
        call_command("schedules", "trigger", "s", "--payload", "{a: 1}")
    with pytest.raises(CommandError, match="a trigger is already pending"):
        call_command("schedules", "trigger", "s", "--payload", '{"a": 2}')
    with pytest.raises(CommandError, match="must be a JSON object"):
        call_command("schedules", "trigger", make("t").name, "--payload", "[1]")


# -- the admin (its views; the browser test clicks them) --------------------------------


def run_now_url(s):
    return reverse("admin:durable_schedules_schedule_run_now", args=[s.pk])


def test_admin_run_now_form_of_a_schema_triggers_the_changed_values(admin_client):
    s = make(callback="tests.report", payload={"region": "eu", "limit": 5})
    change = reverse("admin:durable_schedules_schedule_change", args=[s.pk])
    assert run_now_url(s) in admin_client.get(change).content.decode()
    html = admin_client.get(run_now_url(s)).content.decode()
    assert 'name="payload_0" value="eu"' in html and 'name="payload_1" value="5"' in html
    response = admin_client.post(
        run_now_url(s),
        {"payload_0": "eu", "payload_1": "2", "note": "one more"},
        follow=True,
    )
    assert "Triggered 1 schedule: s" in response.content.decode()
    s.refresh_from_db()
    assert s.trigger_payload == {"limit": 2}
    assert triggered_events(s)[0].changes == {"note": "one more", "payload": {"limit": 2}}


def test_admin_run_now_json_form_and_its_errors(admin_client):
    s = make(payload={"a": 0})
    html = admin_client.get(run_now_url(s)).content.decode()
    assert "{}</textarea>" in html
    bad = admin_client.post(run_now_url(s), {"payload": "[1]"})
    assert bad.status_code == 200 and "Must be a JSON object" in bad.content.decode()
    huge = admin_client.post(
        run_now_url(s), {"payload": json.dumps({"b": "x" * PAYLOAD_MAX_BYTES})}
    )
    assert "as JSON; at most" in huge.content.decode()
    admin_client.post(run_now_url(s), {"payload": '{"a": 1}'})
    s.refresh_from_db()
    assert s.trigger_payload == {"a": 1}


# -- a real worker ----------------------------------------------------------------------


@pytest.mark.process
def test_a_real_worker_runs_the_override(start_worker):
    s = Schedule(
        name="by-hand",
        callback="tests.echo",
        kind="interval",
        interval_seconds=86400,
        timezone="UTC",
        payload={"region": "eu", "limit": 5},
        status="paused",
    )
    s.full_clean()
    s.save()
    state.trigger(s.pk, payload={"limit": 1}, note="process test")
    worker = start_worker("--once", "--worker-id", "trigger-payload")
    assert worker.wait(60) == 0, worker.output()
    receipt = RunReceipt.objects.get(schedule_id=s.pk)
    effective = {"region": "eu", "limit": 1}
    assert receipt.status == "succeeded" and receipt.result["payload"] == effective
    assert receipt.attempt.payload == effective and receipt.attempt.origin == "triggered"
