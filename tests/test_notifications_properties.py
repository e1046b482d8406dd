"""Property tests (Hypothesis) of the notifications' totality: any ``NOTIFIERS`` entry is
either a valid notifier or a list of problems (never an exception), and any notification
becomes a bounded, signed JSON body that reads back to what was built."""

from __future__ import annotations

import hashlib
import hmac
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from django_durable_schedules.models import EventAction
from django_durable_schedules.notify.base import (
    DETAIL_MAX_BYTES,
    TIMEOUT_MAX,
    TIMEOUT_MIN,
    Notification,
    bounded_detail,
    chat_body,
    signature,
    timeout_of,
    webhook_body,
)
from django_durable_schedules.notify.config import parse_entry

BACKENDS = st.sampled_from(
    [
        "django_durable_schedules.notify.WebhookNotifier",
        "django_durable_schedules.notify.ChatWebhookNotifier",
        "django_durable_schedules.notify.MailNotifier",
        "django_durable_schedules.notify.Notifier",
        "json.dumps",
        "no.such.Module",
        "",
    ]
)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
OPTIONS = st.dictionaries(
    st.sampled_from(
        ["url", "secret", "timeout", "headers", "to", "from_email", "subject_prefix", "x"]
    ),
    VALUES
    | st.sampled_from(["http://127.0.0.1:9/x", "https://h.example/", "ftp://x"])
    | st.lists(st.sampled_from(["a@b.c", "nope"]), max_size=3),
    max_size=5,
)
ENTRIES = (
    st.fixed_dictionaries(
        {},
        optional={
            "BACKEND": BACKENDS | VALUES,
            "OPTIONS": OPTIONS | VALUES,
            "EVENTS": st.lists(
                st.sampled_from(["failing", "recovered", "edited", "nope"]), max_size=3
            )
            | VALUES,
            "OTHER": VALUES,
        },
    )
    | VALUES
)


@settings(max_examples=300, deadline=None)
@given(name=st.text(max_size=12) | SCALARS, entry=ENTRIES)
def test_any_entry_is_a_notifier_or_problems_never_an_exception(name, entry):
    config, problems = parse_entry(name, entry)
    assert (config is None) == bool(problems)
    assert all(isinstance(p, str) for p in problems)
    if config is not None:
        notifier = config.build()  # a valid entry always builds
        assert TIMEOUT_MIN <= notifier.timeout <= TIMEOUT_MAX
        assert config.events <= set(EventAction.values)


@given(options=st.dictionaries(st.sampled_from(["timeout", "x"]), VALUES))
def test_a_timeout_is_always_bounded(options):
    assert TIMEOUT_MIN <= timeout_of(options) <= TIMEOUT_MAX


NOTIFICATIONS = st.builds(
    Notification,
    event=st.sampled_from(["deadline_missed", "failing", "degraded", "paused", "recovered"]),
    schedule=st.text(min_size=1, max_size=128),
    occurrence=st.none() | st.integers(min_value=0, max_value=2**31),
    at=st.datetimes().map(lambda d: d.isoformat() + "Z"),
    detail=VALUES.map(bounded_detail),
)


@settings(max_examples=200, deadline=None)
@given(n=NOTIFICATIONS, secret=st.text(min_size=1, max_size=40))
def test_a_body_reads_back_and_its_signature_verifies(n, secret):
    body = webhook_body(n)
    assert json.loads(body) == json.loads(json.dumps(n.as_json()))
    assert set(json.loads(body)) == {"event", "schedule", "occurrence", "at", "detail"}
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(signature(secret, body), f"sha256={expected}")
    text = json.loads(chat_body(n))["text"]
    assert n.schedule in text


@settings(max_examples=200, deadline=None)
@given(value=VALUES | st.dictionaries(st.text(), st.text(min_size=500, max_size=2000), max_size=20))
def test_a_detail_is_always_a_small_json_object(value):
    detail = bounded_detail(value)
    assert isinstance(detail, dict)
    assert len(json.dumps(detail).encode()) <= DETAIL_MAX_BYTES
