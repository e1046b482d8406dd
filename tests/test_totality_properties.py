"""Totality (issue 11): no single value stops the fleet.

Every value from outside the engine - a column written behind ``save()``, whatever a
callback returns or raises - is validated or bounded where it enters. A bad one affects
that one schedule (an attempt receipted ``degraded`` naming the field, the schedule paused
with a ``degraded_reason``, counted by health), never the worker or the other schedules
of its batch. Hypothesis generates the values:

* :func:`test_claim_contains_poison_rows` - a batch of healthy rows and rows poisoned with
  ``QuerySet.update()`` or raw SQL, claimed with :func:`state.claim_due`;
* :func:`test_complete_contains_poison_outcomes` - generated :class:`state.Outcome` values
  (text with NUL and lone surrogates, huge strings, NaN and huge numbers, any retry delay)
  recorded by :func:`state.complete`;
* :func:`test_runner_contains_poison_callbacks` - a registered callback (``tests.poison``)
  that raises or returns generated values, through :func:`runner.execute` and
  :func:`state.complete`;
* :func:`test_worker_survives_poison` - the same, against a real ``run_scheduler``.

Each step they take in-process (claim, complete, expire) is also held to the transition
table: tests/conftest.py observes these modules (tests/transition_steps.py) and fails a
step, ``(status before, event, status after)``, that no declared row allows.

``DDS_HYPOTHESIS_EXAMPLES`` (default 25) sets the examples per in-process property and
``DDS_HYPOTHESIS_WORKER_EXAMPLES`` (default 2) those of the worker property;
``DDS_HYPOTHESIS_SHRINK=1`` shrinks a failure to a minimal example; ``bench/totality.py``
runs the long profile (and shrinks).
"""

from __future__ import annotations

import json
import math
import os
import signal
import time
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction
from hypothesis import HealthCheck, Phase, assume, given, note, settings
from hypothesis import strategies as st

from django_durable_schedules import health, state, timing
from django_durable_schedules.conf import app_settings
from django_durable_schedules.db.retention import retention_gate
from django_durable_schedules.models import (
    DEFINITION_FIELDS,
    RunAttempt,
    RunReceipt,
    Schedule,
    ScheduleEvent,
    WorkerHeartbeat,
)
from django_durable_schedules.state.rules import ceil_second
from django_durable_schedules.worker.execution import runner
from tests.testapp.models import SideEffect

from .conftest import server_examples, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLES = int(os.environ.get("DDS_HYPOTHESIS_EXAMPLES", "25"))
WORKER_EXAMPLES = int(os.environ.get("DDS_HYPOTHESIS_WORKER_EXAMPLES", "2"))

#: Shrinking a failure to its smallest example can take minutes: off in the test suite
#: (a failure still fails, with the example found), on with DDS_HYPOTHESIS_SHRINK=1 (as
#: bench/totality.py sets it).
PHASES = [Phase.explicit, Phase.reuse, Phase.generate] + (
    [Phase.shrink] if os.environ.get("DDS_HYPOTHESIS_SHRINK") == "1" else []
)

