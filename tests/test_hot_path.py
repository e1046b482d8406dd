"""The per-run shortcuts of the worker's hot path (issue #14, goal 2) change no result:
fast random UUIDs, locking reads compiled once, specs validated once, a callback's ``None``
projected without a walk."""

from __future__ import annotations

import os
import pickle
import uuid
from datetime import UTC, datetime, timedelta, timezone
from unittest import mock

import pytest
from django.db import connection, transaction
from hypothesis import given
from hypothesis import strategies as st

from django_durable_schedules import state, timing
from django_durable_schedules.db import fast_orm
from django_durable_schedules.models import Schedule
from django_durable_schedules.projection import _project, project_result
from django_durable_schedules.timing import spec as spec_module
from django_durable_schedules.uuids import _fast_uuid4, uuid4

from .factories import ScheduleFactory

NOW = datetime(2027, 6, 1, 10, 0, 0, tzinfo=UTC)


# -- uuid4 ------------------------------------------------------------------------------


def test_uuid4_is_the_fast_maker_on_this_python():
    assert uuid4 is _fast_uuid4


def test_uuid4_makes_what_the_standard_library_makes():
    for _ in range(1000):
        made = uuid4()
        same = uuid.UUID(int=made.int)
        assert made == same and hash(made) == hash(same)
        assert str(made) == str(same) and made.hex == same.hex and made.bytes == same.bytes
        assert made.version == 4 and made.variant == uuid.RFC_4122
        assert pickle.loads(pickle.dumps(made)) == made
        assert made.is_safe == uuid.SafeUUID.unknown
        assert uuid.UUID(str(made)) == made


def test_uuid4_values_are_distinct():
    assert len({uuid4() for _ in range(20_000)}) == 20_000


@given(st.binary(min_size=16, max_size=16))
def test_the_version_and_variant_bits_are_those_of_the_standard_library(raw):
    with mock.patch.object(os, "urandom", lambda n: raw):
        made = _fast_uuid4()
    assert made == uuid.UUID(bytes=raw, version=4)


# -- specs validated once -------------------------------------------------------------------


def test_a_spec_equal_to_a_valid_one_is_not_checked_again(monkeypatch):
    spec_module._VALID_SPECS.clear()
    first = timing.Spec(kind="interval", interval_seconds=60, anchor=NOW)
    first.validate()
    calls = []
    monkeypatch.setattr(spec_module, "validate_timezone", lambda zone: calls.append(zone))
    timing.Spec(kind="interval", interval_seconds=60, anchor=NOW).validate()
    assert calls == []
    timing.Spec(kind="interval", interval_seconds=61, anchor=NOW).validate()
    assert calls == ["UTC"]


@pytest.mark.parametrize("bad", [60.0, True])
def test_a_spec_equal_to_a_valid_one_but_of_another_type_is_still_checked(bad):
    # 60 == 60.0 and 1 == True in Python, with equal hashes; only ints are valid intervals.
    spec_module._VALID_SPECS.clear()
    timing.Spec(kind="interval", interval_seconds=int(bad) or 60, anchor=NOW).validate()
    with pytest.raises(timing.InvalidSchedule):
        timing.Spec(kind="interval", interval_seconds=bad, anchor=NOW).validate()


def test_a_spec_with_an_unhashable_value_is_refused_as_before():
    with pytest.raises(timing.InvalidSchedule):
        timing.Spec(kind="interval", interval_seconds=60, anchor=NOW, cron=[]).validate()


def test_instants_outside_utc_are_not_remembered():
    from zoneinfo import ZoneInfo

    paris = ZoneInfo("Europe/Paris")
    first = datetime(2027, 10, 31, 2, 30, tzinfo=paris)  # the repeated hour: fold 0 and 1
    second = first.replace(fold=1)
    assert first == second and first.astimezone(UTC) != second.astimezone(UTC)
    spec_module._VALID_SPECS.clear()
    timing.Spec(kind="once", run_at=first, end_at=first).validate()
    assert not spec_module._VALID_SPECS
    with pytest.raises(timing.InvalidSchedule):  # run_at after end_at by an hour
        timing.Spec(kind="once", run_at=second, end_at=first).validate()


