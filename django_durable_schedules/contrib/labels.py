"""Bounded metric label values: the ``schedule`` label of at most ``METRICS_MAX_SCHEDULES``
schedules, the rest summed under :data:`OTHER` (:class:`ScheduleLabels`), and receipt
statuses limited to the known ones (:func:`status_label`).

No dependency on a metrics library: :mod:`.prometheus`, :mod:`.sentry` and :mod:`.otel`
use it (after the app registry is ready).
"""

from __future__ import annotations

import threading

from ..models.choices import SUCCESS_STATUSES, ReceiptStatus

#: The label of every schedule beyond the cap. Not a valid schedule name (names start with
#: a letter or a digit), so it never collides with one.
OTHER = "_other"
#: Longest label value kept (characters; a schedule name is at most 128).
MAX_LABEL_CHARS = 128
#: The receipt statuses a ``status`` label may take (every ``ReceiptStatus``); anything
#: else is ``"other"``.
STATUSES = frozenset(ReceiptStatus.values)
#: Receipt statuses that are a failure for an integration (Sentry ``error``, an
#: OpenTelemetry span's ERROR status): every status but a success, a ``skipped`` run (the
#: callback chose not to run), a ``released`` one (handed back at a shutdown, re-run) and a
#: ``replaced`` one (stopped for the next slot, as its ``overlap_policy`` replace asks).
FAILURE_STATUSES = STATUSES - {*SUCCESS_STATUSES, "skipped", "released", "replaced"}


def status_label(status: object) -> str:
    """``status`` if it is a known receipt status, else ``"other"``."""
    text = str(status)
    return text if text in STATUSES else "other"


class ScheduleLabels:
    """The ``schedule`` label of each schedule name: the name itself for the first ``cap``
    distinct names seen (they keep it for the life of the process, whatever comes later:
    a series never changes label), :data:`OTHER` for every name after that. Thread-safe;
    one dict lookup per call once a name was seen."""

    def __init__(self, cap: int):
        self.cap = max(0, int(cap))
        self._own: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, name: object) -> str:
        """The label of the schedule called ``name`` (bounded to
        :data:`MAX_LABEL_CHARS`; an empty or non-text name is :data:`OTHER`)."""
        if not isinstance(name, str) or not name:
            return OTHER
        label = name[:MAX_LABEL_CHARS]
        if label in self._own:
            return label
        with self._lock:
            if label in self._own:
                return label
            if len(self._own) < self.cap:
                self._own.add(label)
                return label
        return OTHER

    def owned(self) -> frozenset[str]:
        """The names that have a label of their own (a snapshot)."""
        with self._lock:
            return frozenset(self._own)

    def full(self) -> bool:
        """Whether the cap is reached (every new name is :data:`OTHER`)."""
        return len(self._own) >= self.cap