PROFILE = settings(
    max_examples=EXAMPLES,
    phases=PHASES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
#: PROFILE with at most 10 examples on PostgreSQL and MariaDB (``server_examples``): for
#: the properties about what each database lets in behind ``save()`` (and what it keeps of
#: a run's texts). They run on every vendor, whose refusals differ (NUL, ranges, text in
#: a typed column); the strategies are the same on each, and SQLite runs all ``EXAMPLES``.
#: Used here and in tests/test_totality_worker_paths.py, test_rrule_totality.py,
#: test_calendar_totality.py, test_calendar_columns.py and test_trigger_payload.py.
POISON_PROFILE = settings(PROFILE, max_examples=server_examples(EXAMPLES, server=10))

S = timedelta(seconds=1)
#: The longest delay the engine may put between now and a schedule's next run after a
#: retry (the contract: bounded, about 30 days; one extra day of slack for the grid).
RETRY_HORIZON = timedelta(days=31)
#: How a repaired text may show that it was repaired.
REPAIR_MARKS = ("\ufffd", "U+FFFD", "repaired", "replaced")
#: (field, exclusive lower bound, inclusive upper bound): Schedule.clean()'s ranges.
#: Fields whose out-of-range value may be bounded where it is used instead of degrading.
BOUNDED_FIELDS = frozenset({"backoff_base_seconds", "backoff_cap_seconds", "timeout_seconds"})
DURATION_BOUNDS = (
    ("backoff_base_seconds", -1e-9, 86400.0),
    ("backoff_cap_seconds", -1e-9, 30 * 86400.0),
    ("timeout_seconds", 0.0, 7 * 86400.0),
)


# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------


def wipe() -> None:
    """Forget every row (Hypothesis examples share one test database). Attempts, receipts
    and events are append-only: deleted through the retention gate, as conftest's flush."""
    with transaction.atomic(), retention_gate():
        RunReceipt.objects.all().delete()
        RunAttempt.objects.all().delete()
        ScheduleEvent.objects.all().delete()
        # Only the keys: a row an example poisoned (SQLite text in a datetime column) must
        # not be parsed on its way out.
        Schedule.objects.only("pk").delete()
        WorkerHeartbeat.objects.all().delete()
        SideEffect.objects.all().delete()


def db_now() -> datetime:
    return timing.truncate_to_second(state.db_now()) + timedelta(milliseconds=250)


def healthy(name: str, kind: str, now: datetime, **fields: Any) -> Schedule:
    """A valid schedule of ``kind``, due at ``now`` (a manual one: triggered)."""
    fields.setdefault("callback", "tests.noop")
    fields.setdefault("timezone", "UTC")
    if kind == "interval":
        fields.setdefault("interval_seconds", 60)
    elif kind == "cron":
        fields.setdefault("cron", "*/5 * * * *")
        fields["timezone"] = "Europe/Paris"
    elif kind == "once":
        fields.setdefault("run_at", now - 30 * S)
    row = Schedule(name=name, kind=kind, created_at=now - timedelta(hours=1), **fields)
    row.full_clean()
    row.save()
    due = timing.truncate_to_second(now) - 5 * S
    # A manual schedule is never due by itself: due when triggered.
    triggered = due if kind == "manual" else None
    Schedule.objects.filter(pk=row.pk).update(next_run_at=due, triggered_at=triggered)
    row.refresh_from_db()
    return row


def write_behind_save(row: Schedule, field: str, value: Any, *, via: str, rehash: bool) -> bool:
    """Write ``field = value`` behind ``save()`` (``QuerySet.update`` or raw SQL), then,
    with ``rehash``, the definition hash that matches it (so the worker cannot tell the
    edit from a planned definition). Returns False when the database (or its driver)
    refused the value: refused where it enters, the row is unchanged."""
    try:
        with transaction.atomic():
            if via == "sql":
                f = Schedule._meta.get_field(field)
                qn = connection.ops.quote_name
                with connection.cursor() as cursor:
                    cursor.execute(
                        f"UPDATE {qn(Schedule._meta.db_table)} SET {qn(f.column)} = %s "
                        f"WHERE {qn(Schedule._meta.pk.column)} = %s",
                        [
                            f.get_db_prep_save(value, connection),
                            Schedule._meta.pk.get_db_prep_value(row.pk, connection),
                        ],
                    )
            else:
                Schedule.objects.filter(pk=row.pk).update(**{field: value})
            if rehash:
                fresh = Schedule.objects.get(pk=row.pk)
                Schedule.objects.filter(pk=row.pk).update(
                    definition_hash=fresh.compute_definition_hash()
                )
    except (DatabaseError, UnicodeError, ValueError, OverflowError, TypeError) as exc:
        note(f"{field}={value!r} refused on write: {type(exc).__name__}: {exc}")
        return False
    return True


def row_problem(row: Schedule) -> str | None:
    """The field that makes ``row`` (as read back from the database) a row the engine
    cannot evaluate, by the same rules as ``Schedule.clean()``; None for a valid row."""
    try:
        row.spec().validate()
    except timing.InvalidSchedule as exc:
        return exc.field
    for field, low, high in DURATION_BOUNDS:
        value = getattr(row, field)
        if value is not None and not (low < value <= high):  # also true for NaN
            return field
    return None


def edited_behind_save(row: Schedule) -> bool:
    return row.definition_hash != row.compute_definition_hash()


def text_problems(value: Any) -> list[str]:
    if not isinstance(value, str):
        return [f"not text: {type(value).__name__}"]
    problems = []
    if "\x00" in value:
        problems.append("NUL")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        problems.append("lone surrogate")
    return problems


def json_problems(value: Any, path: str = "result") -> list[str]:
    """What keeps ``value`` from being valid, portable JSON (every database stores it)."""
    if value is None or isinstance(value, bool):
        return []
    if isinstance(value, str):
        return [f"{path}: {p}" for p in text_problems(value)]
    if isinstance(value, int):
        return [] if abs(value) < 2**64 else [f"{path}: integer beyond 64 bits"]
    if isinstance(value, float):
        return [] if math.isfinite(value) else [f"{path}: {value!r}"]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in json_problems(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [
            p
            for k, v in value.items()
            for p in [*json_problems(k, f"{path} key"), *json_problems(v, f"{path}.{k!r}")]
        ]
    return [f"{path}: {type(value).__name__}"]


def clean_text(value: str, max_chars: int) -> bool:
    return not text_problems(value) and len(value) <= max_chars


def clean_json(value: Any) -> bool:
    """Plain JSON every database keeps exactly (numbers below 2**53 in magnitude: a larger
    float comes back from PostgreSQL's jsonb as an int; valid text)."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, str):
        return clean_text(value, 2000)
    if isinstance(value, int):
        return abs(value) < 2**53
    if isinstance(value, float):
        return math.isfinite(value) and abs(value) < 2**53
    if isinstance(value, list):
        return all(clean_json(v) for v in value)
    if isinstance(value, dict):
        return all(clean_text(k, 200) and clean_json(v) for k, v in value.items())
    return False


def assert_text_receipted(
    stored: str, given: str, max_chars: int, what: str, *, note: str = ""
) -> None:
    """``stored`` (read back) is valid text; it is ``given`` itself when that was valid and
    short (perhaps followed by a note naming ``note``: why another value of the outcome was
    changed), else ``given`` cut (a prefix) or repaired and marked as repaired."""
    assert not text_problems(stored), f"{what}: invalid text stored: {text_problems(stored)}"
    if clean_text(given, max_chars):
        noted = bool(note) and stored.startswith(given) and note in stored[len(given) :]
        assert stored == given or noted, f"{what}: a valid value was not recorded as given"
        return
    cut = stored.rstrip("…")
    assert given.startswith(cut) or any(m in stored for m in REPAIR_MARKS), (
        f"{what}: {stored[:80]!r} is neither a prefix of what was given nor marked repaired"
    )


def assert_one_receipt_each(attempt_ids: list[uuid.UUID]) -> dict[uuid.UUID, RunReceipt]:
    receipts = list(RunReceipt.objects.filter(attempt_id__in=attempt_ids))
    by_attempt: dict[uuid.UUID, list[RunReceipt]] = {}
    for r in receipts:
        by_attempt.setdefault(r.attempt_id, []).append(r)
    missing = [a for a in attempt_ids if a not in by_attempt]
    doubled = [a for a, rs in by_attempt.items() if len(rs) > 1]
    assert not missing and not doubled, f"attempts without a receipt {missing}, doubled {doubled}"
    return {a: rs[0] for a, rs in by_attempt.items()}


def assert_bounded(when: datetime | None, now: datetime, what: str) -> None:
    if when is None:
        return
    assert when <= now + RETRY_HORIZON, f"{what}: {when} is more than 31 days after {now}"


# ---------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------

BAD_CHARS = st.sampled_from(["\x00", "\ud800", "\udbff", "\udc00", "\udfff"])
#: Any code point, lone surrogates and NUL included (Hypothesis leaves surrogates out).
ANY_CHAR = st.one_of(st.characters(), BAD_CHARS, st.characters(codec="utf-8"))
SHORT_TEXT = st.lists(ANY_CHAR, max_size=12).map("".join)
TEXT = st.one_of(
    st.text(max_size=40),
    SHORT_TEXT,
    st.builds(lambda t, n: (t or "x") * n, SHORT_TEXT, st.sampled_from([100, 1500, 70_000])),
)
FLOATS = st.one_of(
    st.floats(),
    st.sampled_from([math.inf, -math.inf, math.nan, -1.0, 1.8e12, 1e308, -0.0, 5e-324]),
)
HUGE_INTS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70), st.sampled_from([2**63, 10**400, -(10**400)])
)

JSON_SCALARS = st.one_of(st.none(), st.booleans(), HUGE_INTS, FLOATS, TEXT)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(SHORT_TEXT, children, max_size=4)
    ),
    max_leaves=10,
)

BAD_ZONES = [
    "Mars/Olympus",
    "US/Pacific-New",
    "Not/A_Zone",
    "localtime",
    "posixrules",
    "Factory",
    "utc",
    "../../etc/passwd",
    "/etc/localtime",
    "Europe/Paris ",
    "UTC\x00",
    "\ud800",
    "x" * 64,
]
BAD_CRONS = [
    "61 * * * *",
    "0 0 31 2 *",
    "0 0 30 2 *",
    "* * * *",
    "* * * * * * *",
    "@reboot",
    "@never",
    "0 24 * * *",
    "*/0 * * * *",
    "5-1 * * * *",
    "0 0 0 * *",
    "0 0 * 13 *",
    "0 0 * * 8",
    "*/90 * * * *",
    "15W * * * *",
    "? * * * *",
]
CRON_ALPHABET = "0123456789*/,-@ LW#?abcdefghijklmnopqrstuvwxyzJFMASOND"


@st.composite
def poisons(draw: st.DrawFn) -> tuple[str, str, Any]:
    """``(kind of row, field, value)``: a value ``save()`` would have refused."""
    field = draw(
        st.sampled_from(
            [
                "timezone",
                "cron",
                "interval_seconds",
                "backoff_base_seconds",
                "backoff_cap_seconds",
                "timeout_seconds",
            ]
        )
    )
    if field == "timezone":
        kind = draw(st.sampled_from(["cron", "interval", "once", "manual"]))
        value = draw(st.one_of(st.sampled_from(BAD_ZONES), st.text(min_size=1, max_size=64)))
    elif field == "cron":
        kind = "cron"
        value = draw(
            st.one_of(
                st.sampled_from(BAD_CRONS), st.text(alphabet=CRON_ALPHABET, min_size=1, max_size=30)
            )
        )
    elif field == "interval_seconds":
        kind = "interval"
        value = draw(
            st.one_of(
                st.sampled_from([2**62, 2**63 - 1, timing.MAX_INTERVAL_SECONDS + 1, 0, -60]),
                st.integers(min_value=timing.MAX_INTERVAL_SECONDS + 1, max_value=2**64),
            )
        )
    else:
        kind = draw(st.sampled_from(["interval", "cron", "once", "manual"]))
        value = draw(
            st.one_of(
                st.sampled_from([1e12, math.nan, math.inf, -1.0, -math.inf, 86400.5 * 31]),
                st.floats(min_value=1e6, allow_infinity=True),
            )
        )
    return kind, field, value


@st.composite
def numbers(draw: st.DrawFn) -> list[Any]:
    """A ``tests.poison`` NUMBER spec (see tests/testapp/schedules.py)."""
    return draw(
        st.one_of(
            st.sampled_from(["inf", "-inf", "nan", "-1", "1.8e12", "1e308", "0", "2.5"]).map(
                lambda s: ["float", s]
            ),
            st.floats().map(lambda f: ["float", repr(f)]),
            HUGE_INTS.map(lambda i: ["int", str(i)]),
            st.booleans().map(lambda b: ["bool", b]),
            text_specs().map(lambda t: ["str", t]),
            st.just(["none"]),
        )
    )


def text_specs() -> st.SearchStrategy[dict[str, Any]]:
    """A TEXT spec: code points (NUL and lone surrogates included) and a repeat count."""
    return st.builds(
        lambda chars, times: {"cps": [ord(c) for c in chars], "times": times},
        SHORT_TEXT,
        st.sampled_from([1, 1, 1, 50, 3000, 100_000]),
    )


def value_specs() -> st.SearchStrategy[list[Any]]:
    leaves = st.one_of(
        st.just(["none"]),
        text_specs().map(lambda t: ["text", t]),
        numbers().map(lambda n: ["num", n]),
        st.just(["cycle"]),
        st.sampled_from([10, 40, 500]).map(lambda n: ["deep", n]),
        st.just(["hostile"]),
        text_specs().map(lambda t: ["bytes", t]),
        st.just(["set"]),
    )
    keys = st.one_of(
        text_specs().map(lambda t: ["text", t]),
        numbers().filter(lambda n: n[0] != "str").map(lambda n: ["num", n]),
        st.just(["none"]),
    )
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=3).map(lambda v: ["list", v]),
            st.lists(st.tuples(keys, children).map(list), max_size=3).map(lambda v: ["dict", v]),
        ),
        max_leaves=6,
    )


#: Exceptions ``tests.poison`` raises (``PoisonBaseError`` has a test of its own).
RAISED = [
    "SkipRun",
    "RetryRun",
    "FailRun",
    "RuntimeError",
    "KeyError",
    "UnicodeDecodeError",
    "SystemExit",
    "PoisonStrError",
]


def poison_specs(raised: list[str] = RAISED) -> st.SearchStrategy[dict[str, Any]]:
    """What ``tests.poison`` is told to do."""
    return st.one_of(
        st.builds(
            lambda name, message: {"raise": name, "message": message},
            st.sampled_from(raised),
            text_specs(),
        ),
        st.builds(
            lambda message, after: {"raise": "RetryRun", "message": message, "after": after},
            text_specs(),
            numbers(),
        ),
        st.builds(
            lambda name, args: {"raise": name, "args": args},
            st.sampled_from(["RuntimeError", "KeyError", "SkipRun", "PoisonStrError"]),
            st.lists(value_specs(), max_size=3),
        ),
        value_specs().map(lambda v: {"return": v}),
    )


# ---------------------------------------------------------------------------------------
# a. claim_due contains poison rows
# ---------------------------------------------------------------------------------------

HEALTHY_KINDS = st.lists(
    st.sampled_from(["interval", "cron", "once", "manual"]), min_size=1, max_size=5
)


@POISON_PROFILE
@given(
    kinds=HEALTHY_KINDS,
    poisoned=st.lists(
        st.tuples(poisons(), st.sampled_from(["update", "sql"]), st.booleans()),
        min_size=1,
        max_size=4,
    ),
    order=st.randoms(use_true_random=False),
)
def test_claim_contains_poison_rows(kinds, poisoned, order):
    """One claim batch, healthy and poisoned rows mixed in any order: ``claim_due`` never
    raises; every healthy row is claimed (and runs); every poisoned row gets one attempt
    receipted ``degraded`` naming the field, and is paused with its reason (health counts
    it); a second claim later leaves the poisoned rows alone."""
    note(f"kinds={kinds!r} poisoned={poisoned!r}")
    wipe()
    now = db_now()
    rows: list[tuple[Schedule, str | None]] = []  # (row, field poisoned)
    for i, kind in enumerate(kinds):
        rows.append((healthy(f"ok-{i}", kind, now), None))
    for i, ((kind, field, value), via, rehash) in enumerate(poisoned):
        row = healthy(f"poison-{i}", kind, now)
        rehash = rehash and field in DEFINITION_FIELDS
        write_behind_save(row, field, value, via=via, rehash=rehash)
        rows.append((row, field))
    order.shuffle(rows)
    # A definition written behind save() makes the row due at the database's now of that
    # write (db/edits.py): claim after every write.
    now = max(now, db_now())
    # id -> "claimed" | "replanned" | "degraded:<field>" | "bounded:<field>"
    expected: dict[uuid.UUID, str] = {}
    for row, _ in rows:
        row.refresh_from_db()
        problem = row_problem(row)
        if problem in BOUNDED_FIELDS:
            expected[row.pk] = f"bounded:{problem}"
        elif problem is not None:
            expected[row.pk] = f"degraded:{problem}"
        elif edited_behind_save(row):
            expected[row.pk] = "replanned"  # a valid edit behind save(): re-planned, no run
        else:
            expected[row.pk] = "claimed"
        note(
            f"{row.name}: {expected[row.pk]} ({row.kind} tz={row.timezone!r} cron={row.cron!r} "
            f"interval={row.interval_seconds!r} backoff={row.backoff_base_seconds!r}/"
            f"{row.backoff_cap_seconds!r} timeout={row.timeout_seconds!r})"
        )
    assume(any(e.split(":")[0] in ("degraded", "bounded") for e in expected.values()))

    claims = state.claim_due(worker="totality", now=now)

    by_id = {c.schedule_id: c for c in claims}
    # A duration out of range (backoff, timeout) may be bounded where it is used instead
    # of pausing the row: then the row is claimed, and every use of it is bounded.
    bounded = {pk for pk, e in expected.items() if e.startswith("bounded") and pk in by_id}
    degraded = {
        pk: e.split(":", 1)[1]
        for pk, e in expected.items()
        if e.split(":")[0] in ("degraded", "bounded") and pk not in bounded
    }
    want_claimed = {pk for pk, e in expected.items() if e == "claimed"} | bounded
    assert set(by_id) == want_claimed, "the claim batch is not exactly the healthy rows"
    for pk, field in degraded.items():
        row = Schedule.objects.get(pk=pk)
        assert row.status == "paused", f"{row.name}: {row.status}, not paused"
        assert field in row.degraded_reason, f"{row.name}: reason {row.degraded_reason!r}"
        assert row.lease_token is None and row.next_run_at is None
        [attempt] = RunAttempt.objects.filter(schedule_id=pk)
        receipt = RunReceipt.objects.get(attempt=attempt)
        assert receipt.status == "degraded"
        assert field in receipt.error_message, f"{row.name}: {receipt.error_message!r}"
        assert not text_problems(receipt.error_message)
    for pk, e in expected.items():
        if e == "replanned":
            row = Schedule.objects.get(pk=pk)
            assert not RunAttempt.objects.filter(schedule_id=pk).exists()
            if row.status == "active":
                assert row.next_run_at is not None and row.next_run_at > now
    for pk in bounded:
        timeout = by_id[pk].timeout_seconds
        assert timeout is None or 0 < timeout <= 7 * 86400, f"claim timeout {timeout!r}"
    assert health.snapshot(now=now).degraded == len(degraded)

    # The healthy rows of the batch run and are receipted as usual; the bounded ones fail
    # (their backoff is used) and are retried within the bound.
    done_at = now + S
    outcomes = [
        state.Outcome(c, "failed", error_type="RuntimeError", error_message="boom")
        if c.schedule_id in bounded
        else runner.execute(c)
        for c in claims
    ]
    report = state.complete(outcomes, now=done_at)
    assert sorted(r.status for r in report.receipts) == sorted(
        "failed" if c.schedule_id in bounded else "succeeded" for c in claims
    )
    assert_one_receipt_each(list(RunAttempt.objects.values_list("id", flat=True)))
    for pk in bounded:
        row = Schedule.objects.get(pk=pk)
        assert row.next_run_at is not None and row.next_run_at >= now, row.name
        assert_bounded(row.next_run_at, done_at, f"{row.name} retry")

    later = now + timedelta(minutes=10)
    again = state.claim_due(worker="totality", now=later)
    assert not {c.schedule_id for c in again} & set(degraded)
    assert RunAttempt.objects.filter(schedule_id__in=degraded).count() == len(degraded)
    state.complete([runner.execute(c) for c in again], now=later + S)


@POISON_PROFILE
@given(
    plan=st.lists(
        st.tuples(
            st.one_of(st.none(), poisons().filter(lambda p: p[0] == "interval")),
            st.sampled_from(["succeeded", "skipped", "failed", "expire"]),
            st.booleans(),
        ),
        min_size=2,
        max_size=6,
    )
)
def test_rows_poisoned_while_running_are_contained(plan):
    """Rows poisoned behind ``save()`` while their run is in flight: ``complete`` and
    ``expire_leases`` (a worker that died) never raise and write one receipt per attempt;
    the runs of the other rows are recorded as reported; the next claim pauses the
    poisoned rows as degraded, and no next run is more than ~30 days ahead."""
    assume(any(p is not None for p, _, _ in plan))
    wipe()
    now = db_now()
    rows = [healthy(f"run-{i}", "interval", now, max_attempts=2) for i, _ in enumerate(plan)]
    claims = {c.schedule_id: c for c in state.claim_due(worker="totality", now=now)}
    assert set(claims) == {r.pk for r in rows}
    problems: dict[uuid.UUID, str | None] = {}
    for row, (poison, _, rehash) in zip(rows, plan, strict=True):
        if poison is not None:
            _kind, field, value = poison
            write_behind_save(
                row, field, value, via="update", rehash=rehash and field in DEFINITION_FIELDS
            )
        row.refresh_from_db()
        problems[row.pk] = row_problem(row)
        note(f"{row.name}: poison {poison!r} -> {problems[row.pk]}")
    outcomes = [
        state.Outcome(claims[row.pk], what, error_type="RuntimeError" if what == "failed" else "")
        for row, (_, what, _) in zip(rows, plan, strict=True)
        if what != "expire"
    ]
    done_at = now + S

    state.complete(outcomes, now=done_at)
    expired_at = now + timedelta(seconds=app_settings.LEASE_SECONDS + 1)
    state.expire_leases(now=expired_at)

    receipts = assert_one_receipt_each([c.attempt_id for c in claims.values()])
    for row, (_, what, _) in zip(rows, plan, strict=True):
        receipt = receipts[claims[row.pk].attempt_id]
        want = "lease_expired" if what == "expire" else what
        if problems[row.pk] is None:
            assert receipt.status == want, row.name
        else:  # the outcome, or the run's own slot receipted degraded
            assert receipt.status in (want, "degraded"), (row.name, receipt.status)
        fresh = Schedule.objects.get(pk=row.pk)
        assert fresh.lease_token is None
        assert_bounded(fresh.next_run_at, expired_at, f"{row.name} next_run_at")

    later = now + timedelta(hours=2)
    follow = state.claim_due(worker="totality", now=later)
    state.complete([runner.execute(c) for c in follow], now=later + S)
    assert_one_receipt_each(list(RunAttempt.objects.values_list("id", flat=True)))
    for row in rows:
        fresh = Schedule.objects.get(pk=row.pk)
        problem = problems[row.pk]
        if problem is not None and problem not in BOUNDED_FIELDS:
            assert fresh.status == "paused" and problem in fresh.degraded_reason, (
                f"{row.name}: {fresh.status} {fresh.degraded_reason!r}"
            )
        assert_bounded(fresh.next_run_at, later, f"{row.name} next_run_at")
    paused = Schedule.objects.exclude(degraded_reason="").count()
    assert health.snapshot(now=later).degraded == paused


# ---------------------------------------------------------------------------------------
# b. complete contains poison outcomes
# ---------------------------------------------------------------------------------------


@st.composite
def outcome_specs(draw: st.DrawFn) -> dict[str, Any]:
    status = draw(st.sampled_from(["succeeded", "skipped", "failed", "failed", "degraded"]))
    return {
        "status": status,
        "error_type": draw(st.one_of(st.just(""), st.sampled_from(["RuntimeError"]), TEXT)),
        "error_message": draw(TEXT),
        "result": draw(JSON_VALUES),
        "retry_after": draw(st.one_of(st.none(), FLOATS, HUGE_INTS, st.booleans())),
        "terminal": draw(st.booleans()),
    }


@POISON_PROFILE
@given(
    specs=st.lists(outcome_specs(), min_size=1, max_size=5),
    max_attempts=st.lists(st.sampled_from([1, 3]), min_size=5, max_size=5),
    took=st.floats(min_value=0, max_value=5),
)
def test_complete_contains_poison_outcomes(specs, max_attempts, took):
    """Generated outcomes of one batch: ``complete`` never raises; each attempt gets
    exactly one receipt of the outcome's status; receipt text is valid (a repaired text is
    marked as repaired) and a valid outcome is recorded as given; every next run is at
    most ~30 days ahead."""
    wipe()
    now = db_now()
    for i, _ in enumerate(specs):
        healthy(f"done-{i}", "interval", now, max_attempts=max_attempts[i])
    claims = sorted(state.claim_due(worker="totality", now=now), key=lambda c: c.schedule_name)
    assert len(claims) == len(specs)
    outcomes = [
        state.Outcome(
            claim,
            spec["status"],
            result=spec["result"] if spec["status"] != "degraded" else None,
            error_type=spec["error_type"],
            error_message=spec["error_message"],
            terminal=spec["terminal"],
            retry_after=spec["retry_after"],
        )
        for claim, spec in zip(claims, specs, strict=True)
    ]
    done_at = now + timedelta(seconds=took)

    state.complete(outcomes, now=done_at)

    receipts = assert_one_receipt_each([c.attempt_id for c in claims])
    max_chars = app_settings.ERROR_MESSAGE_MAX_CHARS
    for outcome in outcomes:
        receipt = receipts[outcome.claim.attempt_id]
        what = f"{outcome.claim.schedule_name} ({outcome.status})"
        assert receipt.status == outcome.status, what
        assert_text_receipted(receipt.error_type, outcome.error_type, 200, f"{what} error_type")
        after = outcome.retry_after
        valid_after = after is None or (type(after) in (int, float) and 0 <= after <= 30 * 86400)
        assert_text_receipted(
            receipt.error_message,
            outcome.error_message,
            max_chars,
            f"{what} error_message",
            note="" if valid_after else "after_seconds",
        )
        assert not json_problems(receipt.result), f"{what}: {json_problems(receipt.result)}"
        if clean_json(outcome.result) and len(json.dumps(outcome.result)) <= 2000:
            assert receipt.result == outcome.result, f"{what}: result not recorded as given"
        assert_bounded(receipt.next_run_at, done_at, f"{what} receipt.next_run_at")
        row = Schedule.objects.get(pk=outcome.claim.schedule_id)
        assert row.lease_token is None
        assert_bounded(row.next_run_at, done_at, f"{what} next_run_at")
        if row.next_run_at is not None:
            assert row.next_run_at >= timing.truncate_to_second(done_at), what
        after = outcome.retry_after
        retried = outcome.status == "failed" and not outcome.terminal and row.max_attempts > 1
        if retried and type(after) in (int, float) and 0 <= after <= 86400:  # not NaN
            # A valid delay is honoured (to the whole second after it).
            assert row.next_run_at == ceil_second(done_at + timedelta(seconds=after)), what
        if outcome.status == "degraded":
            assert row.status == "paused" and not text_problems(row.degraded_reason)


# ---------------------------------------------------------------------------------------
# b'. runner.execute + complete contain poison callbacks
# ---------------------------------------------------------------------------------------


def expected_status(spec: dict[str, Any]) -> tuple[str, bool]:
    """(receipt status, terminal) that a ``tests.poison`` spec must end in."""
    name = spec.get("raise")
    if name is None:
        return "succeeded", False
    if "args" in spec and name in ("SkipRun", "RetryRun", "FailRun") and len(spec["args"]) > 1:
        return "failed", False  # they take one reason: the callback's own TypeError
    if name == "SkipRun":
        return "skipped", False
    return "failed", name == "FailRun"


@POISON_PROFILE
@given(spec=poison_specs(), siblings=st.integers(min_value=0, max_value=3))
def test_runner_contains_poison_callbacks(spec, siblings):
    """A callback raising or returning generated values, run with ``runner.execute`` and
    completed in a batch with healthy runs: nothing raises, one receipt per attempt, valid
    text and JSON, a bounded result and next run; the healthy runs record their result."""
    wipe()
    now = db_now()
    healthy("poisoned", "interval", now, callback="tests.poison", payload={"poison": spec})
    for i in range(siblings):
        healthy(f"sibling-{i}", "interval", now, callback="tests.echo", payload={"i": i})
    claims = state.claim_due(worker="totality", now=now)
    assert len(claims) == 1 + siblings

    outcomes = [runner.execute(c) for c in claims]

    [poisoned] = [o for o in outcomes if o.claim.callback == "tests.poison"]
    status, terminal = expected_status(spec)
    assert (poisoned.status, poisoned.terminal) == (status, terminal)
    done_at = now + S
    state.complete(outcomes, now=done_at)

    receipts = assert_one_receipt_each([c.attempt_id for c in claims])
    for outcome in outcomes:
        receipt = receipts[outcome.claim.attempt_id]
        assert not text_problems(receipt.error_type) and not text_problems(receipt.error_message)
        assert len(receipt.error_message) <= app_settings.ERROR_MESSAGE_MAX_CHARS + 100
        assert not json_problems(receipt.result), json_problems(receipt.result)
        size = len(json.dumps(receipt.result, ensure_ascii=False).encode())
        assert size <= app_settings.RESULT_MAX_BYTES
        assert_bounded(receipt.next_run_at, done_at, "receipt.next_run_at")
        row = Schedule.objects.get(pk=outcome.claim.schedule_id)
        assert row.lease_token is None
        assert_bounded(row.next_run_at, done_at, f"{row.name} next_run_at")
        if outcome.claim.callback == "tests.echo":
            assert receipt.status == "succeeded"
            assert receipt.result == {"payload": row.payload, "occurrence": 1, "attempt": 1}
    assert receipts[poisoned.claim.attempt_id].status == status


def test_runner_contains_a_base_exception_from_a_callback():
    """A callback raising a ``BaseException`` that is not an ``Exception`` (nor
    ``SystemExit``) is still one run's outcome: ``runner.execute`` never raises."""
    wipe()
    now = db_now()
    spec = {"raise": "PoisonBaseError", "message": {"cps": [0x62, 0, 0xD800]}}
    healthy("base", "interval", now, callback="tests.poison", payload={"poison": spec})
    [claim] = state.claim_due(worker="totality", now=now)
    outcome = runner.execute(claim)
    assert outcome.status == "failed"
    state.complete([outcome], now=now + S)
    assert_one_receipt_each([claim.attempt_id])


# ---------------------------------------------------------------------------------------
# c. a real worker survives poison
# ---------------------------------------------------------------------------------------


def worker_poisons() -> st.SearchStrategy[tuple[str, str, Any]]:
    """Poison values a worker meets mid-run (interval rows: the kind does not matter)."""
    return poisons().filter(lambda p: p[1] != "cron")


def small_poison_specs() -> st.SearchStrategy[dict[str, Any]]:
    fixed = [
        {"raise": "RuntimeError", "message": {"cps": [0x62, 0, 0x6F, 0xD800, 0x6D]}},
        {"raise": "SkipRun", "message": {"cps": [0xDFFF, 0], "times": 3000}},
        {"raise": "RetryRun", "message": {"cps": [0]}, "after": ["float", "inf"]},
        {"raise": "RetryRun", "message": {"cps": [0xD800]}, "after": ["float", "nan"]},
        {"raise": "RetryRun", "message": {"cps": [0x78]}, "after": ["float", "-1"]},
        {"raise": "RetryRun", "message": {"cps": [0x78]}, "after": ["float", "1.8e12"]},
        {"raise": "RetryRun", "message": {"cps": [0x78]}, "after": ["int", "1" + "0" * 400]},
        {"raise": "PoisonBaseError", "message": {"cps": [0]}},
        {"return": ["dict", [[["text", {"cps": [0]}], ["text", {"cps": [0xD800]}]]]]},
        {"return": ["cycle"]},
        {"return": ["num", ["float", "nan"]]},
        {"return": ["num", ["int", "9" * 5000]]},
        {"return": ["hostile"]},
    ]
    return st.one_of(st.sampled_from(fixed), poison_specs())


@pytest.mark.process
@settings(
    max_examples=WORKER_EXAMPLES,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: each try is seconds
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    poisoned=st.lists(
        st.tuples(worker_poisons(), st.sampled_from(["update", "sql"]), st.booleans()),
        min_size=1,
        max_size=3,
    ),
    specs=st.lists(small_poison_specs(), min_size=1, max_size=3),
)
def test_worker_survives_poison(start_worker, poisoned, specs):
    """A real ``run_scheduler`` with healthy schedules, rows poisoned behind ``save()``
    while it runs them, and callbacks raising or returning poison: the worker never exits
    by itself, every attempt gets exactly one receipt, the poisoned rows end paused with a
    reason, and the healthy schedules keep succeeding. SIGTERM still exits 0."""
    wipe()
    now = db_now()
    ok = [
        healthy(f"w-ok-{i}", "interval", now, interval_seconds=1, callback="tests.echo")
        for i in range(3)
    ]
    rows = [
        healthy(f"w-row-{i}", "interval", now, interval_seconds=1) for i in range(len(poisoned))
    ]
    bad = [
        healthy(
            f"w-cb-{i}",
            "interval",
            now,
            interval_seconds=1,
            callback="tests.poison",
            payload={"poison": spec},
            max_attempts=2,
            backoff_base_seconds=0.5,
            backoff_cap_seconds=1.0,
        )
        for i, spec in enumerate(specs)
    ]
    wid = f"totality-{uuid.uuid4().hex[:8]}"
    worker = start_worker(
        "--worker-id", wid, "--max-idle", "0.5", "--lease-seconds", "5", "--concurrency", "4"
    )

    def alive(predicate):
        def check():
            code = worker.proc.poll()
            assert code is None, f"the worker exited by itself ({code}):\n{worker.output()[-4000:]}"
            return predicate()

        return check

    def receipted(row: Schedule, n: int = 1, **filters: Any) -> bool:
        return RunReceipt.objects.filter(schedule_id=row.pk, **filters).count() >= n

    wait_until(alive(lambda: all(receipted(r) for r in rows)), 30, message="first runs")
    # Mid-run: poison the rows behind save() while the worker goes on.
    for row, ((_kind, field, value), via, rehash) in zip(rows, poisoned, strict=True):
        write_behind_save(row, field, value, via=via, rehash=rehash and field in DEFINITION_FIELDS)
    expect_degraded = []
    for row in rows:
        row.refresh_from_db()
        problem = row_problem(row)
        note(f"{row.name}: {problem or 'valid'}")
        if problem is not None and problem not in BOUNDED_FIELDS:
            expect_degraded.append(row)  # (a bounded duration may also pause it: not asked)
    base = {
        r.pk: RunReceipt.objects.filter(schedule_id=r.pk, status="succeeded").count() for r in ok
    }

    def unsettled() -> list[str]:
        waiting = [
            f"{r.name} not paused as degraded"
            for r in expect_degraded
            if not Schedule.objects.filter(pk=r.pk, status="paused")
            .exclude(degraded_reason="")
            .exists()
        ]
        waiting += [
            f"{r.name}: fewer than 2 successes since the poison"
            for r in ok
            if not receipted(r, base[r.pk] + 2, status="succeeded")
        ]
        waiting += [f"{r.name}: no receipt" for r in bad if not receipted(r)]
        return waiting

    try:
        wait_until(alive(lambda: not unsettled()), 30, message="the poison to settle")
    except AssertionError:
        rows_now = list(
            Schedule.objects.values_list("name", "status", "next_run_at", "degraded_reason")
        )
        receipts_now = list(
            RunReceipt.objects.values_list("schedule__name", "status", "error_message")
        )
        raise AssertionError(
            f"not settled: {unsettled()}\nrows: {rows_now}\nreceipts: {receipts_now[-30:]}\n"
            f"worker log:\n{worker.output()[-6000:]}"
        ) from None
    time.sleep(1.0)  # a little more of the mix
    assert worker.proc.poll() is None, worker.output()[-4000:]
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0, worker.output()[-4000:]

    receipts = assert_one_receipt_each(list(RunAttempt.objects.values_list("id", flat=True)))
    for receipt in receipts.values():
        assert not text_problems(receipt.error_type) and not text_problems(receipt.error_message)
        assert not json_problems(receipt.result), json_problems(receipt.result)
    stopped = state.db_now()
    for row in Schedule.objects.all():
        assert row.lease_token is None, row.name
        assert_bounded(row.next_run_at, stopped, f"{row.name} next_run_at")
    for row in expect_degraded:
        row.refresh_from_db()
        assert row.status == "paused" and row.degraded_reason, row.name
        assert RunReceipt.objects.filter(schedule_id=row.pk, status="degraded").count() == 1
    paused = Schedule.objects.filter(status="paused").exclude(degraded_reason="").count()
    assert health.snapshot().degraded == paused >= len(expect_degraded)