def test_an_invalid_spec_is_refused_every_time():
    bad = timing.Spec(kind="interval", interval_seconds=0, anchor=NOW)
    for _ in range(2):
        with pytest.raises(timing.InvalidSchedule):
            bad.validate()
    assert bad not in spec_module._VALID_SPECS


def test_the_valid_spec_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(spec_module, "_VALID_SPECS_MAX", 3)
    spec_module._VALID_SPECS.clear()
    for seconds in range(1, 8):
        timing.Spec(kind="interval", interval_seconds=seconds, anchor=NOW).validate()
        assert len(spec_module._VALID_SPECS) <= 3


# -- project_result(None) ----------------------------------------------------------------


def test_none_projects_as_the_walk_projects_it():
    for max_bytes in [*range(0, 300), 8192, 65536]:
        assert project_result(None, max_bytes) == _project(None, max_bytes), max_bytes


# -- locking reads compiled once ------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_compiled_read_returns_what_the_queryset_returns():
    rows = [ScheduleFactory(payload={"n": n}) for n in range(3)]

    def build():
        return Schedule.objects.filter(name__in=[r.name for r in rows[:2]]).order_by("name")

    fast_orm.clear()
    with transaction.atomic():
        first = fast_orm.read_rows(Schedule, ("test", 1), "default", build)
        again = fast_orm.read_rows(Schedule, ("test", 1), "default", lambda: pytest.fail("built"))
    assert [r.name for r in first] == [r.name for r in again] == sorted(r.name for r in rows[:2])
    for got in first:
        want = Schedule.objects.get(pk=got.pk)
        for field in Schedule._meta.concrete_fields:
            assert getattr(got, field.attname) == getattr(want, field.attname), field.name
        assert got._state.adding is False and got._state.db == "default"


@pytest.mark.django_db(transaction=True)
def test_the_placeholder_takes_each_calls_value():
    from django.db.models import BooleanField
    from django.db.models.expressions import RawSQL

    rows = [ScheduleFactory() for _ in range(3)]

    def build():
        return Schedule.objects.filter(
            RawSQL(
                f"{connection.ops.quote_name('name')} IN (%s, %s)",
                (fast_orm.PLACEHOLDER, "none"),
                output_field=BooleanField(),
            )
        )

    fast_orm.clear()
    for row in rows:
        [got] = fast_orm.read_rows(Schedule, "by-name", "default", build, value=row.name)
        assert got.pk == row.pk
    assert len(fast_orm._STATEMENTS) == 1


@pytest.mark.django_db(transaction=True)
def test_one_statement_reads_any_number_of_rows():
    rows = [ScheduleFactory(name=f"lim-{n}") for n in range(5)]
    names = sorted(r.name for r in rows)

    def build():
        return Schedule.objects.filter(name__startswith="lim-").order_by("name")[: fast_orm.LIMIT]

    fast_orm.clear()
    for n in (1, 3, 5, 7, 2):
        got = fast_orm.read_rows(Schedule, "limited", "default", build, limit=n)
        assert [r.name for r in got] == names[:n]
        values = fast_orm.read_values(
            "limited-values", "default", lambda: build().values_list("name"), limit=n
        )
        assert values == [(name,) for name in names[:n]]
    assert len(fast_orm._STATEMENTS) == 2
    [found] = [s for k, s in fast_orm._STATEMENTS.items() if k[-1] == "limited"]
    assert str(fast_orm.LIMIT) not in found.sql and found.limited


