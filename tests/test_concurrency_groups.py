"""Concurrency groups (issue #28, item 1): a claim never grants more live leases in a group
than its ``max_running``, nor more starts per window than its ``rate``; a row held back
stays due and is claimed later, never lost; a group at its limit never blocks the other
schedules; a group whose rate cannot be read starts nothing and harms nothing else.

The rule (:func:`~django_durable_schedules.state.group_rules.admit`) with Hypothesis; the
claim on real databases through ``state.claim_due`` with an injected clock (run on
SQLite, PostgreSQL and MariaDB)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import DataError
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from django_durable_schedules import state
from django_durable_schedules.limits import RATE_HOLD_MAX_SECONDS
from django_durable_schedules.models import ConcurrencyGroup, Schedule, parse_rate
from django_durable_schedules.state.group_rules import GroupRoom, admit, rate_window

from .conftest import server_examples
from .factories import T0, due_schedules

S = timedelta(seconds=1)
NOW = T0 + 3600 * S


def names(claims):
    return sorted(c.schedule_name for c in claims)


# -- the rule ------------------------------------------------------------------------------


def test_rates_parse_and_bad_ones_are_field_errors():
    assert parse_rate("10/m").count == 10 and parse_rate("10/m").seconds == 60
    assert parse_rate(" 2 / s ").seconds == 1
    assert parse_rate("") is None
    for bad in ("0/s", "10", "10/d", "x/m", "10001/s", 5):
        with pytest.raises(ValidationError) as info:
            parse_rate(bad)
        assert "rate" in info.value.message_dict


@settings(max_examples=200, deadline=None)
@given(
    max_running=st.one_of(st.none(), st.integers(1, 5)),
    rate=st.one_of(st.none(), st.tuples(st.integers(1, 5), st.sampled_from([1, 60]))),
    running=st.integers(0, 6),
    claims=st.lists(
        st.tuples(st.floats(0, 5, allow_nan=False), st.integers(0, 8)), min_size=1, max_size=12
    ),
)
def test_admit_never_exceeds_the_cap_nor_the_rate(max_running, rate, running, claims):
    if max_running is None and rate is None:
        max_running = 2
    room = GroupRoom(
        max_running=max_running,
        rate_count=rate[0] if rate else None,
        rate_seconds=rate[1] if rate else None,
        running=min(running, max_running or running),
    )
    started = room.running
    starts = []
    at = T0
    for gap, batch in claims:
        at = at + timedelta(seconds=gap)
        admitted, held, changes = admit(list(range(batch)), lambda _: "g", {"g": room}, at)
        assert len(admitted) + len(held) == batch  # every row started or held, none lost
        starts += [at.timestamp()] * len(admitted)
        started += len(admitted)
        if max_running is not None:
            assert room.running <= max_running
        assert set(changes) == ({"g"} if batch else set())
    if rate is not None:
        window = rate_window(rate[1])
        for first in starts:  # any window as long as the rate's holds at most its count
            assert sum(1 for t in starts if first <= t < first + window) <= rate[0]


@settings(max_examples=300, deadline=None)
@given(
    count=st.integers(1, 4),
    claims=st.lists(
        st.tuples(st.floats(0, 4, allow_nan=False), st.integers(0, 3)), min_size=1, max_size=12
    ),
)
def test_claims_admitted_out_of_the_order_of_their_instants_never_exceed_the_rate(count, claims):
    """A claim reads its ``now`` before it waits for the group's lock: claims are admitted
    in lock order, their instants in any order. Each one reads the group's row as the
    previous one wrote it (:func:`.groups.room_of`, :func:`.group_rules.group_columns`);
    over the instants the attempts record, any window holds at most the rate's count."""
    from django_durable_schedules.state.groups import room_of

    group = ConcurrencyGroup(name="rated", rate=f"{count}/s", starts=[])
    starts = []
    for offset, batch in claims:
        at = T0 + timedelta(seconds=offset)
        room = room_of(group, 0, at)
        admitted, held, changes = admit(list(range(batch)), lambda _: "g", {"g": room}, at)
        if changes:
            group.starts = changes["g"]["starts"]
        starts += [at.timestamp()] * len(admitted)
    window = rate_window(1)
    for first in starts:
        assert sum(1 for t in starts if first <= t < first + window) <= count


def test_rows_of_no_group_are_always_admitted():
    admitted, held, changes = admit([1, 2, 3], lambda _: None, {}, T0)
    assert (admitted, held, changes) == ([1, 2, 3], [], {})


