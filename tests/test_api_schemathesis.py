"""Schemathesis against the API's own OpenAPI schema (issue #4).

Every operation of the drf-spectacular schema gets generated requests (valid and invalid),
sent as a staff user through Django's WSGI handler in-process, and every answer must be no
5xx (the health endpoint's documented 503 aside) and conform to the schema: a documented
status code, a documented content type, a body that validates. Hypothesis runs
derandomized (the same cases every run) with a bounded number of examples per operation.

Path ids are drawn from rows seeded before each operation (a schedule of each kind, one
with an open attempt, an attempt with a receipt) as well as generated, so the detail
endpoints are exercised on real rows, not only 404s.
"""

from __future__ import annotations

import copy
import functools
import itertools

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import force_authenticate
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from django_durable_schedules import state
from django_durable_schedules.models import Schedule

from .conftest import server_examples
from .factories import ReceiptFactory, ScheduleFactory

#: Generated cases per operation and generation mode (valid / invalid input): 17
#: operations x 2 modes x at most this many = a few hundred requests in all.
MAX_EXAMPLES = 12

#: On PostgreSQL and MariaDB, the cases of an operation that :data:`MUST_SEE` does not name
#: (``conftest.server_examples``): the answers are the API's rules and serialisation, the
#: same on every vendor; the generated values a server refuses (NUL, dates out of range) are
#: values of short lists that a few cases meet, as in the other ``server_examples``
#: properties. The full count runs on SQLite, and for the MUST_SEE operations everywhere
#: (fewer cases may not reach the statuses they must answer).
SERVER_EXAMPLES = server_examples(MAX_EXAMPLES, server=6)

#: Valid definitions sent (with a fresh name) in place of some generated bodies of
#: ``POST``/``PUT``, whose cross-field rules random bodies almost never satisfy: so the
#: 201/200 answers are checked against the schema too.
VALID_BODIES = [
    {"callback": "tests.noop", "kind": "interval", "interval_seconds": 60},
    {"callback": "tests.echo", "kind": "cron", "cron": "30 2 * * *", "timezone": "Europe/Paris"},
    {"callback": "tests.noop", "kind": "once", "run_in_seconds": 60, "payload": {"a": [1]}},
]


def documented_server_errors_only(ctx, response, case):
    """``not_a_server_error``, except for a 5xx the operation documents (the health
    endpoint's 503 when unhealthy), whose body the other checks still validate."""
    raw = case.operation.definition.raw
    if str(response.status_code) in raw.get("responses", {}):
        return None
    return not_a_server_error(ctx, response, case)


#: Statuses an operation must have answered at least once (positive mode), so the test
#: fails if the generation stops reaching them.
MUST_SEE = {
    "GET /api/health/": {200, 503},
    "POST /api/schedules/": {201, 400},
    "GET /api/schedules/{id}/": {200, 404},
    "DELETE /api/schedules/{id}/": {204, 404},
}

CHECKS = [
    documented_server_errors_only,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def api_schema() -> dict:
    """The OpenAPI document drf-spectacular builds for ``tests.urls`` (the API under
    ``/api/``), as the example project serves it at ``/api/schema/``: a fresh copy of the
    one built once per run (building it takes ~0.3 s, once per test it cost ~30 s a
    database; no test here changes the settings or URLs it is built from)."""
    return copy.deepcopy(_built_schema())


@functools.cache
def _built_schema() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)


def operation_labels() -> list[str]:
    """``METHOD /path`` of every operation in the schema."""
    paths = api_schema()["paths"]
    methods = ("get", "put", "post", "delete", "patch")
    return [f"{m.upper()} {p}" for p, item in paths.items() for m in item if m in methods]


class StaffWSGIHandler(WSGIHandler):
    """Django's WSGI application with every request authenticated as ``user`` (DRF's
    force-authentication: no session, no CSRF token needed)."""

    def __init__(self, user) -> None:
        super().__init__()
        self.user = user

    def get_response(self, request):
        force_authenticate(request, self.user)
        return super().get_response(request)


@pytest.fixture
def wsgi_app(django_user_model):
    """A WSGI app speaking as a staff user, inside the test's transaction.

    Django closes "old" connections at the start and end of every request, which would
    close the connection holding the test transaction; the test client disconnects those
    receivers for the same reason, and so does this fixture while it is in use.
    """
    staff = django_user_model.objects.create_user("schemathesis", is_staff=True)
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield StaffWSGIHandler(staff)
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def known_ids():
    """Rows for path ids: a schedule of each kind, one leased (an open attempt), and an
    attempt that has a receipt, with a live worker. Returns their ids as strings."""
    interval = ScheduleFactory()
    cron = ScheduleFactory(cron_job=True)
    once = ScheduleFactory(once=True, name="once")
    leased = ScheduleFactory(name="leased")
    state.trigger(leased.pk)
    state.claim_due(worker="schemathesis")
    state.heartbeat("schemathesis")  # a live worker: due schedules alone are no 503
    receipt = ReceiptFactory()
    return [
        str(pk)
        for pk in (
            interval.pk,
            cron.pk,
            once.pk,
            leased.pk,
            receipt.pk,
            receipt.attempt_id,
            receipt.schedule_id,
        )
    ]


@pytest.mark.parametrize("label", operation_labels())
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_operation_conforms(label, mode, db, wsgi_app, known_ids):
    schema = schemathesis.openapi.from_dict(api_schema())
    method, path = label.split(" ", 1)
    operation = schema[path][method]
    strategy = operation.as_strategy(generation_mode=mode)
    id_choice = st.sampled_from([None, *known_ids])
    body_choice = st.sampled_from([None, *VALID_BODIES])
    names = itertools.count()
    seen: set[int] = set()

    @settings(
        max_examples=MAX_EXAMPLES if label in MUST_SEE else SERVER_EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy, known_id=id_choice, body=body_choice, degraded=st.booleans())
    def check(case, known_id, body, degraded):
        if known_id is not None and case.path_parameters and "id" in case.path_parameters:
            case.path_parameters["id"] = known_id
        if body is not None and mode == GenerationMode.POSITIVE and method in ("POST", "PUT"):
            if case.operation.body:  # not the body-less actions (enable, trigger, ...)
                case.body = {**body, "name": f"generated-{next(names)}"}
                case.media_type = "application/json"
        # A degraded schedule makes the health endpoint answer its documented 503.
        Schedule.objects.filter(pk=known_ids[0]).update(
            degraded_reason="schemathesis" if degraded else ""
        )
        response = case.call(app=wsgi_app)
        seen.add(response.status_code)
        case.validate_response(response, checks=CHECKS)

    check()
    if mode == GenerationMode.POSITIVE:
        assert MUST_SEE.get(label, set()) <= seen, f"{label} answered only {sorted(seen)}"


def test_health_documents_its_503():
    """``health/`` answers 503 when unhealthy: the schema says so, with the same body."""
    responses = api_schema()["paths"]["/api/health/"]["get"]["responses"]
    body = {
        code: responses[code]["content"]["application/json"]["schema"] for code in ("200", "503")
    }
    assert body["503"] == body["200"] == {"$ref": "#/components/schemas/Health"}