@pytest.mark.django_db
def test_a_row_limit_is_given_exactly_where_the_statement_takes_one():
    def limited():
        return Schedule.objects.order_by("name")[: fast_orm.LIMIT]

    def whole():
        return Schedule.objects.order_by("name")

    fast_orm.clear()
    with pytest.raises(TypeError, match="needs limit="):
        fast_orm.read_rows(Schedule, "l", "default", limited)
    with pytest.raises(TypeError, match="needs limit="):
        fast_orm.read_rows(Schedule, "w", "default", whole, limit=3)
    with pytest.raises(TypeError, match="not the statement's LIMIT"):

        def inner():  # a subquery's limit only
            return Schedule.objects.filter(pk__in=limited().values("pk")).filter(name="x")

        fast_orm.read_rows(Schedule, "s", "default", inner, limit=3)
    with pytest.raises(TypeError, match="moved by an offset"):
        fast_orm.read_rows(Schedule, "o", "default", lambda: limited()[1:], limit=3)
    for n in range(5):
        ScheduleFactory(name=f"off-{n}")
    offset = fast_orm.read_rows(
        Schedule,
        "f",
        "default",
        lambda: Schedule.objects.order_by("name")[1:][: fast_orm.LIMIT],
        limit=3,
    )
    assert [r.name for r in offset] == ["off-1", "off-2", "off-3"]
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="at least 1"):
            fast_orm.read_rows(Schedule, "l", "default", limited, limit=bad)


@pytest.mark.django_db
def test_the_statement_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(fast_orm, "MAX_STATEMENTS", 2)
    fast_orm.clear()
    for key in range(5):
        fast_orm.read_values(key, "default", lambda: Schedule.objects.values_list("name"))
        assert len(fast_orm._STATEMENTS) <= 2


@pytest.mark.django_db
def test_read_values_converts_as_the_queryset_does():
    ScheduleFactory(name="v", payload={"a": [1, 2]})
    fast_orm.clear()

    def build():
        return Schedule.objects.values_list("name", "payload", "created_at", "next_run_at")

    assert fast_orm.read_values("values", "default", build) == list(build())


@pytest.mark.django_db(transaction=True)
def test_claims_and_completions_reuse_their_compiled_reads():
    for n in range(4):
        ScheduleFactory(name=f"hot-{n}", created_at=datetime.now(UTC) - timedelta(hours=1))
    fast_orm.clear()
    claims = state.claim_due(worker="w", limit=2)
    claims += state.claim_due(worker="w", limit=2)
    assert len(claims) == 4
    state.complete([state.Outcome(c, "succeeded") for c in claims[:2]])
    report = state.complete([state.Outcome(c, "succeeded") for c in claims[2:]])
    assert len(report.receipts) == 2
    keys = {key[-1] for key in fast_orm._STATEMENTS}
    if connection.vendor in ("postgresql", "mysql"):  # judged by the database clock
        # The pool's one level, the rows of no group (state/claim_reads.py); any size.
        assert ("claim_due", "default", 0, True) in keys
    assert ("claim_level", "default") in keys  # the level probe: no parameter but below
    if connection.vendor == "postgresql":  # one statement text for any number of ids
        assert "complete" in keys
    assert len(keys) <= 3


@pytest.mark.django_db(transaction=True)
def test_the_worker_path_reads_no_left_out_column_row_by_row():
    # The locking reads leave out columns no rule of a claim or a completion reads
    # (payload at completion, metadata, owner, updated_at): reading one would cost a query
    # per row. A batch of 30 stays a handful of statements, and the rows are written whole.
    from django.test.utils import CaptureQueriesContext

    for n in range(30):
        ScheduleFactory(
            name=f"lean-{n}",
            created_at=datetime.now(UTC) - timedelta(hours=1),
            payload={"n": n},
            metadata={"team": "x"},
        )
    with CaptureQueriesContext(connection) as claiming:
        claims = state.claim_due(worker="w", limit=30)
    with CaptureQueriesContext(connection) as completing:
        report = state.complete([state.Outcome(c, "succeeded", result=c.payload) for c in claims])
    assert sorted(c.payload["n"] for c in claims) == list(range(30))
    assert len(report.receipts) == 30
    assert len(claiming.captured_queries) <= 12, [q["sql"][:80] for q in claiming.captured_queries]
    assert len(completing.captured_queries) <= 12, [
        q["sql"][:80] for q in completing.captured_queries
    ]
    for row in Schedule.objects.filter(name__startswith="lean-"):
        assert row.metadata == {"team": "x"} and row.lease_token is None
        assert row.payload == {"n": int(row.name.split("-")[1])}


