"""What a hard-timeout child sends back and when it may start a claim, as values (issue
24, items 13 and 14; the processes themselves: tests/test_hard_timeout_children.py).

A child bounds its outcome (:func:`state.bound_outcome`) before it pickles it, so whatever
``after_seconds`` a callback gave ``RetryRun`` can be sent back; and it compares the
claim's lease deadline, which the worker converts from the database clock to the host's
monotonic clock, with its own ``time.monotonic()``. No database, no process.
"""

from __future__ import annotations

import pickle
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from django_durable_schedules.conf import app_settings
from django_durable_schedules.state import Claim, Outcome, bound_outcome
from django_durable_schedules.worker.clock import WorkerClock

T0 = datetime(2027, 1, 1, tzinfo=UTC)
#: The fields of an outcome a child sends back (isolation_child).
SENT = (
    "status",
    "result",
    "error_type",
    "error_message",
    "terminal",
    "retry_after",
    "started_at",
    "traceback",
)
#: Anything a traceback sent back may be (bounded before it is pickled).
tracebacks = st.one_of(
    st.none(),
    st.lists(
        st.fixed_dictionaries(
            {"file": st.text(), "line": st.integers() | st.none(), "function": st.text()}
        ),
        max_size=80,
    ),
    st.builds(object),
)


def claim() -> Claim:
    return Claim(
        attempt_id=uuid.uuid4(),
        schedule_id=uuid.uuid4(),
        schedule_name="s",
        callback="tests.noop",
        occurrence=1,
        attempt=1,
        scheduled_for=T0,
        claimed_at=T0,
        lease_token=uuid.uuid4(),
        lease_expires_at=T0 + timedelta(seconds=30),
        idempotency_key="s:1",
        payload={},
        timeout_seconds=5,
    )


#: Anything a callback may pass as ``after_seconds``, picklable or not.
delays = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**64),
    st.floats(),
    st.text(max_size=5),
    st.decimals(),
    st.fractions(),
    st.lists(st.integers(), max_size=3),
    st.builds(lambda: lambda: 5),
    st.builds(threading.Lock),
    st.builds(object),
)


@given(
    after=delays,
    status=st.sampled_from(["failed", "succeeded", "skipped", "released"]),
    traceback=tracebacks,
)
def test_a_bounded_outcome_can_always_be_sent_back(after, status, traceback):
    outcome = bound_outcome(
        Outcome(
            claim(),
            status,
            error_type="RetryRun",
            error_message="x",
            retry_after=after,
            started_at=T0,
            traceback=traceback,
        )
    )
    fields = {name: getattr(outcome, name) for name in SENT}
    assert pickle.loads(pickle.dumps(fields)) == fields
    assert outcome.traceback is None or len(outcome.traceback) <= 50
    retry_after = outcome.retry_after
    if status != "failed" or retry_after is None:
        assert retry_after is None
    else:
        assert type(retry_after) is float
        assert 0 <= retry_after <= app_settings.RETRY_AFTER_MAX_SECONDS


def test_an_unpicklable_delay_becomes_the_backoff_and_says_so():
    outcome = bound_outcome(
        Outcome(claim(), "failed", error_type="RetryRun", retry_after=lambda: 5)  # type: ignore[arg-type]
    )
    assert outcome.retry_after is None
    assert "after_seconds=function is not a number of seconds" in outcome.error_message
    assert "backoff" in outcome.error_message


def test_a_lease_deadline_is_on_the_monotonic_clock_by_the_database_clock():
    """The worker's host clock plays no part: the database clock is read as 2030 here."""
    clock = WorkerClock("w", "default")
    db = datetime(2030, 1, 1, tzinfo=UTC)
    clock.note_reading(db)
    before = time.monotonic()
    deadline = clock.monotonic_at(db + timedelta(seconds=30))
    assert before + 25 < deadline <= time.monotonic() + 30
    assert clock.monotonic_at(db - timedelta(seconds=1)) < time.monotonic()  # lapsed
