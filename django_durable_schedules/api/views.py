"""API views: thin ViewSets over :mod:`..state` and :mod:`..health`.

No rule lives here. A :class:`~..exceptions.StateConflict` from a transition is a 409 with
``{"detail": reason}``; definition errors are 400s raised by the serializers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer
from rest_framework.views import APIView

from .. import health, state, timing
from ..db.names import with_calendar_names, with_link_names, with_window_names
from ..deadlines import with_open_slot
from ..models import RunAttempt, RunReceipt, Schedule, ScheduleEvent
from .backfill_serializers import (
    BackfillPlanSerializer,
    BackfillRangeSerializer,
    BackfillSerializer,
)
from .filters import AttemptFilter, ReceiptFilter, ScheduleFilter
from .health_serializers import HealthSerializer
from .pause_serializers import DisableSerializer
from .permissions import owner_scoped, scope
from .rerun_serializers import RerunSerializer
from .run_serializers import AttemptSerializer, EventSerializer, ReceiptSerializer
from .schema import extend_schema
from .serializers import (
    DetailSerializer,
    DuplicateSerializer,
    EnableSerializer,
    ScheduleSerializer,
    UpcomingQuerySerializer,
    UpcomingSerializer,
)
from .stats import ScheduleStatsMixin
from .trigger_serializers import TriggerSerializer
from .versions import ScheduleVersionsMixin
from .view_base import (
    APIViewMixin,
    AttemptPagination,
    Conflict,
    ReceiptPagination,
    SchedulePagination,
    state_errors,
)
from .visibility import redact_reason, visible_names

_CONFLICT = OpenApiResponse(DetailSerializer, description="State conflict (detail says why).")
_NOT_FOUND = OpenApiResponse(DetailSerializer, description="Not found (detail says what).")


class ScheduleViewSet(
    APIViewMixin, ScheduleStatsMixin, ScheduleVersionsMixin, viewsets.ModelViewSet
):
    """Schedules: CRUD, the operator transitions, the next fire times, the statistics
    (:class:`.stats.ScheduleStatsMixin`), the definition's versions and their restore
    (:class:`.versions.ScheduleVersionsMixin`)."""

    serializer_class = ScheduleSerializer
    pagination_class = SchedulePagination
    filter_backends = [DjangoFilterBackend]
    filterset_class = ScheduleFilter
    queryset = Schedule.objects.all()

    def get_queryset(self) -> Any:
        # The names of each row's calendars in the same query (a page stays one query).
        # readable(): a row with a value no datetime holds never fails the page.
        # with_running(): the run in flight of each row, in the same statement; the open
        # run's slot and the database clock too, for late and deadline_at.
        qs = with_open_slot(
            with_window_names(with_calendar_names(Schedule.objects.readable().with_running()))
        )
        owner = self.request.user if owner_scoped(self.request) else None
        return scope(with_link_names(qs, owner), self.request)  # the chain's names too

    def get_serializer_context(self) -> dict[str, Any]:
        context = dict(super().get_serializer_context())
        context["owner_scoped"] = owner_scoped(self.request)
        context["visible_calendars"] = visible_names(self.request)  # None: every one
        return context

    def _audit(self) -> dict[str, Any]:
        """Who and from where, for the audit trail."""
        return {"actor": self.request.user, "source": "api"}

    def perform_create(self, serializer: BaseSerializer[Schedule]) -> None:
        # An owner-scoped user's schedule is theirs: the serializer's state.prepare(owner=).
        serializer.save(**self._audit())

    def perform_update(self, serializer: BaseSerializer[Schedule]) -> None:
        serializer.save(**self._audit())

    @extend_schema(responses={204: None, 409: _CONFLICT})
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Delete; refused (409) while it holds a live lease or has an open attempt."""
        return super().destroy(request, *args, **kwargs)

    def perform_destroy(self, instance: Schedule) -> None:
        with state_errors():
            state.delete_schedule(instance.pk, **self._audit())

    def _transition(self, func: Callable[..., Schedule]) -> Response:
        schedule = self.get_object()
        with state_errors(self.request):
            row = func(schedule.pk, **self._audit())
        return Response(self.get_serializer(row).data)

    @extend_schema(request=EnableSerializer, responses={200: ScheduleSerializer, 409: _CONFLICT})
    @action(detail=True, methods=["post"])
    def enable(self, request: Request, pk: Any = None) -> Response:
        """Make a paused or failed schedule active again (no catch-up); a ``once`` one is
        re-armed (due at once, or at the ``run_at`` given)."""
        body = EnableSerializer(data=request.data or {})
        body.is_valid(raise_exception=True)
        run_at = body.validated_data.get("run_at")
        return self._transition(lambda pk, **audit: state.enable(pk, run_at=run_at, **audit))

    @extend_schema(request=DisableSerializer, responses={200: ScheduleSerializer, 409: _CONFLICT})
    @action(detail=True, methods=["post"])
    def disable(self, request: Request, pk: Any = None) -> Response:
        """Pause an active schedule, with an optional ``note`` and ``until`` (its end: a
        worker resumes it then); on one already paused, they update the pause."""
        body = DisableSerializer(data=request.data or {})
        body.is_valid(raise_exception=True)
        pause = {k: body.validated_data[k] for k in ("note", "until") if k in body.validated_data}
        return self._transition(lambda pk, **audit: state.disable(pk, **pause, **audit))

    @extend_schema(request=None, responses={200: ScheduleSerializer, 409: _CONFLICT})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: Any = None) -> Response:
        """Cancel for good."""
        return self._transition(state.cancel)

    @extend_schema(request=TriggerSerializer, responses={200: ScheduleSerializer, 409: _CONFLICT})
    @action(detail=True, methods=["post"])
    def trigger(self, request: Request, pk: Any = None) -> Response:
        """Run now, as its own occurrence, without disturbing the grid. Optional body:
        ``payload`` (a JSON object merged over the schedule's payload for this run; an
        owner-scoped user may override only the keys the callback's payload schema
        declares), ``note``, ``ignore_blackout``. 409 while a trigger with another
        override is pending."""
        body = TriggerSerializer(data=request.data or {})
        body.is_valid(raise_exception=True)
        args = body.validated_data
        kw = {
            "payload": args.get("payload"),
            "note": args.get("note", ""),
            "ignore_blackout": args["ignore_blackout"],
            "declared_only": owner_scoped(request),
        }
        return self._transition(lambda pk, **audit: state.trigger(pk, **kw, **audit))

    @extend_schema(request=RerunSerializer, responses={200: ScheduleSerializer, 409: _CONFLICT})
    @action(detail=True, methods=["post"])
    def rerun(self, request: Request, pk: Any = None) -> Response:
        """Run occurrence ``N`` again as a new attempt under its own idempotency key,
        without moving the grid (one attempt, no retry); ``force`` for one that
        succeeded. 400: an occurrence that never had an attempt; 409 while it runs, while
        a trigger, re-run or retry is pending, or for a succeeded one without ``force``."""
        body = RerunSerializer(data=request.data or {})
        body.is_valid(raise_exception=True)
        args = body.validated_data
        return self._transition(lambda pk, **audit: state.rerun(pk, **args, **audit))

    @extend_schema(request=DuplicateSerializer, responses={201: ScheduleSerializer})
    @action(detail=True, methods=["post"])
    def duplicate(self, request: Request, pk: Any = None) -> Response:
        """A copy of the schedule under a new ``name`` (its definition, policies, payload,
        metadata, owner, exclusion calendars and blackout windows), created **paused**
        until enabled (201 with the new schedule); 400 with field messages for a name taken
        or invalid."""
        schedule = self.get_object()
        body = DuplicateSerializer(data=request.data or {})
        body.is_valid(raise_exception=True)
        owner = request.user if owner_scoped(request) else None
        with state_errors(request):
            row = state.duplicate_schedule(
                schedule.pk, body.validated_data["name"], owner=owner, **self._audit()
            )
        shown = self.get_queryset().get(pk=row.pk)  # with its calendar names and clock
        return Response(self.get_serializer(shown).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=BackfillRangeSerializer,
        responses={201: BackfillSerializer, 200: BackfillPlanSerializer, 409: _CONFLICT},
    )
    @action(detail=True, methods=["post"])
    def backfill(self, request: Request, pk: Any = None) -> Response:
        """Run every slot of the past range ``[start, end)``, in order, one at a time, each
        as its own occurrence (201); slots that already succeeded are left out unless
        ``include_succeeded``; ``cascade``: the schedules downstream run again for each slot
        that succeeds. ``dry_run``: the slots it would run (200), nothing stored.
        409 while another backfill is open or the schedule is not active or paused."""
        schedule = self.get_object()
        body = BackfillRangeSerializer(data=request.data or {})
        body.is_valid(raise_exception=True)
        args = body.validated_data
        kw = {"include_succeeded": args["include_succeeded"]}
        try:
            with state_errors():
                if args["dry_run"]:
                    plan = state.plan_backfill(schedule, args["start"], args["end"], **kw)
                    return Response(BackfillPlanSerializer.shape(plan))
                made = state.request_backfill(
                    schedule.pk,
                    args["start"],
                    args["end"],
                    **kw,
                    cascade=args["cascade"],
                    **self._audit(),
                )
        except ValidationError as exc:  # "__all__" as DRF's non_field_errors
            detail = exc.detail
            if isinstance(detail, dict) and "__all__" in detail:
                detail = dict(detail)
                detail["non_field_errors"] = detail.pop("__all__")
            raise ValidationError(detail) from None
        return Response(BackfillSerializer(made).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: BackfillSerializer, 404: _NOT_FOUND})
    @backfill.mapping.get
    def show_backfill(self, request: Request, pk: Any = None) -> Response:
        """The schedule's open backfill with its progress (``position``, ``remaining``,
        ``status``), else its latest one; 404 when it never had one."""
        schedule = self.get_object()
        latest = state.open_backfill(schedule.pk) or state.latest_backfill(schedule.pk)
        if latest is None:
            raise NotFound("this schedule has no backfill")
        return Response(BackfillSerializer(latest).data)

    @extend_schema(request=None, responses={200: BackfillSerializer, 409: _CONFLICT})
    @backfill.mapping.delete
    def cancel_backfill(self, request: Request, pk: Any = None) -> Response:
        """Cancel the open backfill (a slot running now finishes); 409 when there is none."""
        schedule = self.get_object()
        with state_errors():
            done = state.cancel_backfill(schedule.pk, **self._audit())
        return Response(BackfillSerializer(done).data)

    @extend_schema(responses={200: EventSerializer(many=True)})
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def events(self, request: Request, pk: Any = None) -> Response:
        """The schedule's audit trail (control actions), newest first, at most 200."""
        schedule = self.get_object()
        rows = ScheduleEvent.objects.filter(schedule_id=schedule.pk).order_by("-at", "-id")[:200]
        context = {
            "visible_calendars": visible_names(request),
            "request": request,
            "owner_scoped": owner_scoped(request),  # other users' schedules left unnamed
        }
        return Response(EventSerializer(rows, many=True, context=context).data)

    @extend_schema(
        parameters=[UpcomingQuerySerializer],
        responses={200: UpcomingSerializer, 409: _CONFLICT},
    )
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def upcoming(self, request: Request, pk: Any = None) -> Response:
        """The next fire times (UTC and in the schedule's zone); with
        ``?include_excluded=1`` also the slots its exclusion calendars leave out and those
        inside its blackout windows (``blacked_out``)."""
        schedule = self.get_object()
        query = UpcomingQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = dict(query.validated_data)
        with_excluded = params.pop("include_excluded", False)
        try:
            moving = schedule.exclusion_policy != "skip"
            if not with_excluded and not moving and not schedule.blackouts():
                return Response(UpcomingSerializer.shape(schedule, schedule.upcoming(**params)))
            views = schedule.upcoming_slots(**params)  # blacked-out slots are not upcoming
        except timing.InvalidSchedule as exc:  # a stored definition made invalid behind save()
            reason = redact_reason(
                f"the stored definition is invalid: {exc}", visible_names(request)
            )
            raise Conflict(reason) from None
        times = [v.at for v in views if v.fires]
        visible = visible_names(request)  # a calendar the user cannot see is not named
        shown = views if with_excluded or moving else None
        return Response(UpcomingSerializer.shape(schedule, times, shown, visible, with_excluded))