# -- definition fingerprints remembered -------------------------------------------------

_ZONES = [UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-5, minutes=-30))]
_INSTANTS = st.one_of(
    st.none(),
    st.datetimes(
        min_value=datetime(1990, 1, 1),
        max_value=datetime(2100, 1, 1),
        timezones=st.sampled_from(_ZONES),
    ),
)
_DEFINITIONS = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["interval", "cron", "once", "rrule", "manual"]),
        "interval_seconds": st.one_of(
            st.none(), st.integers(1, 10**6), st.just(True), st.just(60.0)
        ),
        "cron": st.sampled_from(["", "*/5 * * * *", "0 3 * * 1-5"]),
        "timezone": st.sampled_from(["UTC", "Europe/Paris"]),
        "run_at": _INSTANTS,
        "start_at": _INSTANTS,
        "end_at": _INSTANTS,
        "rrule": st.sampled_from(["", "FREQ=DAILY"]),
    }
)


def test_fingerprints_of_the_two_instants_of_a_repeated_hour_differ():
    from zoneinfo import ZoneInfo

    first = datetime(2027, 10, 31, 2, 30, tzinfo=ZoneInfo("Europe/Paris"))
    rows = [
        Schedule(name="f", callback="tests.noop", kind="once", run_at=at)
        for at in (first, first.replace(fold=1))
    ]
    assert rows[0].compute_definition_hash() != rows[1].compute_definition_hash()


@given(st.lists(_DEFINITIONS, min_size=1, max_size=6))
def test_a_remembered_fingerprint_is_the_one_computed_afresh(definitions):
    from django_durable_schedules.models import definition as schedule_module

    rows = [Schedule(name="h", callback="tests.noop", **d) for d in definitions]
    remembered = [row.compute_definition_hash() for row in rows for _ in range(2)]
    fresh = []
    for row in rows:
        schedule_module._HASHES.clear()
        fresh += [row.compute_definition_hash()] * 2
    assert remembered == fresh


@pytest.mark.parametrize(
    "values",
    [
        {"kind": "cron", "cron": "0 * * * *", "extra_specs": ["0 9 * * *"]},
        {"kind": "cron", "cron": "0 * * * *", "extra_specs": ("0 9 * * *",)},
        {"kind": "cron", "cron": "0 * * * *", "extra_specs": []},
        {"kind": "cron", "cron": ["0 * * * *"]},  # a list written behind save()
        {"kind": "interval", "interval_seconds": [60], "extra_specs": [{"a": 1}]},
    ],
)
def test_a_remembered_fingerprint_of_list_values_is_the_one_computed_afresh(values):
    from django_durable_schedules.models import definition as schedule_module

    row = Schedule(name="h", callback="tests.noop", **values)
    remembered = [row.compute_definition_hash() for _ in range(2)]
    schedule_module._HASHES.clear()
    assert remembered == [row.compute_definition_hash()] * 2


# -- a row's spec remembered ------------------------------------------------------------


def _row(**values):
    values = {"kind": "interval", "interval_seconds": 60, "timezone": "UTC", **values}
    values.setdefault("created_at", NOW)
    return Schedule(name="r", callback="tests.noop", **values)


def _shape(spec):
    """A spec's fields with their types, and what validating it says."""
    from dataclasses import fields

    try:
        spec.validate()
        verdict = None
    except timing.InvalidSchedule as exc:
        verdict = (exc.field, exc.message)
    return [(f.name, getattr(spec, f.name), type(getattr(spec, f.name))) for f in fields(spec)], (
        verdict
    )


def test_a_row_whose_values_did_not_change_gets_its_validated_spec_back(monkeypatch):
    from django_durable_schedules.models import definition

    definition._SPECS.clear()
    first = _row().spec()
    first.validate()
    calls = []
    monkeypatch.setattr(spec_module, "validate_timezone", lambda zone: calls.append(zone))
    again = _row().spec()  # the same values read again (the next claim of the row)
    again.validate()
    assert again is first and calls == []