# -- the claim ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_group_caps_the_live_leases_and_a_finished_run_makes_room():
    group = ConcurrencyGroup.objects.create(name="partner-api", max_running=3)
    due_schedules(10, prefix="g", spacing=1, concurrency_group=group)
    first = state.claim_due(worker="w", limit=10, now=NOW)
    assert names(first) == ["g-0000", "g-0001", "g-0002"]  # the earliest due, 3 at most
    group.refresh_from_db()
    assert group.full_until is not None  # later claims skip the group's rows
    assert state.claim_due(worker="w", limit=10, now=NOW + S) == []
    state.complete([state.Outcome(first[0], "succeeded")], now=NOW + 2 * S)
    group.refresh_from_db()
    assert group.full_until is None  # the finished run freed a place
    second = state.claim_due(worker="w", limit=10, now=NOW + 3 * S)
    assert names(second) == ["g-0003"]
    leased = Schedule.objects.filter(concurrency_group=group, lease_token__isnull=False)
    assert leased.count() == 3
    # Nothing was lost: the held rows are due and unleased.
    assert Schedule.objects.filter(concurrency_group=group, lease_token__isnull=True).count() == 7


@pytest.mark.django_db(transaction=True)
def test_a_group_at_its_limit_never_blocks_the_other_schedules():
    group = ConcurrencyGroup.objects.create(name="reports", max_running=2)
    due_schedules(50, prefix="grouped", spacing=1, concurrency_group=group)  # due first
    due_schedules(20, prefix="free", offset=100, spacing=1)  # due later, no group
    first = state.claim_due(worker="w", limit=20, now=NOW)
    # The group's two places, and the batch filled with the rows of no group that come
    # after its 48 held ones in due order: the full group did not cost them their place.
    assert len([c for c in first if c.schedule_name.startswith("grouped")]) == 2
    assert len([c for c in first if c.schedule_name.startswith("free")]) == 18
    second = state.claim_due(worker="w", limit=20, now=NOW)
    assert names(second) == ["free-0018", "free-0019"]  # the group's rows skipped unread


@pytest.mark.django_db(transaction=True)
def test_a_rate_limits_starts_per_window():
    group = ConcurrencyGroup.objects.create(name="mailer", rate="2/s")
    due_schedules(6, prefix="g", spacing=1, concurrency_group=group)
    first = state.claim_due(worker="w", limit=10, now=NOW)
    assert len(first) == 2
    state.complete([state.Outcome(c, "succeeded") for c in first], now=NOW + 0.1 * S)
    assert state.claim_due(worker="w", limit=10, now=NOW + 0.5 * S) == []
    # The window is the rate's second plus its margin (10%): free again after 1.1 s.
    assert state.claim_due(worker="w", limit=10, now=NOW + 1.05 * S) == []
    assert len(state.claim_due(worker="w", limit=10, now=NOW + 1.2 * S)) == 2


@pytest.mark.django_db(transaction=True)
def test_a_rate_written_behind_save_that_cannot_be_read_holds_only_its_group():
    group = ConcurrencyGroup.objects.create(name="broken", rate="5/s")
    ConcurrencyGroup.objects.filter(pk=group.pk).update(rate="five a second")
    due_schedules(3, prefix="held", spacing=1, concurrency_group=group)
    due_schedules(3, prefix="free", offset=10, spacing=1)
    claims = state.claim_due(worker="w", limit=10, now=NOW)
    assert names(claims) == ["free-0000", "free-0001", "free-0002"]
    assert Schedule.objects.filter(name__startswith="held", lease_token__isnull=True).count() == 3


@pytest.mark.django_db(transaction=True)
def test_the_schedules_api_names_the_group_and_refuses_an_unknown_one(admin_client):
    ConcurrencyGroup.objects.create(name="partner-api", max_running=1)
    body = {
        "name": "grouped",
        "callback": "tests.noop",
        "kind": "interval",
        "interval_seconds": 60,
        "concurrency_group": "partner-api",
    }
    made = admin_client.post("/api/schedules/", body, content_type="application/json")
    assert made.status_code == 201, made.json()
    assert made.json()["concurrency_group"] == "partner-api"
    body.update(name="other", concurrency_group="nope")
    refused = admin_client.post("/api/schedules/", body, content_type="application/json")
    assert refused.status_code == 400
    assert "concurrency_group" in refused.json()


# -- run state written behind save() ---------------------------------------------------------

#: A run-state instant the engine never writes, per database: SQLite stores any text,
#: PostgreSQL an infinite timestamp, MariaDB a year no claim reaches.
UNREADABLE_INSTANT = {
    "sqlite": "not a time",
    "postgresql": "infinity",
    "mysql": "8999-12-31 23:59:59",
}


