"""Labels (issue #29 item 4): ``metadata`` keys and values as a filter, through the
queryset, the API (``?label=``), the admin's "label" filter and ``schedules list --label``,
on real rows (run on SQLite, PostgreSQL and MariaDB)."""

from __future__ import annotations

from io import StringIO
from urllib.parse import urlencode

import django
import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import connection
from django.urls import reverse
from hypothesis import given
from hypothesis import strategies as st
from rest_framework.test import APIClient

from django_durable_schedules.admin import filters
from django_durable_schedules.limits import METADATA_MAX_VALUE_CHARS
from django_durable_schedules.models import Schedule
from django_durable_schedules.models.labels import (
    LABEL_MAX_COUNT,
    LABEL_MAX_KEY_CHARS,
    ObjectKey,
    parse_label,
    parse_labels,
    typed_values,
)

from .factories import ScheduleFactory

#: Django 6.1 lets a key transform say its JSON path; before it, SQLite and MariaDB read a
#: key of digits as an array index (docs/api.md).
DIGIT_KEYS_ARE_OBJECT_KEYS = django.VERSION >= (6, 1) or connection.vendor == "postgresql"

ROWS = {
    "etl": {"team": "data", "tier": "gold"},
    "report": {"team": "data", "tier": "silver"},
    "billing": {"team": "money", "tier": "gold"},
    "bare": {},
    "numbers": {"shard": 5, "ratio": 1.5, "on": True, "gone": None},
    "strings": {"shard": "5", "on": "true", "gone": "null"},
    "odd-keys": {"5": "five", "a.b": "dot", "sp ace": "x", "café": "crème", "url": "a:b"},
}


@pytest.fixture
def rows(db):
    for name, metadata in ROWS.items():
        ScheduleFactory(name=name, metadata=metadata)


def names(queryset):
    return sorted(queryset.values_list("name", flat=True))


# -- the parser ---------------------------------------------------------------------------


def test_parse_label_shapes():
    assert parse_label("team:data") == ("team", "data")
    assert parse_label("team") == ("team", None)
    assert parse_label("team:") == ("team", "")
    assert parse_label("url:https://x.test/a") == ("url", "https://x.test/a")


@pytest.mark.parametrize(
    "bad",
    [
        "",
        ":data",
        ":",
        "k" * (LABEL_MAX_KEY_CHARS + 1),
        "k:" + "v" * (METADATA_MAX_VALUE_CHARS + 1),
        "k:a\x00b",
        "k\ud800",
        'q"k:v',
        "back\\slash",
        "new\nline:v",
        5,
        None,
        b"team:data",
    ],
)
def test_parse_label_refuses(bad):
    with pytest.raises(ValidationError) as caught:
        parse_label(bad)
    assert caught.value.code == "invalid_label"


def test_parse_labels_is_bounded():
    assert len(parse_labels(["k"] * LABEL_MAX_COUNT)) == LABEL_MAX_COUNT
    with pytest.raises(ValidationError):
        parse_labels(["k"] * (LABEL_MAX_COUNT + 1))


def test_typed_values():
    assert typed_values("data") == ["data"]
    assert typed_values("5") == ["5", 5]
    assert typed_values("1.5") == ["1.5", 1.5]
    assert typed_values("true") == ["true", True]
    assert typed_values("null")[0] == "null" and len(typed_values("null")) == 2
    assert typed_values("05") == ["05"]
    assert typed_values("1e999") == ["1e999"]  # infinite: text only
    assert typed_values(str(2**60)) == [str(2**60)]


@given(st.one_of(st.text(), st.binary(), st.integers(), st.none()))
def test_any_input_parses_or_is_a_validation_error(value):
    try:
        key, label_value = parse_label(value)
    except ValidationError as error:
        assert error.code == "invalid_label"
        return
    assert isinstance(value, str)
    assert key and ":" not in key and len(key) <= LABEL_MAX_KEY_CHARS
    assert not any(c in '"\\' or ord(c) < 0x20 for c in key)
    assert value == (key if label_value is None else f"{key}:{label_value}")
    typed_values(label_value or "")


