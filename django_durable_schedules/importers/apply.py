"""Create the planned schedules (:func:`apply`) and count what happened (:class:`Summary`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError

from ..exceptions import validation_text
from .plans import Plan, Result


def apply(plans: Iterable[Plan], *, dry_run: bool = False, using: str = "default") -> list[Result]:
    """Create the planned schedules (``state.create_schedule(source="import")``; a disabled
    source is created paused, in the same transaction). A plan whose name is taken is left
    alone (``exists``), so re-running imports nothing twice. A plan whose callback has its
    schedule declared in code (``register(..., every=/cron=/rrule=/at=)``, synced at
    ``migrate``) is ``skipped`` with the reason (:func:`declared_in_code`): importing it
    would run that callback on two schedules. Nothing is written with ``dry_run``; plans
    are still validated."""
    from .. import state
    from ..models import Schedule
    from ..registry import registry

    plans = list(plans)
    declared = {reg.name for reg in registry.declared()}
    existing = {
        row.name: row
        for row in Schedule.objects.using(using).filter(name__in=[p.name for p in plans])
    }
    results = []
    taken: set[str] = set()  # names this import creates (or would): two plans, one name
    for plan in plans:
        row = existing.get(plan.name)
        same = row is not None and (
            row.metadata.get("imported_from") == plan.source
            and row.metadata.get("source_id") == plan.source_id
        )
        if same:
            results.append(Result(plan, "exists", "already imported", row))
            continue
        if plan.fields is None:
            results.append(Result(plan, "skipped", plan.skip))
            continue
        if row is not None:
            results.append(Result(plan, "exists", "a different schedule has this name", row))
            continue
        callback = plan.fields.get("callback")
        if callback in declared:  # its schedule is declared in code: it runs already
            results.append(Result(plan, "skipped", declared_in_code(callback, plan.source)))
            continue
        if plan.name in taken:  # the same verdict in a dry run as in the real run
            detail = f"name: another schedule of this import is named {plan.name!r}"
            results.append(Result(plan, "invalid", detail))
            continue
        try:
            if dry_run:
                state.validate_schedule(Schedule(**plan.fields))
                taken.add(plan.name)
                results.append(Result(plan, "would create"))
                continue
            # A disabled source is created paused in the same transaction: no worker can
            # run it in between.
            row = state.create_schedule(
                source="import", paused=not plan.enabled, using=using, **plan.fields
            )
        except ValidationError as exc:
            results.append(Result(plan, "invalid", validation_text(exc)))
            continue
        taken.add(plan.name)
        results.append(Result(plan, "created", "" if plan.enabled else "paused", row))
    return results


def declared_in_code(callback: str, source: str) -> str:
    """Why a source row whose callback's schedule is declared in code is not imported."""
    return (
        f"callback {callback!r} has its schedule declared in code (register(..., every=/cron=/"
        f"rrule=/at=)): importing this row would run it on two schedules; {source} still runs "
        "it until you disable it there (--disable-source leaves it alone)"
    )


@dataclass
class Summary:
    """Counts of :func:`apply` results by action."""

    counts: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, results: Iterable[Result]) -> Summary:
        counts: dict[str, int] = {}
        for r in results:
            counts[r.action] = counts.get(r.action, 0) + 1
        return cls(counts)

    def __str__(self) -> str:
        order = ["created", "would create", "exists", "invalid", "skipped"]
        parts = [f"{self.counts[a]} {a}" for a in order if self.counts.get(a)]
        return ", ".join(parts) or "nothing"
