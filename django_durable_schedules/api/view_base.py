"""What every view of the API shares: :class:`APIViewMixin` (permission, JSON-only parsers,
schema, any id up to the next slash), cursor pagination (:class:`NewestFirstPagination`,
a malformed cursor a 404) and the mapping of a transition's errors to answers
(:func:`state_errors`: a conflict 409, a row gone 404, a field's refusal 400). The
endpoints are :mod:`.views` and their neighbours.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import status
from rest_framework.exceptions import APIException, NotFound, ValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.parsers import BaseParser
from rest_framework.permissions import BasePermission, OperandHolder, SingleOperandHolder
from rest_framework.request import Request
from rest_framework.schemas.inspectors import ViewInspector

from ..exceptions import StateConflict
from ..models import Schedule
from .parsers import BoundedJSONParser
from .permissions import ScheduleAPIPermission
from .schema import APIAutoSchema
from .visibility import redact_detail, redact_reason, visible_names


class Conflict(APIException):
    """409: the schedule's state does not allow the request (``detail`` says why)."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "The schedule's state does not allow this."
    default_code = "conflict"


@contextmanager
def state_errors(request: Request | None = None) -> Iterator[None]:
    """``StateConflict`` -> 409; a row deleted under us -> 404; a ``ValidationError`` of
    the transition (field messages) -> 400. With ``request`` of an owner-scoped user, a
    reason naming a calendar they cannot see does not name it
    (:func:`.visibility.redact_reason`)."""
    try:
        yield
    except StateConflict as exc:
        visible = visible_names(request) if request is not None else None
        raise Conflict(redact_reason(exc.reason, visible)) from None
    except Schedule.DoesNotExist:
        raise NotFound() from None
    except DjangoValidationError as exc:  # a transition's own field check: 400
        detail = exc.message_dict if hasattr(exc, "error_dict") else exc.messages
        if request is not None:
            detail = redact_detail(detail, visible_names(request))
        raise ValidationError(detail) from None


class NewestFirstPagination(CursorPagination):
    """Cursor pagination, 50 a page (``?page_size=`` up to 500). A malformed ``?cursor=``
    (not base64, as ``%%%``) is a 404 "Invalid cursor", not the first page."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500

    def decode_cursor(self, request: Request) -> Any:
        encoded = request.query_params.get(self.cursor_query_param)
        if encoded:
            try:
                base64.b64decode(encoded.encode("ascii"), validate=True)
            except (ValueError, UnicodeEncodeError):  # binascii.Error is a ValueError
                raise NotFound(self.invalid_cursor_message) from None
        return super().decode_cursor(request)


class SchedulePagination(NewestFirstPagination):
    """Schedules by name."""

    ordering = ("name",)


class AttemptPagination(NewestFirstPagination):
    """Attempts, newest claim first."""

    ordering = ("-claimed_at", "-id")


class ReceiptPagination(NewestFirstPagination):
    """Receipts, newest first."""

    ordering = ("-finished_at", "-id")


class APIViewMixin:
    """What every view of this API shares: permission, parsers, owner scoping."""

    permission_classes: Sequence[
        type[BasePermission] | OperandHolder | SingleOperandHolder  # as APIView declares it
    ] = [ScheduleAPIPermission]
    # JSON only: a form or multipart body (whose files Django streams to disk unbounded) is
    # a 415, not a schedule.
    parser_classes: Sequence[type[BaseParser]] = [BoundedJSONParser]
    schema: ViewInspector | None = APIAutoSchema()
    # Any id up to the next slash reaches the view, so a malformed one is a JSON 404 from
    # the API rather than the site's (HTML) 404 page.
    lookup_value_regex = "[^/]+"