@pytest.mark.parametrize(
    "changed",
    [
        {"timezone": "Mars/Olympus"},
        {"interval_seconds": 60.0},
        {"interval_seconds": True},
        {"interval_seconds": 0},
        {"kind": "cron", "cron": "61 * * * *"},
        {"extra_specs": ["0 9 * * *"]},
        {"start_at": NOW, "end_at": NOW - timedelta(seconds=1)},
        {"created_at": datetime(2027, 6, 1, 10, 0, 0)},  # naive
    ],
)
def test_a_value_written_behind_save_is_validated_afresh(changed):
    # A valid row's spec is remembered; the same row read again with one value written
    # behind save() (raw SQL, update()) is another key: built and refused as before.
    _row().spec().validate()
    row = _row(**changed)
    with pytest.raises(timing.InvalidSchedule):
        row.spec().validate()
    with pytest.raises(timing.InvalidSchedule):  # and at every claim, not only the first
        row.spec().validate()


def test_specs_of_rows_with_calendars_or_instants_outside_utc_are_not_remembered():
    from zoneinfo import ZoneInfo

    from django_durable_schedules.models import definition

    definition._SPECS.clear()
    row = _row()
    row.__dict__["_dds_exclusions"] = timing.exclusions_of([("c", NOW.date(), "")], [], [])
    assert row.spec().exclusions and not definition._SPECS
    _row(start_at=datetime(2027, 6, 1, 12, 0, tzinfo=ZoneInfo("Europe/Paris"))).spec()
    _row(kind="cron", cron="0 * * * *", extra_specs=[5]).spec()
    _row(created_at=None).spec()  # unsaved: its anchor is the clock's now
    assert not definition._SPECS


def test_the_remembered_spec_cache_is_bounded(monkeypatch):
    from django_durable_schedules.models import definition

    monkeypatch.setattr(definition, "_SPECS_MAX", 3)
    definition._SPECS.clear()
    for seconds in range(1, 8):
        _row(interval_seconds=seconds).spec()
        assert len(definition._SPECS) <= 3


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("rehash", [False, True])
def test_a_row_claimed_then_broken_behind_save_is_paused_at_its_next_claim(rehash):
    # Its valid spec was remembered at the first claim; the bad zone written behind save()
    # is still found at the next one: the row alone is receipted degraded and paused.
    second = timedelta(seconds=1)
    row = Schedule(name="b", callback="tests.noop", kind="interval", interval_seconds=60)
    row.created_at = NOW
    row.full_clean()
    row.save()
    neighbour = Schedule.objects.create(
        name="n", callback="tests.noop", kind="interval", interval_seconds=60, created_at=NOW
    )
    claims = state.claim_due(worker="w", now=NOW + second)
    assert len(claims) == 2
    state.complete([state.Outcome(c, "succeeded") for c in claims], now=NOW + 2 * second)
    row.refresh_from_db()
    values = {"timezone": "Mars/Olympus"}
    if rehash:  # the fingerprint matches (as a tzdata that dropped the zone leaves it)
        values["definition_hash"] = row.definition_hash
    Schedule.objects.filter(pk=row.pk).update(**values)
    if rehash:
        Schedule.objects.filter(pk=row.pk).update(definition_hash=row.definition_hash)
    [claim] = state.claim_due(worker="w", now=NOW + 61 * second)
    assert claim.schedule_id == neighbour.pk
    row.refresh_from_db()
    assert row.status == "paused" and "timezone" in row.degraded_reason


