"""The compiled reads' row loading (``db/fast_orm.py``) changes no value: instants loaded
by psycopg's own loader on a UTC connection (PostgreSQL), the usual JSON texts (``{}``,
``[]``, ``null``) made without parsing, a statement's attribute names checked once. Each
result is the queryset's own, on every database."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import connection, transaction
from django.db.models import JSONField
from hypothesis import given
from hypothesis import strategies as st

from django_durable_schedules.db import fast_orm
from django_durable_schedules.models import Schedule

from .factories import ScheduleFactory

T0 = datetime(2027, 3, 28, 0, 59, 59, 123456, tzinfo=UTC)


def _read(key, build):
    fast_orm.clear()
    with transaction.atomic():
        return fast_orm.read_rows(Schedule, key, "default", build)


def _same_row(got, want):
    for field in Schedule._meta.concrete_fields:
        a, b = getattr(got, field.attname), getattr(want, field.attname)
        assert a == b, field.name
        if isinstance(b, datetime):  # the same zone object too: UTC, as Django loads it
            assert a.tzinfo is b.tzinfo is UTC, field.name


@pytest.mark.django_db(transaction=True)
def test_instants_and_json_read_are_the_querysets_own():
    made = [
        ScheduleFactory(payload={}, extra_specs=[], start_at=T0, end_at=T0 + timedelta(days=3)),
        ScheduleFactory(payload={"n": [1, "two", None]}, start_at=T0 - timedelta(days=400)),
    ]
    Schedule.objects.filter(pk=made[0].pk).update(
        previous_result=None,
        trigger_payload={},
        last_run_at=T0,
        lease_token=uuid.uuid4(),
        lease_expires_at=T0,
    )

    def build():
        return Schedule.objects.filter(pk__in=[r.pk for r in made]).order_by("name")

    got = _read("reads", build)
    want = list(build())
    assert [r.pk for r in got] == [r.pk for r in want]
    for a, b in zip(got, want, strict=True):
        _same_row(a, b)


@pytest.mark.django_db(transaction=True)
def test_rows_read_with_the_same_json_text_do_not_share_a_value():
    rows = [ScheduleFactory(payload={}, extra_specs=[]) for _ in range(2)]
    first, second = _read("shared", lambda: Schedule.objects.filter(pk__in=[r.pk for r in rows]))
    first.payload["mine"] = 1
    first.extra_specs.append("mine")
    assert second.payload == {} and second.extra_specs == []


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL session's zone")
@pytest.mark.django_db(transaction=True)
def test_a_session_in_another_zone_reads_as_django_reads():
    # Django's loader then decides (as for the queryset): the shortcut needs UTC on both
    # sides, and here the session's TimeZone is not.
    row = ScheduleFactory(start_at=T0)
    build = lambda: Schedule.objects.filter(pk=row.pk)  # noqa: E731
    fast_orm.clear()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL TIME ZONE 'Europe/Paris'")
        [got] = fast_orm.read_rows(Schedule, "paris", "default", build)
        [want] = list(build())
    assert got.start_at == want.start_at and got.start_at.tzinfo is want.start_at.tzinfo


class _Cursor:
    """A Django cursor wrapper's shape: the driver's cursor as ``.cursor``."""

    class _Adapters:
        def __init__(self):
            self.loaders = []

        def register_loader(self, name, loader):
            self.loaders.append((name, loader))

    def __init__(self, zone: str):
        self.cursor = type("Raw", (), {})()
        self.cursor.adapters = self._Adapters()
        info = type("Info", (), {"parameter_status": lambda _, name: zone})()
        self.cursor.connection = type("Conn", (), {"info": info})()


@pytest.mark.parametrize(
    ("django_zone", "session_zone", "changed"),
    [(UTC, "UTC", True), (ZoneInfo("Europe/Paris"), "UTC", False), (UTC, "Europe/Paris", False)],
)
def test_psycopgs_loader_is_taken_only_with_utc_on_both_sides(django_zone, session_zone, changed):
    pytest.importorskip("psycopg")
    cursor = _Cursor(session_zone)
    conn = type("Django", (), {"timezone": django_zone})()
    fast_orm.native_timestamps(cursor, conn)
    assert bool(cursor.cursor.adapters.loaders) is changed


def test_psycopg_2_cursors_are_left_alone():
    conn = type("Django", (), {"timezone": UTC})()
    fast_orm.native_timestamps(object(), conn)  # no ``.cursor.adapters``: nothing to do


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(st.one_of(_JSON.map(json.dumps), st.sampled_from(["{}", "[]", "null", "{ }", "nul"])))
def test_the_json_shortcut_converts_as_djangos_converter(text):
    field = Schedule._meta.get_field("payload")
    [quick] = fast_orm._quick((field.from_db_value,))
    want = field.from_db_value(text, None, connection)
    assert quick(text, None, connection) == want
    assert quick(None, None, connection) is None


def test_a_json_field_with_its_own_decoder_keeps_djangos_converter():
    class Decoder(json.JSONDecoder):
        pass

    field = JSONField(decoder=Decoder)
    convs = (field.from_db_value,)
    assert fast_orm._quick(convs) is convs
    other = (str, int)
    assert fast_orm._quick(other) is other


def test_a_statements_attribute_names_are_checked_once_and_the_check_is_bounded(monkeypatch):
    monkeypatch.setattr(fast_orm, "MAX_STATEMENTS", 2)
    fast_orm._CHECKED.clear()
    names = tuple(f.attname for f in Schedule._meta.concrete_fields[:5])
    assert fast_orm._loaded_names(Schedule, names)
    assert fast_orm._CHECKED[(Schedule, id(names))] is names
    assert not fast_orm._loaded_names(Schedule, ("id", "not_a_field"))
    for _ in range(3):
        assert fast_orm._loaded_names(Schedule, tuple(list(names)))
    assert len(fast_orm._CHECKED) <= 2
    assert fast_orm._loaded_names(Schedule, list(names))  # a list: checked each time
