"""HTTP notifiers: :class:`WebhookNotifier` (a JSON body, optionally signed) and
:class:`ChatWebhookNotifier` (``{"text": ...}`` for Slack, Mattermost or Teams incoming
webhooks). Standard library only (``urllib``).
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import urlsplit

from .base import SIGNATURE_HEADER, Notification, Notifier, chat_body, signature, webhook_body

#: Most bytes of a failed response's body kept in the error (the delivery's last_error).
ERROR_BODY_MAX = 200


class DeliveryFailed(Exception):
    """A send that reached no 2xx answer (the message says what happened)."""


def check_url(options: Mapping[str, Any]) -> list[str]:
    """Problems of a required ``url`` option (an absolute http or https URL)."""
    url = options.get("url")
    if not isinstance(url, str) or not url:
        return ["'url' is required: an http:// or https:// URL"]
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return [f"'url' must be an http:// or https:// URL, not {url[:100]!r}"]
    return []


def check_headers(options: Mapping[str, Any]) -> list[str]:
    """Problems of an optional ``headers`` option (a dict of str to str)."""
    headers = options.get("headers", {})
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and "\n" not in k + v for k, v in headers.items()
    ):
        return ["'headers' must be a dict of header names to string values"]
    return []


def post(url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> int:
    """POST ``body`` to ``url``; return the status (2xx). Raises :class:`DeliveryFailed`
    on any other status, a connection error or a timeout (``timeout`` seconds per socket
    operation)."""
    request = urllib.request.Request(url, data=body, method="POST")
    for name, value in headers.items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status = int(response.status)
    except urllib.error.HTTPError as exc:
        text = exc.read(ERROR_BODY_MAX).decode(errors="replace") if exc.fp else ""
        raise DeliveryFailed(f"HTTP {exc.code} from {url}: {text}".strip()) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DeliveryFailed(f"cannot POST to {url}: {reason}") from None
    if not 200 <= status < 300:  # pragma: no cover - urllib raises for these
        raise DeliveryFailed(f"HTTP {status} from {url}")
    return status


class WebhookNotifier(Notifier):
    """POSTs the notification as JSON ``{"event", "schedule", "occurrence", "at",
    "detail"}`` to ``url``.

    Options: ``url`` (required, http or https), ``secret`` (optional: the body's
    HMAC-SHA256 goes in header ``X-Durable-Schedules-Signature: sha256=<hex>``),
    ``timeout`` (seconds, default 10), ``headers`` (a dict added to each request). Headers
    ``X-Durable-Schedules-Event`` and ``X-Durable-Schedules-Delivery`` carry the event's and
    the delivery's ids. A status other than 2xx, or a connection error, is a failure."""

    option_names: ClassVar[frozenset[str]] = frozenset({"url", "secret", "timeout", "headers"})

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> list[str]:
        problems = super().check_options(options) + check_url(options) + check_headers(options)
        secret = options.get("secret")
        if secret is not None and not (isinstance(secret, str) and secret):
            problems.append("'secret' must be a non-empty string")
        return problems

    def body(self, notification: Notification) -> bytes:
        return webhook_body(notification)

    def send(self, notification: Notification) -> None:
        """POST the body; raises :class:`DeliveryFailed` unless the answer is 2xx."""
        body = self.body(notification)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "django-durable-schedules",
            "X-Durable-Schedules-Event": notification.event_id,
            "X-Durable-Schedules-Delivery": notification.delivery_id,
            **dict(self.options.get("headers") or {}),
        }
        secret = self.options.get("secret")
        if secret:
            headers[SIGNATURE_HEADER] = signature(str(secret), body)
        post(str(self.options["url"]), body, headers, self.timeout)


class ChatWebhookNotifier(WebhookNotifier):
    """Posts ``{"text": "schedule \\"nightly\\" missed its deadline ..."}``: the incoming
    webhook format of Slack, Mattermost and Microsoft Teams. Options as
    :class:`WebhookNotifier`'s."""

    def body(self, notification: Notification) -> bytes:
        return chat_body(notification)