@given(st.text(min_size=1, max_size=20).filter(lambda k: ":" not in k), st.text(max_size=20))
def test_key_value_round_trips(key, value):
    try:
        assert parse_label(f"{key}:{value}") == (key, value)
    except ValidationError:  # only for what no backend can compare or path can name
        assert (
            "\x00" in value
            or any(0xD800 <= ord(c) <= 0xDFFF for c in key + value)
            or any(c in '"\\' or ord(c) < 0x20 for c in key)
        )


# -- the queryset -------------------------------------------------------------------------


def test_with_labels_one_two_and_key_only(rows):
    objects = Schedule.objects
    assert names(objects.with_labels([("team", "data")])) == ["etl", "report"]
    assert names(objects.with_labels([("team", "data"), ("tier", "gold")])) == ["etl"]
    assert names(objects.with_labels([("tier", None)])) == ["billing", "etl", "report"]
    assert names(objects.with_labels([("team", "nobody")])) == []
    assert names(objects.with_labels([])) == sorted(ROWS)
    assert names(objects.with_labels([("team", "DATA")])) == []  # case-sensitive


def test_with_labels_chains_and_present_false(rows):
    chained = Schedule.objects.with_labels([("team", "data")]).with_labels([("tier", "gold")])
    assert names(chained) == ["etl"]
    absent = Schedule.objects.alias(_t=ObjectKey("tier", "metadata")).filter(_t__present=False)
    assert names(absent) == ["bare", "numbers", "odd-keys", "strings"]


def test_values_compare_as_text(rows):
    objects = Schedule.objects
    # a JSON number and the string that spells it both match
    assert names(objects.with_labels([("shard", "5")])) == ["numbers", "strings"]
    assert names(objects.with_labels([("ratio", "1.5")])) == ["numbers"]
    assert names(objects.with_labels([("on", "true")])) == ["numbers", "strings"]
    assert names(objects.with_labels([("on", "false")])) == []
    # JSON null compares as "null"
    assert names(objects.with_labels([("gone", "null")])) == ["numbers", "strings"]
    assert names(objects.with_labels([("gone", None)])) == ["numbers", "strings"]
    assert names(objects.with_labels([("shard", "05")])) == []


def test_only_an_object_has_keys(rows):
    """Metadata written behind ``save()`` as an array or a string holds no label."""
    ScheduleFactory(name="array", metadata={})
    ScheduleFactory(name="text", metadata={})
    Schedule.objects.filter(name="array").update(metadata=["tier", "team"])
    Schedule.objects.filter(name="text").update(metadata="tier")
    assert names(Schedule.objects.with_labels([("tier", None)])) == ["billing", "etl", "report"]
    assert names(Schedule.objects.with_labels([("0", None)])) == []


def test_odd_keys(rows):
    objects = Schedule.objects
    if DIGIT_KEYS_ARE_OBJECT_KEYS:
        assert names(objects.with_labels([("5", "five")])) == ["odd-keys"]  # no array index
        assert names(objects.with_labels([("5", None)])) == ["odd-keys"]
    assert names(objects.with_labels([("a.b", "dot")])) == ["odd-keys"]
    assert names(objects.with_labels([("sp ace", "x")])) == ["odd-keys"]
    assert names(objects.with_labels([("café", "crème")])) == ["odd-keys"]
    assert names(objects.with_labels([parse_label("url:a:b")])) == ["odd-keys"]
    assert names(objects.with_labels([("a", None)])) == []  # not a path into a.b


# -- the API ------------------------------------------------------------------------------


@pytest.fixture
def api(django_user_model):
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("staff", is_staff=True))
    return client


