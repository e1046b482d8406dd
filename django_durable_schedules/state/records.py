"""The receipt a state rule builds (unsaved): :class:`Receipt`, turned into a
:class:`~..models.RunReceipt` row by :meth:`Receipt.model`."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..models import SUCCESS_STATUSES, RunReceipt
from ..uuids import uuid4


@dataclass
class Receipt:
    """One run's receipt as a rule builds it (unsaved; times UTC): :meth:`model` makes the
    :class:`~..models.RunReceipt` row that :mod:`.runs` and :mod:`.completion` insert."""

    attempt_id: uuid.UUID
    schedule_id: uuid.UUID
    occurrence: int
    status: str
    finished_at: datetime
    result: Any = None
    error_type: str = ""
    error_message: str = ""
    failure_count_after: int = 0
    next_run_at: datetime | None = None
    slots_skipped: int = 0

    def model(self) -> RunReceipt:
        return RunReceipt.build(
            id=uuid4(),
            attempt_id=self.attempt_id,
            schedule_id=self.schedule_id,
            occurrence=self.occurrence,
            succeeded_occurrence=self.occurrence if self.status in SUCCESS_STATUSES else None,
            status=self.status,
            finished_at=self.finished_at,
            result=self.result,
            error_type=self.error_type[:200],
            error_message=self.error_message,
            failure_count_after=self.failure_count_after,
            next_run_at=self.next_run_at,
            slots_skipped=self.slots_skipped,
        )