_SPEC_ROWS = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["interval", "cron", "once", "rrule", "manual", "after"]),
        "interval_seconds": st.one_of(
            st.none(), st.integers(1, 10**6), st.just(True), st.just(60.0)
        ),
        "cron": st.sampled_from(["", "*/5 * * * *", "0 3 * * 1-5"]),
        "timezone": st.sampled_from(["UTC", "Europe/Paris", "Mars/Olympus"]),
        "run_at": _INSTANTS,
        "start_at": _INSTANTS,
        "end_at": _INSTANTS,
        "created_at": st.datetimes(  # never None: the anchor would be the clock's now
            min_value=datetime(1990, 1, 1),
            max_value=datetime(2100, 1, 1),
            timezones=st.sampled_from(_ZONES),
        ),
        "rrule": st.sampled_from(["", "FREQ=DAILY"]),
        "extra_specs": st.sampled_from([None, [], {}, "", ["0 9 * * *"], ("0 9 * * *",), [5]]),
        "exclusion_policy": st.sampled_from(["skip", "next_business_day", "bogus"]),
        "rrule_business_days": st.sampled_from([False, True, 1, 0]),
    }
)


@given(st.lists(_SPEC_ROWS, min_size=1, max_size=6))
def test_a_remembered_spec_is_the_one_built_afresh(definitions):
    from django_durable_schedules.models import definition

    rows = [_row(**d) for d in definitions]
    remembered = [_shape(row.spec()) for row in rows for _ in range(2)]
    fresh = []
    for row in rows:
        definition._SPECS.clear()
        spec_module._VALID_SPECS.clear()
        fresh += [_shape(row.spec())] * 2
    assert remembered == fresh


# -- the light future of a run ------------------------------------------------------------

_OPS = st.lists(
    st.sampled_from(["cancel", "start", "result", "exception", "callback", "state"]),
    max_size=8,
)


def _apply_ops(future, ops):
    """What a sequence of operations does to ``future``: each call's return value or the
    type of the exception it raised, and what the done callbacks saw."""
    seen, said = [], []
    for op in ops:
        try:
            if op == "cancel":
                said.append(future.cancel())
            elif op == "start":
                said.append(future.set_running_or_notify_cancel())
            elif op == "result":
                future.set_result(42)
                said.append(None)
            elif op == "exception":
                future.set_exception(ValueError("x"))
                said.append(None)
            elif op == "callback":
                future.add_done_callback(lambda f: seen.append((f.cancelled(), f.done())))
                said.append(None)
            else:
                said.append((future.cancelled(), future.running(), future.done()))
        except Exception as exc:
            said.append(type(exc).__name__)
    if future.done() and not future.cancelled():
        said.append(("final", future.result() if future.exception() is None else "raised"))
    return said, seen


@given(_OPS)
def test_a_run_future_behaves_as_a_concurrent_future(ops):
    from concurrent.futures import Future

    from django_durable_schedules.worker.threads import RunFuture

    expected = _apply_ops(Future(), ops)
    got = _apply_ops(RunFuture(), ops)
    # Future says RuntimeError for starting twice (and logs it); so does RunFuture.
    assert got == expected


def test_only_the_call_that_cancels_a_pending_run_says_so():
    from django_durable_schedules.worker.threads import RunFuture

    future: RunFuture[int] = RunFuture()
    assert future.cancel_pending() is True
    assert future.cancel_pending() is False and future.cancel() is True
    started: RunFuture[int] = RunFuture()
    assert started.set_running_or_notify_cancel()
    assert started.cancel_pending() is False and not started.cancelled()


# -- the worker's wake-up ---------------------------------------------------------------


@pytest.mark.django_db
def test_the_worker_wakeup_builds_its_reads_once_and_answers_the_same():
    from django_durable_schedules.state import wakeup_due, workers

    fast_orm.clear()
    wakeup_due.forget_levels()  # no priority level kept from another test's rows
    ScheduleFactory(name="wake", interval_seconds=60, next_run_at=NOW)
    state.heartbeat("wake-w")
    with mock.patch.object(workers, "_wakeup_reads", wraps=workers._wakeup_reads) as reads:
        first = state.next_wakeup(worker_id="wake-w")
        second = state.next_wakeup(worker_id="wake-w")
        assert reads.call_count == 1  # compiled once: the later calls build nothing
        assert first == second == state.next_wakeup()  # the per-read path agrees
        assert first.due == NOW
        assert reads.call_count == 2
