"""What a notifier receives (:class:`Notification`) and the base class of every backend
(:class:`Notifier`), with the payloads built from a notification (pure functions: no
database, no network).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

#: Largest ``detail`` a notification carries, as JSON (bytes); a larger one is replaced by
#: ``{"truncated": true, "bytes": N}``.
DETAIL_MAX_BYTES = 8192
#: Default and bounds of a notifier's ``timeout`` option (seconds).
DEFAULT_TIMEOUT = 10.0
TIMEOUT_MIN, TIMEOUT_MAX = 0.1, 300.0
#: The header that carries the HMAC-SHA256 signature of a webhook's body.
SIGNATURE_HEADER = "X-Durable-Schedules-Signature"

_SUMMARIES = {
    "deadline_missed": "missed its deadline",
    "failing": "is failing",
    "degraded": "is degraded (paused by the engine)",
    "paused": "was paused by the engine",
    "recovered": "recovered",
}


@dataclass(frozen=True)
class Notification:
    """One alert to send: ``event`` (the action: ``deadline_missed``, ``failing``,
    ``degraded``, ``paused``, ``recovered``, or any other event action a notifier's
    ``EVENTS`` names), ``schedule`` (its name), ``occurrence`` (or None), ``at`` (when the
    event was written, ISO 8601 UTC), ``detail`` (a JSON object, bounded to
    :data:`DETAIL_MAX_BYTES`), ``event_id`` and ``delivery_id`` (for idempotent
    receivers: a delivery may be sent more than once, see docs/monitoring.md)."""

    event: str
    schedule: str
    occurrence: int | None
    at: str
    detail: dict[str, Any] = field(default_factory=dict)
    event_id: str = ""
    delivery_id: str = ""

    def as_json(self) -> dict[str, Any]:
        """The webhook body: ``{"event", "schedule", "occurrence", "at", "detail"}``."""
        return {
            "event": self.event,
            "schedule": self.schedule,
            "occurrence": self.occurrence,
            "at": self.at,
            "detail": self.detail,
        }

    def summary(self) -> str:
        """One line for people: ``schedule "nightly" missed its deadline (occurrence 12)``."""
        what = _SUMMARIES.get(self.event, self.event)
        text = f'schedule "{self.schedule}" {what}'
        if self.occurrence is not None:
            text += f" (occurrence {self.occurrence})"
        return f"{text} at {self.at}"


def bounded_detail(value: Any) -> dict[str, Any]:
    """``value`` as a notification's ``detail``: a JSON object of at most
    :data:`DETAIL_MAX_BYTES` (anything else, or a larger one, is replaced by a small object
    saying so). Never raises."""
    if not isinstance(value, Mapping):
        return {} if value in (None, "") else {"value": _short(value)}
    try:
        text = json.dumps(value, default=str, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return {"unreadable": True}
    size = len(text.encode())
    if size > DETAIL_MAX_BYTES:
        return {"truncated": True, "bytes": size}
    result = json.loads(text)
    return result if isinstance(result, dict) else {}


def _short(value: Any) -> str:
    try:
        return str(value)[:200]
    except Exception:  # noqa: BLE001 - a value whose str() raises
        return "?"


def webhook_body(notification: Notification) -> bytes:
    """The JSON body a webhook posts (UTF-8, compact, keys sorted)."""
    return json.dumps(
        notification.as_json(), separators=(",", ":"), sort_keys=True, default=str
    ).encode()


def chat_body(notification: Notification) -> bytes:
    """The body of a chat incoming webhook (Slack, Mattermost, Teams): ``{"text": ...}``."""
    return json.dumps({"text": notification.summary()}).encode()


def signature(secret: str, body: bytes) -> str:
    """The signature header's value: ``sha256=<hex HMAC-SHA256 of body keyed by secret>``."""
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def timeout_of(options: Mapping[str, Any]) -> float:
    """A notifier's per-call timeout (seconds): its ``timeout`` option bounded to
    ``[TIMEOUT_MIN, TIMEOUT_MAX]``, :data:`DEFAULT_TIMEOUT` when absent or no number."""
    value = options.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return DEFAULT_TIMEOUT
    return min(TIMEOUT_MAX, max(TIMEOUT_MIN, float(value)))


def check_timeout(options: Mapping[str, Any]) -> list[str]:
    """Problems of a ``timeout`` option (a positive, finite number of seconds)."""
    if "timeout" not in options:
        return []
    value = options["timeout"]
    ok = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and TIMEOUT_MIN <= value <= TIMEOUT_MAX
    )
    return [] if ok else [f"'timeout' must be seconds from {TIMEOUT_MIN} to {TIMEOUT_MAX}"]


class Notifier:
    """The base class of a notification backend (``NOTIFIERS[name]["BACKEND"]``).

    Built once per worker with the entry's ``OPTIONS`` (a dict; :meth:`check_options` has
    accepted them). A worker calls :meth:`send` from a delivery thread of its own, one per
    notifier, with a per-call timeout of ``timeout`` seconds (option ``timeout``, default
    10): returning normally means delivered; raising any exception, or not returning in
    time, is a failure retried with backoff (only this notifier's deliveries wait). A send
    may be repeated after a worker died mid-send (at-least-once): receivers can
    de-duplicate with ``notification.delivery_id``.
    """

    #: Option names this backend accepts (any other is a configuration error).
    option_names: ClassVar[frozenset[str]] = frozenset({"timeout"})

    def __init__(self, options: Mapping[str, Any] | None = None):
        self.options: dict[str, Any] = dict(options or {})
        self.timeout = timeout_of(self.options)

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> list[str]:
        """The problems of ``options`` for this backend (empty when they are fine): unknown
        names and a bad ``timeout``. Subclasses extend it."""
        unknown = sorted(str(k) for k in options if k not in cls.option_names)
        problems = [f"unknown option {name!r}" for name in unknown]
        return problems + check_timeout(options)

    def send(self, notification: Notification) -> None:
        """Deliver ``notification``; raise on failure. Subclasses implement it."""
        raise NotImplementedError
