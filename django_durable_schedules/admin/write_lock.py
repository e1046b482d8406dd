""":class:`WriteLockedForm`: an admin whose add/change POST takes the write lock first.

Django runs an admin form page in one transaction that reads (validation) before it
writes; on SQLite that transaction cannot wait for a concurrent writer (a worker's claim),
so a POST takes the write lock first (:func:`..state.write_transaction`). GET pages only
read and take nothing.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import router
from django.http import HttpRequest, HttpResponse

from .. import state


class WriteLockedForm(admin.ModelAdmin):
    """A ``ModelAdmin`` whose ``changeform_view`` POST runs under the write lock."""

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        if request.method != "POST":
            return super().changeform_view(request, object_id, form_url, extra_context)
        with state.write_transaction(using=router.db_for_write(self.model)):
            return super().changeform_view(request, object_id, form_url, extra_context)
