"""Chaining's pure rules (:mod:`django_durable_schedules.state.chain_rules`) and the
constraints of its tables (:mod:`django_durable_schedules.models.chains`), on every
database: issue #30 item 1's foundation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.db import IntegrityError, transaction
from django.db.models import ProtectedError
from hypothesis import given, settings
from hypothesis import strategies as st

from django_durable_schedules.models import ChainSlot, ChainSlotStatus, Schedule, ScheduleLink
from django_durable_schedules.state.chain_rules import (
    OpenSlot,
    closure,
    grid_of,
    link_problems,
    note_done,
    settle_slots,
)
from django_durable_schedules.state.chains import (
    note_upstream_successes,
    settle_chain_slots,
    write_chain_slots,
)

T0 = datetime(2026, 12, 7, 2, 0, tzinfo=UTC)


def _row(kind: str, **fields: object) -> SimpleNamespace:
    base: dict[str, object] = {
        "kind": kind,
        "interval_seconds": None,
        "cron": "",
        "rrule": "",
        "extra_specs": [],
        "timezone": "UTC",
        "run_at": None,
        "anchor": T0,
    }
    base.update(fields)
    return SimpleNamespace(**base)


# -- grids --


def test_same_cron_in_the_same_zone_is_one_grid_and_another_zone_another() -> None:
    paris = grid_of(_row("cron", cron="0 2 * * *", timezone="Europe/Paris"))
    assert paris == grid_of(_row("cron", cron="0 2 * * *", timezone="Europe/Paris"))
    assert paris != grid_of(_row("cron", cron="0 2 * * *", timezone="UTC"))
    assert paris != grid_of(_row("cron", cron="0 3 * * *", timezone="Europe/Paris"))


def test_an_interval_grid_is_its_anchor_too() -> None:
    a = grid_of(_row("interval", interval_seconds=60))
    assert a == grid_of(_row("interval", interval_seconds=60))
    assert a != grid_of(_row("interval", interval_seconds=60, anchor=T0 + timedelta(seconds=1)))


def test_extra_specs_are_part_of_the_grid_in_any_order() -> None:
    one = grid_of(_row("cron", cron="0 2 * * *", extra_specs=["0 9 * * 1", "0 3 * * *"]))
    two = grid_of(_row("cron", cron="0 2 * * *", extra_specs=["0 3 * * *", "0 9 * * 1"]))
    assert one == two != grid_of(_row("cron", cron="0 2 * * *"))


@pytest.mark.parametrize("kind", ["manual", "after"])
def test_a_kind_without_a_grid_of_its_own_has_none(kind: str) -> None:
    assert grid_of(_row(kind)) is None


# -- link problems --

NAMES = {"a": "import", "b": "aggregate", "c": "mail", "m": "by-hand", "x": "other"}
DAILY = grid_of(_row("cron", cron="0 2 * * *"))
HOURLY = grid_of(_row("cron", cron="0 * * * *"))
GRIDS = {"a": DAILY, "x": DAILY, "h": HOURLY, "b": None, "c": None, "m": None}
KINDS = {"a": "cron", "x": "cron", "h": "cron", "b": "after", "c": "after", "m": "manual"}


def _problems(down: str, ups: list[str], links: dict[str, list[str]]) -> list[str]:
    return link_problems(down, ups, links, GRIDS, KINDS, NAMES)


def test_a_chain_on_one_grid_is_accepted() -> None:
    assert _problems("b", ["a"], {}) == []
    assert _problems("c", ["b"], {"b": ["a"]}) == []
    assert _problems("c", ["b", "x"], {"b": ["a"]}) == []  # b's roots and x share a grid


def test_no_upstream_itself_and_manual_are_refused_with_the_names() -> None:
    assert "at least one upstream" in _problems("b", [], {})[0]
    assert any("cannot run after itself" in p for p in _problems("b", ["b"], {}))
    (manual,) = _problems("b", ["m"], {})
    assert "'by-hand' is a manual schedule" in manual


def test_a_cycle_is_refused_naming_the_schedule_that_closes_it() -> None:
    # c runs after b, b after a: a (kind after here) after c closes a cycle.
    kinds = {**KINDS, "a": "after"}
    grids = {**GRIDS, "a": None, "r": DAILY}
    problems = link_problems("a", ["c"], {"c": ["b"], "b": ["a"]}, grids, kinds, NAMES)
    assert any("a cycle: 'mail' already runs after 'import'" in p for p in problems)


def test_upstreams_on_different_grids_are_refused() -> None:
    (problem,) = _problems("b", ["a", "h"], {})
    assert "different grids" in problem and "'import'" in problem


# -- closure --


def test_closure_is_breadth_first_once_each_and_ends_on_a_cycle() -> None:
    links = {"a": ["b", "x"], "b": ["c"], "x": ["c"], "c": ["a"]}
    assert closure(["a"], links) == ["b", "x", "c", "a"]
    assert closure(["z"], links) == []


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.integers(0, 8), st.lists(st.integers(0, 8), max_size=4), max_size=9))
def test_closure_is_exactly_the_reachable_set(links: dict[int, list[int]]) -> None:
    """Any graph, cyclic or not: each node reachable by one or more edges, once."""
    found = closure([0], links)
    reach: set[int] = set()
    frontier = {0}
    while frontier:
        frontier = {d for n in frontier for d in links.get(n, [])} - reach
        reach |= frontier
    assert sorted(found) == sorted(reach) and len(found) == len(set(found))


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.integers(1, 6), st.lists(st.integers(0, 6), max_size=3), max_size=6),
    st.integers(1, 6),
    st.lists(st.integers(0, 6), min_size=1, max_size=3),
)
def test_an_accepted_link_never_closes_a_cycle(
    upstreams_of: dict[int, list[int]], down: int, ups: list[int]
) -> None:
    """Whatever the graph around it, a link set that the rule accepts leaves ``down`` not
    upstream of itself (node 0 is the one root with a grid; the others are kind after)."""
    grids = {n: (DAILY if n == 0 else None) for n in range(7)}
    kinds = {n: ("cron" if n == 0 else "after") for n in range(7)}
    upstreams_of = {k: v for k, v in upstreams_of.items() if k != 0}  # a root has none
    if link_problems(down, ups, upstreams_of, grids, kinds, {}):
        return
    graph = {**upstreams_of, down: ups}
    stack, seen = list(ups), set()
    while stack:
        node = stack.pop()
        assert node != down
        if node not in seen:
            seen.add(node)
            stack.extend(graph.get(node, []))


# -- slots --


def test_note_done_is_idempotent_and_ready_once_every_upstream_is_in() -> None:
    done, ready = note_done([], "a", ["a", "x"])
    assert (done, ready) == (["a"], False)
    done, ready = note_done(done, "a", ["a", "x"])  # a re-run of the same slot
    assert (done, ready) == (["a"], False)
    assert note_done(done, "x", ["a", "x"]) == (["a", "x"], True)
    assert note_done({"behind": "save()"}, "a", ["a"]) == (["a"], True)
    assert note_done(["a"], "a", []) == (["a"], False)  # no link left: never ready


def _slot(minutes: int, ready: bool, wait: int = 60) -> OpenSlot:
    at = T0 + timedelta(minutes=minutes)
    return OpenSlot(minutes, at, at + timedelta(minutes=wait), ready)


def test_settle_counts_expired_waiting_slots_and_runs_the_oldest_ready_one() -> None:
    now = T0 + timedelta(minutes=90)
    settled = settle_slots(
        [_slot(60, True), _slot(0, False), _slot(20, False, 100), _slot(30, True)], now
    )
    assert [s.key for s in settled.missed] == [0]
    assert settled.run is not None and settled.run.key == 30
    late_but_ready = settle_slots([_slot(0, True)], now)
    assert late_but_ready.run is not None and late_but_ready.missed == ()


# -- the tables' constraints, on every database --


def _schedule(name: str) -> Schedule:
    return Schedule.objects.create(
        name=name, callback="tests.noop", kind="interval", interval_seconds=60
    )


@pytest.mark.django_db(transaction=True)
def test_the_database_refuses_a_self_link_a_duplicate_and_deleting_an_upstream() -> None:
    a, b = _schedule("chain-a"), _schedule("chain-b")
    ScheduleLink.objects.create(downstream=b, upstream=a)
    assert list(b.upstream.all()) == [a] and list(a.downstream.all()) == [b]
    with pytest.raises(IntegrityError), transaction.atomic():
        ScheduleLink.objects.create(downstream=b, upstream=a)
    with pytest.raises(IntegrityError), transaction.atomic():
        ScheduleLink.objects.create(downstream=a, upstream=a)
    with pytest.raises(ProtectedError):
        a.delete()
    b.delete()  # a downstream goes with its links
    assert not ScheduleLink.objects.exists()
    a.delete()


@pytest.mark.django_db(transaction=True)
def test_a_chain_slot_is_one_per_instant_with_a_deadline_not_before_it() -> None:
    b = _schedule("chain-slots")
    ChainSlot.objects.create(downstream=b, scheduled_for=T0, deadline=T0 + timedelta(hours=1))
    with pytest.raises(IntegrityError), transaction.atomic():
        ChainSlot.objects.create(downstream=b, scheduled_for=T0, deadline=T0)
    with pytest.raises(IntegrityError), transaction.atomic():
        ChainSlot.objects.create(downstream=b, scheduled_for=T0 + timedelta(days=1), deadline=T0)
    with pytest.raises(IntegrityError), transaction.atomic():
        ChainSlot.objects.create(
            downstream=b,
            scheduled_for=T0 + timedelta(days=2),
            deadline=T0 + timedelta(days=3),
            status="bogus",
        )
    assert list(ChainSlot.objects.open().values_list("status", flat=True)) == [
        ChainSlotStatus.WAITING
    ]


@pytest.mark.django_db(transaction=True)
def test_wait_seconds_out_of_range_is_refused_by_the_database() -> None:
    row = _schedule("chain-wait")
    assert row.wait_seconds == 3600
    with pytest.raises(IntegrityError), transaction.atomic():
        Schedule.objects.filter(pk=row.pk).update(wait_seconds=0)
    with pytest.raises(IntegrityError), transaction.atomic():
        Schedule.objects.filter(pk=row.pk).update(wait_seconds=31 * 86400 + 1)


# -- the database side (state/chains.py), inside a transaction as the engine calls it --


def _chain(*names: str) -> list[Schedule]:
    """Schedules ``names``, each downstream of the one before (links written directly)."""
    rows = [_schedule(n) for n in names]
    for up, down in zip(rows, rows[1:], strict=False):
        ScheduleLink.objects.create(downstream=down, upstream=up)
    return rows


@pytest.mark.django_db(transaction=True)
def test_a_claimed_upstream_instant_gives_each_schedule_of_its_closure_one_waiting_slot() -> None:
    a, b, c = _chain("wc-a", "wc-b", "wc-c")
    Schedule.objects.filter(pk=c.pk).update(wait_seconds=7200)
    with transaction.atomic():
        meant = write_chain_slots([(a.pk, T0)], "default")
    assert meant == [(b.pk, T0), (c.pk, T0)]
    with transaction.atomic():  # a retry of the same occurrence: nothing new
        write_chain_slots([(a.pk, T0)], "default")
    slots = {s.downstream_id: s for s in ChainSlot.objects.all()}
    assert len(slots) == 2 and ChainSlot.objects.count() == 2
    assert slots[b.pk].deadline == T0 + timedelta(hours=1)
    assert slots[c.pk].deadline == T0 + timedelta(hours=2)
    assert {s.status for s in slots.values()} == {ChainSlotStatus.WAITING}
    assert write_chain_slots([], "default") == []


@pytest.mark.django_db(transaction=True)
def test_a_slot_is_ready_once_every_upstream_succeeded_and_a_second_success_changes_nothing() -> (
    None
):
    a, x, b = _schedule("ns-a"), _schedule("ns-x"), _schedule("ns-b")
    ScheduleLink.objects.create(downstream=b, upstream=a)
    ScheduleLink.objects.create(downstream=b, upstream=x)
    with transaction.atomic():
        assert note_upstream_successes([(a.pk, T0)], "default") == []
    with transaction.atomic():  # a re-run of a's slot
        assert note_upstream_successes([(a.pk, T0)], "default") == []
    with transaction.atomic():
        assert note_upstream_successes([(x.pk, T0)], "default") == [b.pk]
    slot = ChainSlot.objects.get()
    assert slot.status == ChainSlotStatus.READY
    assert sorted(slot.done) == sorted([str(a.pk), str(x.pk)])
    with transaction.atomic():  # after it became ready: nothing moves
        assert note_upstream_successes([(x.pk, T0)], "default") == []
    assert note_upstream_successes([(b.pk, T0)], "default") == []  # no downstream: no statement


@pytest.mark.django_db(transaction=True)
def test_settling_counts_the_expired_waiting_slots_and_runs_the_oldest_ready_one() -> None:
    a, b = _chain("st-a", "st-b")
    with transaction.atomic():
        write_chain_slots([(a.pk, T0 + timedelta(minutes=m)) for m in (0, 30, 60)], "default")
    with transaction.atomic():
        note_upstream_successes([(a.pk, T0 + timedelta(minutes=60))], "default")
    now = T0 + timedelta(minutes=75)  # the slot of 0 expired, that of 30 still waits
    with transaction.atomic():
        settled = settle_chain_slots(b.pk, now, "default")
    assert [s.scheduled_for for s in settled.missed] == [T0]
    assert settled.run is not None and settled.run.scheduled_for == T0 + timedelta(minutes=60)
    statuses = dict(ChainSlot.objects.values_list("scheduled_for", "status"))
    assert statuses == {
        T0: ChainSlotStatus.MISSED,
        T0 + timedelta(minutes=30): ChainSlotStatus.WAITING,
        T0 + timedelta(minutes=60): ChainSlotStatus.RUN,
    }
    with transaction.atomic():
        again = settle_chain_slots(b.pk, now, "default")
    assert again.missed == () and again.run is None