def _write_behind_save(group, column, value):
    from django.db import connection

    table = ConcurrencyGroup._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {connection.ops.quote_name(table)} SET {column} = %s WHERE id = %s",
            [value, group.pk],
        )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("column", ["full_until", "rate_until"])
def test_a_run_state_instant_the_engine_never_writes_is_refused_or_holds_nothing(column):
    """A ``full_until`` or ``rate_until`` written behind ``save()`` either never lands (a
    constraint refuses it) or, for a readable instant later than any hold a claim writes,
    holds nothing: the group's rows are claimed and the claim writes its own values."""
    from django.db import IntegrityError, connection

    group = ConcurrencyGroup.objects.create(name="odd-state", max_running=2)
    due_schedules(3, prefix="grouped", spacing=1, concurrency_group=group)
    due_schedules(2, prefix="free", offset=10, spacing=1)
    try:
        _write_behind_save(group, column, UNREADABLE_INSTANT[connection.vendor])
    except IntegrityError:
        assert connection.vendor != "mysql"  # a readable instant is allowed, held to nothing
    claims = state.claim_due(worker="w", limit=10, now=NOW)
    assert names(claims) == ["free-0000", "free-0001", "grouped-0000", "grouped-0001"]
    group.refresh_from_db()  # readable again: the claim wrote its own hold
    assert group.full_until is not None and group.full_until <= NOW + 5 * S
    assert group.rate_until is None
    from django_durable_schedules.health import snapshot

    assert not [p for p in snapshot().problems if "odd-state" in p]  # health reads it


@pytest.mark.django_db(transaction=True)
@given(
    starts=st.one_of(
        st.lists(
            st.one_of(
                st.floats(allow_nan=False, allow_infinity=False),
                st.integers(min_value=-(2**62), max_value=2**62),
                st.sampled_from([NOW.timestamp(), NOW.timestamp() - 0.5, NOW.timestamp() + 9]),
                st.text(max_size=3),
                st.none(),
                st.booleans(),
            ),
            max_size=6,
        ),
        st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
        st.integers(),
        st.text(max_size=4),
    )
)
@settings(max_examples=server_examples(40), deadline=None)  # what each vendor lets in
def test_any_recorded_starts_written_behind_save_never_break_the_claim(starts):
    """``starts`` is JSON any writer can fill: huge, negative or not numbers at all (the
    databases refuse what is not JSON). The claim keeps only the starts of the rate's window that could have happened and
    goes on; the rows of other groups and of none are claimed as usual."""
    Schedule.objects.all().delete()
    ConcurrencyGroup.objects.all().delete()
    group = ConcurrencyGroup.objects.create(name="odd-starts", rate="2/s", max_running=5)
    try:
        ConcurrencyGroup.objects.filter(pk=group.pk).update(starts=starts)
    except DataError:  # PostgreSQL's jsonb refuses a NUL in a text: no row holds it
        reject()
    due_schedules(2, prefix="grouped", spacing=1, concurrency_group=group)
    due_schedules(2, prefix="free", offset=10, spacing=1)
    claims = state.claim_due(worker="w", limit=10, now=NOW)
    at = NOW.timestamp()
    listed = starts if isinstance(starts, list) else []
    numbers = [t for t in listed if isinstance(t, int | float) and not isinstance(t, bool)]
    # A start up to an hour ahead is a concurrent claim's (kept); a later one is dropped.
    counted = [t for t in numbers if at - rate_window(1) < t <= at + RATE_HOLD_MAX_SECONDS]
    room = max(0, 2 - len(counted))
    assert names(claims) == ["free-0000", "free-0001", *[f"grouped-{i:04d}" for i in range(room)]]


def test_starts_a_concurrent_claim_recorded_after_this_claims_now_still_count():
    """A claim reads its ``now`` before it waits for the group's lock: the starts another
    claim recorded meanwhile lie a little after it, and must fill the rate (found by the
    chaos soak: 5 claims in a window of a 3/s group on PostgreSQL)."""
    from django_durable_schedules.state.group_rules import has_room
    from django_durable_schedules.state.groups import room_of

    group = ConcurrencyGroup(name="rated", rate="3/s", starts=[])
    at = NOW.timestamp()
    group.starts = [at - 0.5, at + 0.05, at + 0.08]
    room = room_of(group, 0, NOW)
    assert len(room.starts) == 3
    assert not has_room(room, at)