class AttemptViewSet(APIViewMixin, viewsets.ReadOnlyModelViewSet):
    """Run attempts (append-only), newest first."""

    serializer_class = AttemptSerializer
    pagination_class = AttemptPagination
    filter_backends = [DjangoFilterBackend]
    filterset_class = AttemptFilter
    queryset = RunAttempt.objects.all()

    def get_queryset(self) -> Any:
        return scope(RunAttempt.objects.select_related("receipt"), self.request, "schedule__owner")


class ReceiptViewSet(APIViewMixin, viewsets.ReadOnlyModelViewSet):
    """Run receipts (append-only), newest first."""

    serializer_class = ReceiptSerializer
    pagination_class = ReceiptPagination
    filter_backends = [DjangoFilterBackend]
    filterset_class = ReceiptFilter
    queryset = RunReceipt.objects.all()

    def get_queryset(self) -> Any:
        return scope(RunReceipt.objects.select_related("attempt"), self.request, "schedule__owner")

    def get_serializer_context(self) -> dict[str, Any]:
        context = dict(super().get_serializer_context())
        context["visible_calendars"] = visible_names(self.request)  # None: every one
        return context


class HealthView(APIViewMixin, APIView):
    """The health snapshot: 200 when healthy, 503 when not (never open to owner-scoped
    users: it describes every schedule and worker)."""

    owner_scoped_access = False

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "exact",
                bool,
                description="1: look for attempts without a receipt or a lease over the "
                "whole attempts table (an anti-join with the receipts: seconds at ten "
                "million attempts), not only among the newest claims.",
            )
        ],
        responses={
            200: HealthSerializer,
            503: OpenApiResponse(HealthSerializer, description="Unhealthy: see problems."),
        },
    )
    def get(self, request: Request) -> Response:
        exact = request.query_params.get("exact", "").lower() in ("1", "true", "yes")
        snapshot = health.snapshot(exact=exact)
        code = status.HTTP_200_OK if snapshot.healthy else status.HTTP_503_SERVICE_UNAVAILABLE
        return Response(snapshot.as_dict(), status=code)