def api_names(api, *labels, status=200):
    query = urlencode([("label", label) for label in labels])
    response = api.get(reverse("durable_schedules_api:schedule-list") + "?" + query)
    assert response.status_code == status, response.content
    if status != 200:
        return response.json()
    body = response.json()
    results = body["results"] if isinstance(body, dict) else body
    return sorted(row["name"] for row in results)


def test_api_one_label(rows, api):
    assert api_names(api, "team:data") == ["etl", "report"]


def test_api_two_labels_all_must_match(rows, api):
    assert api_names(api, "team:data", "tier:gold") == ["etl"]
    assert api_names(api, "team:money", "tier:silver") == []


def test_api_key_only_and_types(rows, api):
    assert api_names(api, "tier") == ["billing", "etl", "report"]
    assert api_names(api, "shard:5") == ["numbers", "strings"]
    if DIGIT_KEYS_ARE_OBJECT_KEYS:
        assert api_names(api, "5:five") == ["odd-keys"]


@pytest.mark.parametrize(
    "bad",
    [":x", "", "k" * 101, "k:" + "v" * (METADATA_MAX_VALUE_CHARS + 1), "k:\x00"],
)
def test_api_bad_label_is_a_400_with_a_field_message(rows, api, bad):
    body = api_names(api, bad, status=400)
    assert "label" in body and body["label"]


def test_api_too_many_labels_is_a_400(rows, api):
    assert "label" in api_names(api, *["k"] * (LABEL_MAX_COUNT + 1), status=400)


# -- the admin ----------------------------------------------------------------------------


def changelist_names(admin_client, **query):
    response = admin_client.get(
        reverse("admin:durable_schedules_schedule_changelist"), query, follow=True
    )
    assert response.status_code == 200
    return response, sorted(s.name for s in response.context["cl"].result_list)


def test_admin_label_filter_narrows_the_changelist(rows, admin_client):
    response, shown = changelist_names(admin_client, label="team:data")
    assert shown == ["etl", "report"]
    _, shown = changelist_names(admin_client, label="tier")
    assert shown == ["billing", "etl", "report"]
    _, shown = changelist_names(admin_client)
    assert shown == sorted(ROWS)


def test_admin_label_filter_offers_present_labels(rows, admin_client):
    response, _ = changelist_names(admin_client)
    html = response.content.decode()
    assert "?label=team%3Adata" in html or "?label=team:data" in html
    assert "team = data" in html


def test_admin_typed_label_filters_when_none_is_offered(db, admin_client, monkeypatch):
    """The choices come from the first schedules by name; a label typed in the URL filters
    even when none of them has metadata (so nothing is offered)."""
    for n in range(3):
        ScheduleFactory(name=f"a-{n}")
    ScheduleFactory(name="z-last", metadata={"team": "data"})
    monkeypatch.setattr(filters, "LABEL_SAMPLE_ROWS", 2)
    response, shown = changelist_names(admin_client, label="team:data")
    assert shown == ["z-last"]
    assert "team = data" not in response.content.decode()


def test_admin_bad_label_is_the_admin_error_page_not_a_500(rows, admin_client):
    response = admin_client.get(
        reverse("admin:durable_schedules_schedule_changelist"), {"label": ":x"}
    )
    assert response.status_code == 302 and "e=1" in response["Location"]


# -- the CLI ------------------------------------------------------------------------------


def cli_names(*args):
    out = StringIO()
    call_command("schedules", "list", *args, stdout=out)
    return sorted(line.split()[0] for line in out.getvalue().splitlines()[1:])


def test_cli_list_label(rows):
    assert cli_names("--label", "team:data") == ["etl", "report"]
    assert cli_names("--label", "team:data", "--label", "tier:gold") == ["etl"]
    assert cli_names("--label", "tier") == ["billing", "etl", "report"]


def test_cli_bad_label_is_a_usage_error(rows):
    with pytest.raises(CommandError, match="label"):
        call_command("schedules", "list", "--label", ":x", stdout=StringIO())
