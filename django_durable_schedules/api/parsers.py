"""A JSON parser that bounds what it accepts before any field sees it."""

from __future__ import annotations

import codecs
import json
from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework import status
from rest_framework.exceptions import APIException, ParseError
from rest_framework.parsers import BaseParser
from rest_framework.renderers import JSONRenderer
from rest_framework.settings import api_settings

#: Body size limit when ``settings.DATA_UPLOAD_MAX_MEMORY_SIZE`` is None (bytes).
FALLBACK_MAX_BODY_BYTES = 2_621_440


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class RequestTooLarge(APIException):
    """413: the request body is larger than the site accepts."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "Request body too large."
    default_code = "request_too_large"


class BoundedJSONParser(BaseParser):
    """``application/json`` with limits: a body larger than
    ``settings.DATA_UPLOAD_MAX_MEMORY_SIZE`` is a 413 (read no further); nesting deep enough
    to exhaust the parser's recursion and strings with unpaired UTF-16 surrogates (which no
    database or UTF-8 response can hold) are a 400.

    Not a subclass of DRF's ``JSONParser``: DRF reads a ``JSONParser``'s whole body through
    Django's ``request.body`` first, whose own size check answers an HTML 400 before this
    parser can answer the API's JSON 413."""

    media_type = "application/json"
    renderer_class = JSONRenderer

    def parse(
        self,
        stream: IO[bytes] | None,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:  # any JSON value, as DRF's own JSONParser returns
        parser_context = parser_context or {}
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE or FALLBACK_MAX_BODY_BYTES
        request = parser_context.get("request")
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0) if request else 0
        except ValueError:
            length = 0
        if length > limit:
            raise RequestTooLarge(f"Request body is {length} bytes; at most {limit} accepted.")
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise RequestTooLarge(f"Request body exceeds {limit} bytes.")
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.decode(raw, encoding)
            parse_constant = _refuse_constant if api_settings.STRICT_JSON else None
            data = json.loads(text, parse_constant=parse_constant)
        except (ValueError, LookupError) as exc:
            if "sys.set_int_max_str_digits" in str(exc):  # Python's own advice: not the caller's
                raise ParseError("JSON parse error - a number has more than 4300 digits") from None
            raise ParseError(f"JSON parse error - {exc}") from None
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None
        try:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ParseError("JSON parse error - unpaired surrogate in a string") from None
        except RecursionError:  # pragma: no cover - parsed, so it also serialises
            raise ParseError("JSON parse error - nested too deeply") from None
        return data
