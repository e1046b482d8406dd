"""The schedule list's filters beyond status and kind: degraded, failing, running (the
:class:`..models.ScheduleQuerySet` predicates that health and the API use too), label
(metadata keys and values, the API's ``?label=``), and the attempt list's worker filter.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any, cast

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest

from ..models import ScheduleQuerySet, WorkerHeartbeat
from ..models.labels import parse_label, parse_labels
from ..models.running_queries import running_q


class DegradedFilter(admin.SimpleListFilter):
    title = "degraded"
    parameter_name = "degraded"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Degraded"), ("no", "Not degraded")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "yes":
            return queryset.filter(ScheduleQuerySet.degraded_q())
        if self.value() == "no":
            return queryset.exclude(ScheduleQuerySet.degraded_q())
        return queryset


class FailingFilter(admin.SimpleListFilter):
    title = "failing"
    parameter_name = "failing"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Failing (consecutive failures)"), ("no", "Not failing")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "yes":  # the same predicate health counts
            return queryset.filter(ScheduleQuerySet.failing_q())
        if self.value() == "no":
            return queryset.exclude(ScheduleQuerySet.failing_q())
        return queryset


class RunningFilter(admin.SimpleListFilter):
    title = "running"
    parameter_name = "running"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Running (lease held)"), ("no", "Idle")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        # The row's lease, or an occurrence lease (overlap_policy "allow").
        if self.value() == "yes":
            return queryset.filter(running_q())
        if self.value() == "no":
            return queryset.exclude(running_q())
        return queryset


class WorkerFilter(admin.SimpleListFilter):
    """The attempts of one worker. Its choices are the workers that registered a heartbeat
    (newest first, at most :data:`WORKER_CHOICES`): Django's default, every distinct value
    of the column, would read the whole attempt table on every page."""

    title = "worker"
    parameter_name = "worker"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        workers = WorkerHeartbeat.objects.order_by("-last_seen_at").values_list(
            "worker_id", flat=True
        )
        return [(w, w) for w in workers[:WORKER_CHOICES]]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        return queryset.filter(worker=value) if value else queryset


#: Workers offered by :class:`WorkerFilter`.
WORKER_CHOICES = 50


#: Schedules read to offer :class:`LabelFilter`'s choices (the first by name: a range of
#: the name's unique index), and the most choices it offers.
LABEL_SAMPLE_ROWS = 200
LABEL_CHOICES = 50
#: A label value longer than this is not offered (it can still be typed in the URL).
LABEL_CHOICE_MAX_CHARS = 60


class LabelFilter(admin.SimpleListFilter):
    """``?label=key`` / ``?label=key:value`` (repeatable, all must match): the schedules whose
    metadata holds the labels, :meth:`..models.ScheduleQuerySet.with_labels` (the API's
    ``?label=`` rule). Any label can be typed in the URL; the choices offered are the
    commonest keys and ``key:value`` pairs among the first :data:`LABEL_SAMPLE_ROWS`
    schedules by name, at most :data:`LABEL_CHOICES`: a bounded read on every backend.
    Listing every distinct label would read each row's metadata (no portable index does
    it). A malformed label is the admin's "incorrect lookup" page, not a 500."""

    title = "label"
    parameter_name = "label"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        rows = model_admin.model.objects.order_by("name")
        return label_choices(rows.values_list("metadata", flat=True)[:LABEL_SAMPLE_ROWS])

    def has_output(self) -> bool:
        # Always applied: a label typed in the URL filters even when none is offered.
        return True

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        texts = self.used_parameters.get(self.parameter_name)
        if not texts:
            return queryset
        try:
            labels = parse_labels(texts if isinstance(texts, list) else [texts])
        except ValidationError as error:
            raise IncorrectLookupParameters(error) from None
        return cast(ScheduleQuerySet, queryset).with_labels(labels)


def label_choices(metadatas: Iterable[Any]) -> list[tuple[str, str]]:
    """The ``(parameter value, caption)`` choices of :class:`LabelFilter` from some rows'
    metadata: each key (``"team (any)"``) and each ``key:value`` (``"team = data"``) of a
    scalar value, commonest first, at most :data:`LABEL_CHOICES`; keys and values a label
    cannot name (:func:`..models.labels.parse_label`) or over
    :data:`LABEL_CHOICE_MAX_CHARS` are left out."""
    counts: Counter[tuple[str, str | None]] = Counter()
    for metadata in metadatas:
        if not isinstance(metadata, dict):
            continue
        for key, value in metadata.items():
            counts[(key, None)] += 1
            if value is not None and not isinstance(value, dict | list):
                text = json.dumps(value) if not isinstance(value, str) else value
                counts[(key, text)] += 1
    choices: list[tuple[str, str]] = []
    for (key, value), _ in sorted(
        counts.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1] or "")
    ):
        text = key if value is None else f"{key}:{value}"
        if ":" in key or len(text) > LABEL_CHOICE_MAX_CHARS:
            continue
        try:
            parse_label(text)
        except ValidationError:
            continue
        choices.append((text, f"{key} (any)" if value is None else f"{key} = {value}"))
        if len(choices) == LABEL_CHOICES:
            break
    return choices
