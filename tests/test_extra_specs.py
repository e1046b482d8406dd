"""Further specs (``Spec.extra``, ``Schedule.extra_specs``): the union of several cron or RRULE
grids, one slot per instant. Pure: no database.

Every expected instant below was worked out by hand, not by running the code; the reasoning
is in the comments. The calendar facts used throughout (2026):

* 2026-01-01 is a Thursday, so 2026-03-29 (day 87 after it, 87 = 12*7 + 3) is a Sunday,
  2026-07-30 (day 210 = 30*7) a Thursday, 2026-08-01 (day 212) a Saturday, 2026-09-01
  (day 243 = 34*7 + 5) a Tuesday and 2026-10-25 (day 297 = 42*7 + 3) a Sunday.
* Europe/Paris is UTC+1 (CET) in winter and UTC+2 (CEST) in summer. Spring forward:
  Sunday 2026-03-29, 02:00 CET becomes 03:00 CEST (01:00 UTC): local 02:00-02:59 does not
  exist. Fall back: Sunday 2026-10-25, 03:00 CEST becomes 02:00 CET (01:00 UTC): local
  02:00-02:59 happens twice, first at 00:00-00:59 UTC (CEST), then 01:00-01:59 UTC (CET).
* Cron in a gap (DESIGN.md, the Vixie/cronie rule): a fixed-time job (hour field not
  starting with ``*``) whose wall time the gap skips runs once at the first instant after
  the gap (03:00 CEST = 01:00 UTC); in an overlap it runs once, at the first reading. A
  wildcard job (``30 * * * *``) runs at every real instant whose reading matches: both
  readings of an overlap.
* RRULE (RFC 5545 section 3.3.5): a local time in a gap is read with the offset before the
  gap (02:30 at +01:00 = 01:30 UTC, which is 03:30 CEST); in an overlap, the first
  occurrence (CEST).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_durable_schedules import timing
from django_durable_schedules.timing import InvalidSchedule, Spec
from django_durable_schedules.timing.exclusions import Exclusion, Exclusions

PARIS = "Europe/Paris"
ANCHOR = datetime(2026, 1, 1, tzinfo=UTC)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def paris(cron: str, *extra: str, **fields: object) -> Spec:
    return Spec(kind="cron", cron=cron, timezone=PARIS, anchor=ANCHOR, extra=extra, **fields)


# --------------------------------------------------------------------------------------
# Two crons across the spring-forward day
# --------------------------------------------------------------------------------------

# "30 2 * * *" and "0 3 * * *" (both fixed-time):
#   Sat 03-28 (CET, +1): 02:30 -> 01:30 UTC; 03:00 -> 02:00 UTC.
#   Sun 03-29: 02:30 is in the gap -> the first instant after it, 03:00 CEST = 01:00 UTC;
#              03:00 CEST = 01:00 UTC too: the same instant, one slot.
#   Mon 03-30 (CEST, +2): 02:30 -> 00:30 UTC; 03:00 -> 01:00 UTC.
SPRING = paris("30 2 * * *", "0 3 * * *")
SPRING_SLOTS = [
    utc(2026, 3, 28, 1, 30),
    utc(2026, 3, 28, 2, 0),
    utc(2026, 3, 29, 1, 0),
    utc(2026, 3, 30, 0, 30),
    utc(2026, 3, 30, 1, 0),
]


def test_spring_forward_coinciding_instant_fires_once():
    assert timing.upcoming(SPRING, utc(2026, 3, 28), 5) == SPRING_SLOTS


def test_spring_forward_next_after_each_slot():
    after = utc(2026, 3, 28)
    for expected in SPRING_SLOTS:
        after = timing.next_slot_after(SPRING, after)
        assert after == expected


def test_spring_forward_count_counts_the_coinciding_instant_once():
    # 3 days, 2 crons: 6 raw instants, one of them shared on 03-29.
    assert timing.count_slots(SPRING, utc(2026, 3, 28), utc(2026, 3, 31)) == 5
    # The single specs: 3 each.
    assert timing.count_slots(paris("30 2 * * *"), utc(2026, 3, 28), utc(2026, 3, 31)) == 3
    # Only 03-29 (UTC day): one instant.
    assert timing.count_slots(SPRING, utc(2026, 3, 29), utc(2026, 3, 30)) == 1


def test_spring_forward_latest_is_the_union_latest():
    # Up to 03-30 00:45 UTC, the latest is 03-30 00:30 (the 02:30 job); up to 03-29
    # 23:59 UTC, the shared 03-29 01:00.
    nb = utc(2026, 3, 27)
    assert timing.latest_slot_at_or_before(SPRING, utc(2026, 3, 30, 0, 45), not_before=nb) == utc(
        2026, 3, 30, 0, 30
    )
    assert timing.latest_slot_at_or_before(SPRING, utc(2026, 3, 29, 23, 59), not_before=nb) == utc(
        2026, 3, 29, 1, 0
    )


# --------------------------------------------------------------------------------------
# Two crons across the fall-back day
# --------------------------------------------------------------------------------------

# "30 2 * * *" (fixed-time) and "30 * * * *" (wildcard) on Sun 10-25, from local midnight
# (00:00 CEST = 10-24 22:00 UTC):
#   wildcard: 00:30 CEST = 22:30, 01:30 CEST = 23:30, 02:30 CEST = 00:30, 02:30 CET = 01:30,
#             03:30 CET = 02:30 UTC, ...
#   fixed:    02:30, first reading only = 00:30 UTC: the wildcard's too, one slot.
FALL = paris("30 2 * * *", "30 * * * *")
FALL_SLOTS = [
    utc(2026, 10, 24, 22, 30),
    utc(2026, 10, 24, 23, 30),
    utc(2026, 10, 25, 0, 30),
    utc(2026, 10, 25, 1, 30),
    utc(2026, 10, 25, 2, 30),
]


def test_fall_back_coinciding_instant_fires_once_and_the_wildcard_fires_twice():
    assert timing.upcoming(FALL, utc(2026, 10, 24, 22), 5) == FALL_SLOTS


def test_fall_back_count():
    # [22:00, 03:00) UTC: the 5 instants above; the two specs hold 1 + 5 = 6 raw.
    assert timing.count_slots(FALL, utc(2026, 10, 24, 22), utc(2026, 10, 25, 3)) == 5
    # The shared instant alone.
    assert timing.count_slots(FALL, utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 0, 31)) == 1


def test_fall_back_latest_and_nearest():
    nb = utc(2026, 10, 25)
    assert timing.latest_slot_at_or_before(FALL, utc(2026, 10, 25, 1, 45), not_before=nb) == utc(
        2026, 10, 25, 1, 30
    )
    # The main spec alone has only the first reading.
    assert timing.latest_slot_at_or_before(
        paris("30 2 * * *"), utc(2026, 10, 25, 1, 45), not_before=nb
    ) == utc(2026, 10, 25, 0, 30)
    # 01:10 UTC: 00:30 is 40 min before, 01:30 is 20 min after.
    assert timing.nearest_slot(FALL, utc(2026, 10, 25, 1, 10)) == utc(2026, 10, 25, 1, 30)


# --------------------------------------------------------------------------------------
# A cron and a rule across both DST days
# --------------------------------------------------------------------------------------

# "30 2 * * *" and "FREQ=DAILY;BYHOUR=2;BYMINUTE=30" (DTSTART local midnight of 2026-01-01,
# so BYSECOND 0):
#   Sat 03-28: both 02:30 CET = 01:30 UTC: one slot.
#   Sun 03-29: cron -> 03:00 CEST = 01:00 UTC; rule -> 02:30 at +01:00 = 01:30 UTC: two.
#   Mon 03-30: both 02:30 CEST = 00:30 UTC: one.
CRON_AND_RULE = paris("30 2 * * *", "FREQ=DAILY;BYHOUR=2;BYMINUTE=30")


def test_cron_and_rule_across_spring_forward():
    assert timing.upcoming(CRON_AND_RULE, utc(2026, 3, 28), 4) == [
        utc(2026, 3, 28, 1, 30),
        utc(2026, 3, 29, 1, 0),
        utc(2026, 3, 29, 1, 30),
        utc(2026, 3, 30, 0, 30),
    ]
    assert timing.count_slots(CRON_AND_RULE, utc(2026, 3, 28), utc(2026, 3, 31)) == 4


def test_cron_and_rule_across_fall_back():
    # Sat 10-24 (CEST): both 00:30 UTC. Sun 10-25: both the first reading, 00:30 UTC.
    # Mon 10-26 (CET): both 01:30 UTC. One slot a day.
    assert timing.upcoming(CRON_AND_RULE, utc(2026, 10, 24), 3) == [
        utc(2026, 10, 24, 0, 30),
        utc(2026, 10, 25, 0, 30),
        utc(2026, 10, 26, 1, 30),
    ]
    assert timing.count_slots(CRON_AND_RULE, utc(2026, 10, 24), utc(2026, 10, 27)) == 3


# "0 9 * * 1-5" (weekdays 09:00) and "FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0" (the
# 1st at 09:00), in summer (09:00 CEST = 07:00 UTC):
#   Thu 07-30, Fri 07-31 (cron), Sat 08-01 (the rule alone), Mon 08-03, Tue 08-04 (cron).
#   Tue 09-01: both, one slot.
WORKDAYS_AND_FIRST = paris("0 9 * * 1-5", "FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0")


def test_cron_and_rule_union():
    assert timing.upcoming(WORKDAYS_AND_FIRST, utc(2026, 7, 30), 5) == [
        utc(2026, 7, 30, 7),
        utc(2026, 7, 31, 7),
        utc(2026, 8, 1, 7),
        utc(2026, 8, 3, 7),
        utc(2026, 8, 4, 7),
    ]
    assert timing.count_slots(WORKDAYS_AND_FIRST, utc(2026, 9, 1), utc(2026, 9, 2)) == 1
    # 07-30 .. 08-05 (UTC days, end exclusive 08-06): Thu, Fri, Sat (rule), Mon..Wed = 6.
    assert timing.count_slots(WORKDAYS_AND_FIRST, utc(2026, 7, 30), utc(2026, 8, 6)) == 6


def test_rrule_main_with_a_cron_extra():
    # The same union with the kinds swapped: after Fri 07-31 07:00 UTC, Sat 08-01 (the
    # rule), then Mon 08-03 (the cron).
    spec = Spec(
        kind="rrule",
        rrule="FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0",
        timezone=PARIS,
        anchor=ANCHOR,
        extra=("0 9 * * 1-5",),
    )
    assert timing.upcoming(spec, utc(2026, 7, 31, 7), 2) == [utc(2026, 8, 1, 7), utc(2026, 8, 3, 7)]


# --------------------------------------------------------------------------------------
# Exclusions and the window apply to the union
# --------------------------------------------------------------------------------------


def _closed(*days: date) -> Exclusions:
    return Exclusions(dates=tuple(Exclusion("closed", d, "closed") for d in days))


def test_exclusions_apply_to_the_union():
    # 08-01 (the rule's Saturday) and 08-03 (a cron Monday) excluded: 07-30, 07-31, 08-04,
    # 08-05 remain.
    spec = paris(
        "0 9 * * 1-5",
        "FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0",
        exclusions=_closed(date(2026, 8, 1), date(2026, 8, 3), date(2026, 9, 1)),
    )
    assert timing.upcoming(spec, utc(2026, 7, 30), 4) == [
        utc(2026, 7, 30, 7),
        utc(2026, 7, 31, 7),
        utc(2026, 8, 4, 7),
        utc(2026, 8, 5, 7),
    ]
    # 6 slots in the window, 2 on excluded dates.
    assert timing.count_slots(spec, utc(2026, 7, 30), utc(2026, 8, 6)) == 4
    # 09-01: the shared slot is excluded once (one slot on that date, not two).
    assert timing.count_slots(spec, utc(2026, 9, 1), utc(2026, 9, 2)) == 0
    [day] = timing.excluded_days(spec, utc(2026, 9, 1), utc(2026, 9, 2))
    assert (day.exclusion.date, day.first, day.count) == (date(2026, 9, 1), utc(2026, 9, 1, 7), 1)
    # Up to 08-03 23:00 UTC the latest that fires is Fri 07-31 (08-01 and 08-03 excluded).
    assert timing.latest_slot_at_or_before(
        spec, utc(2026, 8, 3, 23), not_before=utc(2026, 7, 1)
    ) == utc(2026, 7, 31, 7)


def test_start_and_end_bound_every_member():
    # [07-31 07:00, 08-03 07:00] inclusive: Fri 07-31, Sat 08-01 (rule), Mon 08-03; then none.
    spec = paris(
        "0 9 * * 1-5",
        "FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0",
        start_at=utc(2026, 7, 31, 7),
        end_at=utc(2026, 8, 3, 7),
    )
    assert timing.upcoming(spec, utc(2026, 7, 1), 10) == [
        utc(2026, 7, 31, 7),
        utc(2026, 8, 1, 7),
        utc(2026, 8, 3, 7),
    ]
    assert timing.next_slot_after(spec, utc(2026, 8, 3, 7)) is None
    assert timing.count_slots(spec, utc(2026, 1, 1), utc(2027, 1, 1)) == 3
    assert timing.last_grid_slot(spec, utc(2026, 1, 1)) == utc(2026, 8, 3, 7)


def test_count_over_a_range_with_a_cap():
    # September 2026 (30 days, 1st a Tuesday): 22 weekdays; the rule's 09-01 is one of them.
    # 09:00 CEST = 07:00 UTC, inside the UTC month.
    start, end = utc(2026, 9, 1), utc(2026, 10, 1)
    assert timing.count_slots(WORKDAYS_AND_FIRST, start, end) == 22
    assert timing.count_slots(WORKDAYS_AND_FIRST, start, end, cap=5) == 5
    # "0 12 * * 6,0" adds the 8 weekend days (5, 6, 12, 13, 19, 20, 26, 27).
    spec = paris("0 9 * * 1-5", "FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0", "0 12 * * 6,0")
    assert timing.count_slots(spec, start, end) == 30


def test_words_name_the_union():
    assert timing.describe(WORKDAYS_AND_FIRST) == (
        "cron '0 9 * * 1-5' and rrule 'FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0' "
        "(Europe/Paris)"
    )
    assert timing.describe(paris("0 9 * * *")) == "cron '0 9 * * *' (Europe/Paris)"


# --------------------------------------------------------------------------------------
# Validation: field extra_specs, the item's position
# --------------------------------------------------------------------------------------


def _refused(spec: Spec) -> str:
    with pytest.raises(InvalidSchedule) as caught:
        spec.validate()
    assert caught.value.field == "extra_specs"
    return caught.value.message


def test_refused_on_other_kinds():
    for kind, fields in (
        ("interval", {"interval_seconds": 60, "anchor": ANCHOR}),
        ("once", {"run_at": ANCHOR}),
        ("manual", {}),
    ):
        message = _refused(Spec(kind=kind, extra=("0 9 * * *",), **fields))  # type: ignore[arg-type]
        assert "does not take extra_specs" in message


def test_bad_items_name_their_position():
    assert _refused(paris("0 9 * * *", "0 10 * * *", "61 * * * *")).startswith("item 2: ")
    assert _refused(paris("0 9 * * *", "FREQ=SOMETIMES")).startswith("item 1: ")
    assert (
        _refused(paris("0 9 * * *", "  "))
        == "item 1: an empty text is not a cron expression or a rule"
    )
    assert _refused(paris("0 9 * * *", "0 10 * * *", 5)) == (  # type: ignore[arg-type]
        "item 2: an int is not a cron expression or a rule"
    )
    # UNTIL in a further rule and end_at: the rule's own message, on this field.
    message = _refused(
        paris("0 9 * * *", "FREQ=DAILY;UNTIL=20270101T000000Z", end_at=utc(2026, 12, 1))
    )
    assert message.startswith("item 1: give the end once")


def test_at_most_ten_and_no_repeats():
    items = tuple(f"0 {h} * * *" for h in range(10, 21))
    assert _refused(paris("0 9 * * *", *items)) == "at most 10 further specs; got 11"
    paris("0 9 * * *", *items[:10]).validate()
    assert _refused(paris("0 9 * * *", "0 10 * * *", "0  10 * * *")) == "item 2: repeats item 1"
    assert _refused(paris("0 9 * * *", "0 9 * * *")) == "item 1: repeats the main spec"


def test_not_a_tuple_is_refused():
    spec = paris("0 9 * * *")
    object.__setattr__(spec, "extra", {"0 9": 1})
    assert _refused(spec) == "extra_specs must be a list of cron expressions or rules"


def test_a_rule_item_needs_an_anchor():
    message = _refused(Spec(kind="cron", cron="0 9 * * *", extra=("FREQ=DAILY",)))
    assert message.startswith("item 1: ")


# --------------------------------------------------------------------------------------
# Property: the union is the sorted, deduplicated merge of the single specs
# --------------------------------------------------------------------------------------

POOL = (
    "0 9 * * *",
    "30 2 * * *",
    "30 * * * *",
    "0 3 * * 0",
    "*/20 1-3 * * *",
    "0 9 * * 1-5",
    "FREQ=DAILY;BYHOUR=2;BYMINUTE=30",
    "FREQ=WEEKLY;BYDAY=SU;BYHOUR=2,3;BYMINUTE=0,30",
    "FREQ=MONTHLY;BYMONTHDAY=1,25,29;BYHOUR=9;BYMINUTE=0",
    "FREQ=HOURLY;INTERVAL=5;BYMINUTE=0",
)


def _single(item: str, zone: str) -> Spec:
    kind = timing.extra_kind(item)
    return Spec(
        kind=kind,
        cron=item if kind == "cron" else None,
        rrule=item if kind == "rrule" else None,
        timezone=zone,
        anchor=ANCHOR,
    )


@settings(max_examples=60, deadline=None)
@given(
    items=st.lists(st.sampled_from(POOL), min_size=2, max_size=4, unique=True),
    zone=st.sampled_from([PARIS, "America/New_York", "UTC"]),
    # Around both 2026 changes in Paris and New York (03-08, 03-29, 10-25, 11-01).
    after=st.sampled_from(
        [utc(2026, 3, 7), utc(2026, 3, 28), utc(2026, 10, 24), utc(2026, 10, 31)]
    ).flatmap(lambda d: st.integers(0, 2 * 86400).map(lambda s: d + timedelta(seconds=s))),
    count=st.integers(0, 12),
)
def test_union_is_the_merge_of_its_specs(items, zone, after, count):
    spec = Spec(
        kind=timing.extra_kind(items[0]),
        cron=items[0] if timing.extra_kind(items[0]) == "cron" else None,
        rrule=items[0] if timing.extra_kind(items[0]) == "rrule" else None,
        timezone=zone,
        anchor=ANCHOR,
        extra=tuple(items[1:]),
    )
    singles = [_single(item, zone) for item in items]
    merged = sorted({at for s in singles for at in timing.upcoming(s, after, count)})[:count]
    assert timing.upcoming(spec, after, count) == merged
    if merged:
        # The count of a window is the number of distinct instants of the singles in it.
        end = merged[-1] + timedelta(seconds=1)
        assert timing.count_slots(spec, after + timedelta(seconds=1), end) == len(merged)
        assert timing.next_slot_after(spec, after) == merged[0]
        assert timing.latest_slot_at_or_before(spec, merged[-1], not_before=after) == merged[-1]
