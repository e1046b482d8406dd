"""``ScheduleQuerySet``: the named predicates on schedules (claimable, due, waiting,
backfill ready, failing, degraded, leased, lease expired, late), one definition each.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

from django.db import models, router
from django.db.models import Exists, OuterRef, Q

from .. import timing
from .choices import Kind, Status
from .deadline_queries import DeadlineQueries
from .instants import LEASE_CEILING, LEASE_FLOOR

if TYPE_CHECKING:
    from .schedule import Schedule


class ScheduleQuerySet(DeadlineQueries, models.QuerySet["Schedule"]):
    """The named predicates on schedules, one definition each, used by the state machine,
    health, the admin and the API (``Schedule.objects.claimable(now)``). Each has a ``*_q``
    twin returning the ``Q`` object, for aggregates (``Count("id", filter=...)``).
    ``now`` is an aware UTC datetime, or an SQL expression of the database clock."""

    _readable = False

    def readable(self) -> ScheduleQuerySet:
        """This queryset, read so that a row written behind ``save()`` with a value no
        Python type holds (PostgreSQL ``-infinity``, a year beyond 9999; SQLite text where
        an instant belongs) never fails the whole read: when it does, the rows are read one
        by one, and a row that still fails is loaded with each value that can be read
        (the others ``None``; their names in the row's ``unreadable_fields``). For lists
        that show rows (the API), never for the engine's own reads."""
        clone: ScheduleQuerySet = cast(Any, self)._chain()
        clone._readable = True
        return clone

    def _clone(self) -> ScheduleQuerySet:
        clone = cast("ScheduleQuerySet", super()._clone())  # type: ignore[misc]
        clone._readable = self._readable
        return clone

    def _fetch_all(self) -> None:
        if not self._readable or self._result_cache is not None:
            super()._fetch_all()
            return
        from ..db.batch import ROW_PROBLEMS

        try:
            super()._fetch_all()
        except ROW_PROBLEMS:
            if self._iterable_class is not models.query.ModelIterable:
                raise
            self._result_cache = self._read_one_by_one()

    def _read_one_by_one(self) -> list[Any]:
        """The rows of this read one query each (see :meth:`readable`)."""
        from ..db.batch import ROW_PROBLEMS

        pks = list(self.values_list("pk", flat=True))
        base = cast(Any, self)._chain()
        base._readable = False
        base.query.clear_limits()
        names = [f.attname for f in self.model._meta.concrete_fields if not f.primary_key]
        rows: list[Any] = []
        for pk in pks:
            one = base.filter(pk=pk)
            try:
                rows.extend(one)
                continue
            except ROW_PROBLEMS:
                pass
            found = list(one.defer(*names))
            if not found:
                continue
            row, unreadable = found[0], []
            plain = self.model._base_manager.using(self.db).filter(pk=pk)
            for name in names:
                try:
                    row.__dict__[name] = plain.values_list(name, flat=True).get()
                except ROW_PROBLEMS:
                    row.__dict__[name] = None
                    unreadable.append(name)
            row.unreadable_fields = unreadable
            rows.append(row)
        return rows

    def bulk_create(  # type: ignore[override]
        self, objs: Iterable[Schedule], *args: Any, **kwargs: Any
    ) -> list[Schedule]:
        """``QuerySet.bulk_create`` that prepares new rows as ``save()`` does, with one read
        of the database clock for the whole batch: instants normalised, a missing
        ``created_at`` set to the database clock's time, a missing ``definition_hash``
        computed, and an active row without ``next_run_at`` planned to its first slot.
        Values given explicitly are kept (a bench may seed ``next_run_at``). Durations are
        not validated here (as with ``update()``, the engine bounds them when used).

        Each row is recorded as a ``created`` event (source ``code``) in the insert's
        transaction (:mod:`..state.code_events`). With ``ignore_conflicts`` or
        ``update_conflicts`` only the database knows which rows went in: its audit trigger
        records those (source ``database``, :mod:`..db.audit`)."""
        objs = list(objs)
        using = getattr(self, "_db", None) or router.db_for_write(self.model)
        db_time = None
        if any(obj.created_at is None or not obj.definition_hash for obj in objs):
            from ..db import clock

            db_time = clock.db_now(using)
            now = timing.truncate_to_second(db_time)
            for obj in objs:
                obj._normalize()
                if obj.created_at is None:
                    obj.created_at = db_time
                if not obj.definition_hash:
                    obj.definition_hash = obj.compute_definition_hash()
                    if obj.status == Status.ACTIVE and obj.next_run_at is None:
                        obj.next_run_at = obj.plan(now, first=True)
        conflicts = kwargs.get("ignore_conflicts") or kwargs.get("update_conflicts")
        if conflicts or any(args[1:3]):  # which rows went in is known to the database only
            created = super().bulk_create(objs, *args, **kwargs)  # type: ignore[arg-type]
            return cast("list[Schedule]", created)
        from ..state.code_events import inserting

        with inserting(objs, using, now=db_time):
            created = super().bulk_create(objs, *args, **kwargs)  # type: ignore[arg-type]
        return cast("list[Schedule]", created)

    def delete(self) -> tuple[int, dict[str, int]]:
        """``QuerySet.delete()`` that records one ``deleted`` event per row (source
        ``code``) in the same transaction (:func:`..state.code_events.delete_queryset`:
        the rows are read once, locked; Django's deletes follow). Unlike Django's, it
        always reads the rows, even where Django could delete without reading them."""
        from ..state.code_events import delete_queryset

        result = delete_queryset(self)
        self._result_cache = None
        return result

    @staticmethod
    def runnable_q() -> Q:
        """Rows a worker may run when due: active ones, and paused ones that were
        triggered (a paused schedule runs only when triggered, however it was paused)."""
        return Q(status=Status.ACTIVE) | Q(status=Status.PAUSED, triggered_at__isnull=False)

    @classmethod
    def claimable_q(cls, now: Any) -> Q:
        """Runnable, unleased and due: ``next_run_at <= now``."""
        return cls.runnable_q() & Q(lease_token__isnull=True, next_run_at__lte=now)

    def claimable(self, now: Any) -> ScheduleQuerySet:
        """What a claim may take at ``now`` (see :meth:`claimable_q`)."""
        return self.filter(self.claimable_q(now))

    @classmethod
    def backfill_ready_q(cls, now: Any) -> Q:
        """Rows that may run the next slot of their open backfill at ``now``: active or
        paused, unleased, and with no live work pending: no live slot due (the grid keeps
        priority), no retry, trigger or buffered slot waiting."""
        from .backfills import Backfill

        open_backfill = Exists(Backfill.objects.open().filter(schedule=OuterRef("pk")))
        return (
            Q(open_backfill)
            & Q(status__in=(Status.ACTIVE, Status.PAUSED), lease_token__isnull=True)
            & Q(retry_scheduled_for__isnull=True, triggered_at__isnull=True)
            & Q(buffered_for__isnull=True)
            & ~cls.claimable_q(now)
        )

    @staticmethod
    def chain_free_q() -> Q:
        """Kind ``after`` rows free to settle their chain slots: active, unleased, nothing
        pending (no retry, trigger or buffered slot: one occurrence at a time)."""
        return Q(
            kind=Kind.AFTER,
            status=Status.ACTIVE,
            lease_token__isnull=True,
            retry_scheduled_for__isnull=True,
            triggered_at__isnull=True,
            buffered_for__isnull=True,
        )

    @classmethod
    def chain_ready_q(cls, now: Any) -> Q:
        """Kind ``after`` rows a claim at ``now`` settles chain slots of: active, unleased,
        nothing pending (no retry, trigger or buffered slot: one occurrence at a time), and
        with a chain slot ready or past its deadline. Driven by the chain slots' index
        (``dds_chain_slot_deadline_idx``): bounded by the slots due, not the schedules."""
        from .chains import ChainSlot, chain_due_q

        due = ChainSlot.objects.filter(chain_due_q(now)).values("downstream_id")
        return Q(pk__in=due) & cls.chain_free_q()

    def chain_ready(self, now: Any) -> ScheduleQuerySet:
        """See :meth:`chain_ready_q`."""
        return self.filter(self.chain_ready_q(now))

    def backfill_ready(self, now: Any) -> ScheduleQuerySet:
        """See :meth:`backfill_ready_q`."""
        return self.filter(self.backfill_ready_q(now))

    @classmethod
    def waiting_q(cls) -> Q:
        """Runnable, unleased rows with a next run: what an idle worker waits for."""
        return cls.runnable_q() & Q(lease_token__isnull=True, next_run_at__isnull=False)

    def waiting(self) -> ScheduleQuerySet:
        """See :meth:`waiting_q`."""
        return self.filter(self.waiting_q())

    @staticmethod
    def pause_ending_q() -> Q:
        """Paused by an operator (not degraded) with an end (``paused_until``): what a
        worker resumes when the end comes; an idle worker wakes for the earliest end."""
        return Q(status=Status.PAUSED, paused_until__isnull=False, degraded_reason="")

    @classmethod
    def resume_due_q(cls, now: Any) -> Q:
        """A pause that ended by ``now``: :meth:`pause_ending_q` and ``paused_until <=
        now`` (``state.resume_paused`` resumes these)."""
        return cls.pause_ending_q() & Q(paused_until__lte=now)

    def resume_due(self, now: Any) -> ScheduleQuerySet:
        """See :meth:`resume_due_q`."""
        return self.filter(self.resume_due_q(now))

    @staticmethod
    def failing_q() -> Q:
        """Consecutive failed attempts on a schedule that still runs (active or paused); a
        terminally ``failed`` schedule is counted by its status instead. Served by the
        partial indexes ``dds_sched_failing_idx`` (by name) and ``dds_sched_failing_rank_idx``
        (most failures first, with the status: health's count reads it alone)."""
        return Q(failure_count__gt=0, status__in=(Status.ACTIVE, Status.PAUSED))

    def failing(self) -> ScheduleQuerySet:
        """See :meth:`failing_q`."""
        return self.filter(self.failing_q())

    @staticmethod
    def degraded_q() -> Q:
        """Paused by the engine because it could not run or evaluate it (a reason is set):
        the condition of the partial index ``dds_sched_degraded_idx``."""
        return ~Q(degraded_reason="")

    def degraded(self) -> ScheduleQuerySet:
        """See :meth:`degraded_q`."""
        return self.filter(self.degraded_q())

    @staticmethod
    def deadline_watched_q() -> Q:
        """Active schedules with a ``deadline_seconds``: those whose next deadline the
        metrics report (``contrib.prometheus``)."""
        return Q(status=Status.ACTIVE, deadline_seconds__isnull=False)

    def deadline_watched(self) -> ScheduleQuerySet:
        """See :meth:`deadline_watched_q`."""
        return self.filter(self.deadline_watched_q())

    #: A search term shorter than this matches the start of a name only (a fragment of one
    #: or two characters would match most rows and no trigram index serves it).
    SEARCH_FRAGMENT_MIN = 3

    def search(self, term: str) -> ScheduleQuerySet:
        """The schedules whose name or callback contains ``term`` (stripped), ignoring case
        (the admin's search box). A term shorter than :attr:`SEARCH_FRAGMENT_MIN` matches
        the start of the name only; an empty one matches every row. On PostgreSQL a
        fragment is a search of migration 0026's trigram indexes (``UPPER(name)``,
        ``UPPER(callback)``: what ``icontains`` compares); SQLite and MariaDB read the
        table (docs/admin.md gives the cost at a million schedules). A term starting
        with ``^`` matches the start of the name, case-sensitive: a range of the name's
        unique index on every database."""
        term = (term or "").strip()
        if term.startswith("^") and term[1:]:
            start = term[1:]
            # The range lets the index serve the prefix; startswith keeps the match exact
            # whatever the collation orders.
            return self.filter(
                name__gte=start, name__lt=start + "\U0010ffff", name__startswith=start
            )
        if not term:
            return self
        if len(term) < self.SEARCH_FRAGMENT_MIN:
            return self.filter(name__istartswith=term)
        return self.filter(Q(name__icontains=term) | Q(callback__icontains=term))

    @staticmethod
    def leased_q() -> Q:
        """A worker holds (or held, until recovery) the current attempt's lease. Read on
        ``lease_expires_at``, which a constraint pairs with ``lease_token`` and an index
        serves."""
        return Q(lease_expires_at__isnull=False)

    def leased(self) -> ScheduleQuerySet:
        """See :meth:`leased_q`."""
        return self.filter(self.leased_q())

    @staticmethod
    def group_room_q(now: Any) -> Q:
        """Not held back by a concurrency group at ``now``: no group, or a group neither
        at ``max_running`` (``full_until``) nor out of its rate (``rate_until``) as the
        last claim found it (:mod:`..state.group_rules`)."""
        from .groups import ConcurrencyGroup

        held = ConcurrencyGroup.objects.filter(pk=OuterRef("concurrency_group_id")).filter(
            ConcurrencyGroup.holding_q(now)
        )
        return Q(concurrency_group__isnull=True) | Q(~Exists(held))

    @staticmethod
    def parallel_room_q(now: Any) -> Q:
        """Not held back at its ``max_parallel`` running occurrences at ``now``
        (``overlap_policy`` allow, ``parallel_full_until``: :mod:`..state.parallel`)."""
        return Q(parallel_full_until__isnull=True) | Q(parallel_full_until__lte=now)

    @staticmethod
    def lease_live_q(now: Any) -> Q:
        """A lease that has not expired at ``now``."""
        return Q(lease_expires_at__gt=now)

    @staticmethod
    def lease_readable_q() -> Q:
        """A lease expiry in ``[LEASE_FLOOR, LEASE_CEILING]``: one the engine may have
        granted, so one a read can turn into a ``datetime`` (on SQLite: one that sorts
        among them; see :data:`LEASE_FLOOR`)."""
        return Q(lease_expires_at__gte=LEASE_FLOOR, lease_expires_at__lte=LEASE_CEILING)

    @staticmethod
    def lease_unreadable_q() -> Q:
        """A lease expiry outside ``[LEASE_FLOOR, LEASE_CEILING]`` (written behind
        ``save()``): recovered as expired at once, whatever its value."""
        return Q(lease_expires_at__lt=LEASE_FLOOR) | Q(lease_expires_at__gt=LEASE_CEILING)

    @classmethod
    def lease_expired_q(cls, now: Any) -> Q:
        """A lease that expired at or before ``now`` and was not recovered yet, or one no
        lease the engine grants could hold (after :data:`LEASE_CEILING`)."""
        return Q(lease_expires_at__lte=now) | Q(lease_expires_at__gt=LEASE_CEILING)

    def lease_expired(self, now: Any) -> ScheduleQuerySet:
        """See :meth:`lease_expired_q`."""
        return self.filter(self.lease_expired_q(now))

    def with_labels(self, labels: Iterable[tuple[str, str | None]]) -> ScheduleQuerySet:
        """The schedules whose ``metadata`` holds every one of ``labels``
        (``Schedule.objects.with_labels([("team", "data"), ("tier", None)])``: ``(key,
        value)`` pairs from :func:`.labels.parse_label`, value None: the key is present,
        with any value). Values compare as text (a JSON number or boolean also matches the
        text that spells it): see :mod:`.labels`. No index serves it (see there)."""
        from .labels import labels_filter

        aliases, q = labels_filter(labels, first=len(self.query.annotations))
        return cast(ScheduleQuerySet, self.alias(**aliases).filter(q))

    def overdue_deadline(self, now: Any) -> ScheduleQuerySet:
        """See :meth:`overdue_deadline_q`."""
        return self.filter(self.overdue_deadline_q(now))

    def late_scans(self, now: Any) -> tuple[ScheduleQuerySet, ...]:
        """The rows :meth:`late_q` selects at ``now``, as three reads that each an index
        serves, so a sweep stays cheap among a million schedules with few deadlines: due
        ones, most overdue first (``dds_sched_due_idx``: active, ``next_run_at <= now``),
        ones waiting for a retry after a failure (``failure_count > 0``: the partial
        ``dds_sched_failing_idx`` on PostgreSQL and SQLite; MariaDB/MySQL, which have no
        partial index, read the table) and running ones (``dds_sched_lease_idx``). Each
        is ordered by its own index (never by the default ``name``)."""
        # The last two say "active" as "no other status" (the column's CHECK allows no
        # other value), which no index serves: a planner without statistics (SQLite's)
        # then reads the scan's own partial index, not every active row of the due index.
        by_exclusion = self.active_by_exclusion_q()
        return (
            self.filter(self.late_waiting_q(now), next_run_at__lte=now).order_by("next_run_at"),
            self.filter(
                self.late_waiting_q(now, active=by_exclusion), failure_count__gt=0
            ).order_by(),
            self.filter(self.late_running_q(now, active=by_exclusion)).order_by("lease_expires_at"),
        )

    def with_running(self) -> ScheduleQuerySet:
        """Each schedule annotated with its run in flight and its running occurrences
        (:func:`.running_queries.annotate_running`): a page stays one query."""
        from .running_queries import annotate_running

        return annotate_running(self)
