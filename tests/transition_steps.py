"""Hold the steps a test takes to the transition table.

:func:`observe` wraps the state functions a worker (or an operator) steps with
(``state.claim_due``, ``complete``, ``expire_leases``, ``recover_degraded``,
``regrid_other_rules``, ``resume_paused``, ``enable``,
``disable``, ``trigger``, ``cancel``) so that each call records, for every schedule it
touched, the triple ``(status before, event, status after)`` and fails at once (an
``AssertionError`` naming the schedule) when no declared row allows it
(:func:`django_durable_schedules.state.transitions.allows`). The event is
``"<step>:<what>"``: ``what`` is the receipt status written for the schedule's attempt in
that step, ``leased`` for an attempt given a live lease, or ``none`` when the step changed
the schedule's status without either (:data:`~django_durable_schedules.state.transitions.STEPS`).

Use it from an autouse fixture: ``observe(monkeypatch)``.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connections

from django_durable_schedules import state
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule, Status
from django_durable_schedules.state import transitions

#: state function -> the step it is observed as.
STEP_OF = {
    "claim_due": "claim",
    "complete": "complete",
    "expire_leases": "expire",
    "recover_degraded": "recover",
    "regrid_other_rules": "regrid",
    "resume_paused": "resume",
    "enable": "enable",
    "disable": "disable",
    "trigger": "trigger",
    "cancel": "cancel",
}


@dataclass
class Snapshot:
    statuses: dict[Any, str]
    names: dict[Any, str]
    attempts: dict[Any, Any]  # attempt id -> schedule id
    receipts: dict[Any, tuple[Any, Any, str]]  # receipt id -> (attempt id, schedule id, status)

    @classmethod
    def read(cls, using: str) -> Snapshot:
        rows = list(Schedule.objects.using(using).values_list("pk", "name", "status"))
        return cls(
            statuses={pk: status for pk, _, status in rows},
            names={pk: name for pk, name, _ in rows},
            attempts=dict(RunAttempt.objects.using(using).values_list("pk", "schedule_id")),
            receipts={
                pk: (attempt, schedule, status)
                for pk, attempt, schedule, status in RunReceipt.objects.using(using).values_list(
                    "pk", "attempt_id", "schedule_id", "status"
                )
            },
        )


@dataclass
class Observer:
    """The triples seen so far: (schedule name, before, event, after)."""

    seen: list[tuple[str, str, str, str]] = field(default_factory=list)

    def step(self, step: str, before: Snapshot, after: Snapshot) -> None:
        events: dict[Any, list[str]] = defaultdict(list)
        new_receipts = {
            attempt: (schedule, status)
            for pk, (attempt, schedule, status) in after.receipts.items()
            if pk not in before.receipts
        }
        if step == "claim":
            for attempt, schedule in after.attempts.items():
                if attempt not in before.attempts:
                    status = new_receipts.get(attempt, (None, "leased"))[1]
                    events[schedule].append(f"claim:{status}")
        else:
            for schedule, status in new_receipts.values():
                events[schedule].append(f"{step}:{status}")
        for pk, status in after.statuses.items():
            if pk in before.statuses and before.statuses[pk] != status and pk not in events:
                events[pk].append(f"{step}:none")
        wrong = []
        for pk, names in events.items():
            if pk not in before.statuses or pk not in after.statuses:
                continue  # created or deleted: the control rows, not a worker step
            was, now = before.statuses[pk], after.statuses[pk]
            if was not in Status.values:
                continue  # a status written behind save(): no row starts there
            for event in names:
                self.seen.append((after.names[pk], was, event, now))
                if not transitions.allows(was, event, now):
                    wrong.append(f"{after.names[pk]}: ({was!r}, {event!r}, {now!r})")
        assert not wrong, (
            "steps that no row of the transition table allows (state/transition_table.py): "
            + "; ".join(wrong)
        )

    def wrap(self, step: str, func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def observed(*args: Any, **kwargs: Any) -> Any:
            using = kwargs.get("using", "default")
            if connections[using].needs_rollback:
                return func(*args, **kwargs)  # nothing can be read: not observed
            before = Snapshot.read(using)
            result = func(*args, **kwargs)
            self.step(step, before, Snapshot.read(using))
            return result

        return observed

    def events(self, name: str) -> list[str]:
        """The events seen on the schedule ``name``, in order."""
        return [event for who, _, event, _ in self.seen if who == name]


def observe(monkeypatch: Any) -> Observer:
    """Wrap the state functions of :data:`STEP_OF` for the test; returns the observer."""
    observer = Observer()
    for name, step in STEP_OF.items():
        monkeypatch.setattr(state, name, observer.wrap(step, getattr(state, name)))
    return observer
